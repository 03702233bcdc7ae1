/**
 * Main ↔ shard messages of the channels area (type-only). Each request goes to the shard
 * owning the channel (`channelShardFor(appId, channel, shardCount)`), except
 * `channels.list`, which every shard answers for the channels it owns.
 */

export interface ChannelShardApi {
  /** Records a subscription; answers what the subscriber needs. Throws PRESENCE_MEMBER_LIMIT. */
  'channels.subscribe': {
    req: {
      appId: string;
      channel: string;
      socketId: string;
      /** Presence channels only. */
      member?: { userId: string; userInfo?: unknown };
      /** A recovering client's last serial: the answer carries `recovery`. */
      since?: string;
      /**
       * With `since`: the socket ids the client had since that serial (previous_socket_ids,
       * history/previous-sockets.ts): an event left out for one of them is not replayed.
       */
      previousSocketIds?: string[];
    };
    res: {
      subscriptionCount: number;
      /** The channel had no subscriber before this join. */
      occupied: boolean;
      /** Presence: this join is the user's first connection on the channel. */
      memberAdded?: boolean;
      /**
       * Presence: the members after the join as JSON text, `{"ids":[…],"hash":{…},"count":N}`
       * (ChannelStore.presenceJson): one string to ship, spliced into subscription_succeeded.
       */
      presence?: string;
      /** Cache channels: the cached event, or null (a cache miss). */
      cached?: { event: string; data: string } | null;
      /** With `since`: the kept events after it, read with the join (nothing published between the two). */
      recovery?: HistoryRecovery;
    };
  };
  /** Removes a subscription; a socket that was not subscribed changes nothing. */
  'channels.unsubscribe': {
    req: { appId: string; channel: string; socketId: string };
    res: { subscriptionCount: number; vacated: boolean; memberRemoved?: boolean };
  };
  /**
   * Joins and leaves in order, as one message (the main thread batches them per shard, see
   * adapter/membership-batches.ts). Each op answers like channels.subscribe / unsubscribe would,
   * or with its own error (PRESENCE_MEMBER_LIMIT): one op failing does not fail the others.
   */
  'channels.memberships': {
    req: { ops: MembershipOp[] };
    res: { results: MembershipOpResult[] };
  };
  /**
   * Brings the shard's subscribers in line with what the front end holds (see
   * adapter/membership-batches.ts). Sent in parts of one `session`; the part with `last` applies
   * it: every subscriber of this shard not listed is removed as a leave would (webhooks
   * included) and answered in `removed`; a listed one the shard lacks is recorded again
   * silently, as channels.restore does, unless it is `leaving` (its leave is on the way).
   * With `frontEnd`, the list is that front-end thread's and only subscribers whose socket id
   * carries it (socket-id.ts threadOf) are compared and removed; each front end's sessions are
   * then kept apart from the others'.
   */
  'channels.reconcile': {
    req: { session: number; subscriptions: ReconciledSubscription[]; last: boolean; frontEnd?: number };
    res: { removed: ReconcileRemoval[]; restored: number };
  };
  /**
   * A digest of every subscription this shard holds (state/subscription-digest.ts), for the
   * periodic reconcile check; with `frontEnd`, of those whose socket id carries that thread.
   */
  'channels.digest': {
    req: { frontEnd?: number };
    res: { count: number; sum: number; xor: number };
  };
  /**
   * A front-end thread is gone: every subscriber of this shard whose socket id carries it is
   * removed as a leave would be (webhooks included), and answered in `removed` as a reconcile
   * answers its removals, for the frames the channels' other sockets should see.
   */
  'channels.dropFrontEnd': {
    req: { frontEnd: number };
    res: { removed: ReconcileRemoval[] };
  };
  /** One channel's state (C4, and trigger `info`). */
  'channels.info': {
    req: { appId: string; channel: string; userCount?: boolean; subscriptionCount?: boolean; cache?: boolean };
    res: { occupied: boolean; userCount?: number; subscriptionCount?: number; cache?: { data: string; ttl: number } | null };
  };
  /** This shard's occupied channels of an app (C3), sorted by name; user counts (same order) when asked. */
  'channels.list': {
    req: { appId: string; prefix?: string; withUserCount: boolean };
    res: { names: string[]; userCounts: number[] | null };
  };
  /** This shard's occupied channels: all of them, and those of each app asked for (the overview). */
  'channels.counts': {
    req: { appIds: string[] };
    res: { total: number; byApp: number[] };
  };
  /** User ids of a presence channel (C6). */
  'channels.users': {
    req: { appId: string; channel: string };
    res: { userIds: string[] };
  };
  /**
   * Records again subscriptions this shard lost when its worker was replaced (the main thread
   * still holds them). Silent: no webhooks, no member limit, no cache replay; a subscription
   * the shard already has is left as it is.
   */
  'channels.restore': {
    req: {
      appId: string;
      subscriptions: { channel: string; socketId: string; member?: { userId: string; userInfo?: unknown } }[];
    };
    res: { restored: number };
  };
  /** Keeps the last event of a cache channel for the app's cacheTtlSeconds. */
  'channels.storeCache': {
    req: { appId: string; channel: string; event: string; data: string };
    res: {};
  };
  /**
   * Events on history channels, as one message (the main thread gathers those of one event-loop
   * turn per shard): the owning shard gives each its channel's next serial and keeps it, in
   * order; answered once all are committed (durable), so frames go out in serial order and
   * never with a serial a crash could give again. Each answers its serial (null: the app keeps
   * no history for the channel now, changed by a reload meanwhile; the event goes out without
   * one) or its own error.
   */
  'channels.historyAppends': {
    req: { appends: HistoryAppend[] };
    res: { results: ({ ok: true; serial: string | null } | { ok: false; code: string; message: string })[] };
  };
  /** A history channel's kept events (the history API): after `since`, or the last `limit`. */
  'channels.history': {
    req: { appId: string; channel: string; since?: string; limit: number };
    res: HistoryRead;
  };
  /** A client event was relayed: only sent when the app has a webhook wanting client_event. */
  'channels.clientEvent': {
    req: { appId: string; channel: string; event: string; data: string; socketId: string; userId?: string };
    res: {};
  };
}

/** An event for a history channel's owner to keep (channels.historyAppend). */
export interface HistoryAppend {
  appId: string;
  channel: string;
  event: string;
  data: string;
  /** Presence client events: the sender's user id. */
  userId?: string;
  /**
   * The socket the event must not reach (a client event's sender, a trigger's `socket_id`):
   * kept with the event, so that a recovering join does not replay it to that client.
   */
  except?: string;
}

/** What a shard tells every front-end thread when several serve: a history channel's event was kept (front-end-notices.ts). */
export interface KeptNotice {
  type: 'channels.kept';
  appId: string;
  channel: string;
  /** The frame, serial included. */
  frame: string;
  except?: string;
}

/** A kept event of a history channel. */
export interface KeptEvent {
  /** `<generation>-<sequence>`, zero-padded: string order is publish order (history/serial.ts). */
  serial: string;
  event: string;
  data: string;
  /** Epoch ms at which the owning shard took it. */
  publishedAt: number;
  /** Presence client events: the sender's user id. */
  userId?: string;
}

/**
 * A kept event with the socket it is not sent to (a client event's sender, a trigger's
 * socket_id; undefined: every socket). For the server's own use (delivery, a recovering join's
 * replay): the except socket is never in what a client or the history API receives.
 */
export interface KeptEnvelope {
  kept: KeptEvent;
  exceptSocketId: string | undefined;
}

/** Kept events after a serial (or the last ones), and whether nothing else is missing. */
export interface HistoryRead {
  events: KeptEvent[];
  /** False when events after `since` were evicted, or `limit` cut the answer. */
  complete: boolean;
}

/** What a recovering join answers: the kept events after its `since`, or why there are none to trust. */
export interface HistoryRecovery {
  events: KeptEvent[];
  /** Null: every event after `since` is in `events`. */
  failed: null | 'history_evicted' | 'not_a_history_channel' | 'invalid_serial' | 'invalid_previous_socket_ids';
}

/** One join or leave of a channels.memberships batch. */
export type MembershipOp =
  | { join: ChannelShardApi['channels.subscribe']['req'] }
  | { leave: ChannelShardApi['channels.unsubscribe']['req'] };

/** The answer to one op: its value, or its error (a code from the catalogue). */
export type MembershipOpResult =
  | { ok: true; value: ChannelShardApi['channels.subscribe']['res'] | ChannelShardApi['channels.unsubscribe']['res'] }
  | { ok: false; code: string; message: string };

/** A subscription the front end holds, as channels.reconcile lists it. */
export interface ReconciledSubscription {
  appId: string;
  channel: string;
  socketId: string;
  member?: { userId: string; userInfo?: unknown };
  /** Its leave is queued: keep it if present, never add it. */
  leaving?: boolean;
}

/** A subscriber channels.reconcile or channels.dropFrontEnd removed, for the frames others should see. */
export interface ReconcileRemoval {
  appId: string;
  channel: string;
  /** Presence: the user whose last connection this was. */
  memberRemoved?: string;
  /** Subscribers left, when the app counts subscriptions (subscription_count frames). */
  subscriptionCount?: number;
}
