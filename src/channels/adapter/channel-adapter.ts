/**
 * The channel-state adapter: everything the WebSocket front end and the channel HTTP API
 * need from channel state, behind one interface. The local implementation (local-adapter.ts)
 * keeps state on the worker shards that own each channel and delivers frames with uWS topics;
 * a later scale-out implementation will do the same over Redis pub/sub. Main-thread code
 * talks only to this interface, never to shards directly for channel state.
 */

/** A presence member as stored: user id and the user_info object it subscribed with. */
export interface PresenceMember {
  userId: string;
  userInfo?: unknown;
}

export interface SubscribeRequest {
  appId: string;
  channel: string;
  socketId: string;
  /** Presence channels only. */
  member?: PresenceMember;
}

/** A cache channel's cached event: name and data as last published. */
export interface CachedEvent {
  event: string;
  data: string;
}

export interface SubscribeResult {
  /** Presence only: the members after this join (for subscription_succeeded). */
  presence?: { ids: string[]; hash: Record<string, unknown>; count: number };
  /** Presence only: true when this join is the user's first connection (member_added due). */
  memberAdded?: boolean;
  /** Subscribers (connections) after this join, for subscription_count. */
  subscriptionCount: number;
  /**
   * Cache channels only: the event to replay to the new subscriber, or null on a miss. Call it
   * in the same synchronous block that puts the socket on the channel's topic, in the event-loop
   * turn the subscribe resolved in: an event published on the channel after the owning shard
   * read its cache (while the join was in flight, when the socket could not receive it yet)
   * replaces the shard's answer, so the subscriber never gets an older event as the latest.
   */
  cached?: () => CachedEvent | null;
}

/** A relayed client event, for the client_event webhook. */
export interface RelayedClientEvent {
  appId: string;
  channel: string;
  event: string;
  data: string;
  socketId: string;
  /** Presence channels: the sender's user id. */
  userId?: string;
}

export interface UnsubscribeResult {
  /** Presence only: true when the user's last connection left (member_removed due). */
  memberRemoved?: boolean;
  /** Subscribers (connections) after this leave. */
  subscriptionCount: number;
}

/** A subscription the front end holds (restore()): presence ones carry their member. */
export interface HeldSubscription {
  appId: string;
  channel: string;
  socketId: string;
  member?: PresenceMember;
  /** The front end no longer wants it: its leave is queued or in flight. */
  leaving?: boolean;
}

/** Tells which channels lost their state (see ChannelAdapter.onStateLost). */
export type LostChannels = (appId: string, channel: string) => boolean;

export interface ChannelInfoRequest {
  userCount?: boolean;
  subscriptionCount?: boolean;
  cache?: boolean;
}

export interface ChannelInfo {
  occupied: boolean;
  userCount?: number;
  subscriptionCount?: number;
  /** Cache channels: `{data, ttl}` (ttl in whole seconds left) or null when empty. */
  cache?: { data: string; ttl: number } | null;
}

export interface ChannelAdapter {
  /**
   * Delivers a ready-encoded frame to every subscriber of the channel, except the socket
   * with `exceptSocketId` (uWS `ws.publish`). Synchronous hand-off: no await on the hot path.
   */
  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): void;
  /** Records the last event of a cache channel (fire-and-forget to the owning shard). */
  storeCachedEvent(appId: string, channel: string, event: string, data: string): void;
  /**
   * A client event was relayed: hands it to the client_event webhook (fire-and-forget). Call
   * it only for apps with a webhook that wants client_event: it costs a message per event.
   */
  clientEvent(e: RelayedClientEvent): void;
  /**
   * Records a subscription on the owning shard; the caller has already authorised it. Adapters
   * may queue joins under load; `wanted` tells whether the caller still wants one that has not
   * been sent yet: if not, it is dropped and the promise resolves with null (nothing was done).
   */
  subscribe(req: SubscribeRequest, wanted?: () => boolean): Promise<SubscribeResult | null>;
  /**
   * Removes a subscription (explicit unsubscribe or socket close). Never dropped: the adapter
   * retries until it is applied; it rejects only when the server shuts down.
   */
  unsubscribe(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult>;
  /** One channel's state (C4). Many channels: call per channel; they live on different shards. */
  channelInfo(appId: string, channel: string, want: ChannelInfoRequest): Promise<ChannelInfo>;
  /** Occupied channels of an app (C3), optionally by prefix, with user_count when asked. */
  listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<Record<string, { user_count?: number }>>;
  /** User ids of a presence channel (C6). */
  presenceUserIds(appId: string, channel: string): Promise<string[]>;
  /** Closes every local connection of a signed-in user (C5); returns how many were closed. */
  terminateUserConnections(appId: string, userId: string): number;
  /** True when a socket id belongs to a live local connection of the app. */
  hasSocket(appId: string, socketId: string): boolean;
  /**
   * For adapters whose state can be lost while the sockets stay connected (the local one: a
   * shard worker died and was replaced, its subscribers and members with it). Registers `held`,
   * which the adapter calls with the channels that lost their state; it answers the
   * subscriptions the front end holds on them, and the adapter records those again, silently:
   * no frames, no webhooks, no member limit. The local adapter also reconciles each shard with
   * what `held` answers (ghost subscribers removed). Adapters that cannot lose state leave it out.
   */
  onStateLost?(held: (lost: LostChannels) => HeldSubscription[]): void;
}
