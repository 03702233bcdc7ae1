/**
 * The channel adapter: everything the WebSocket front end and the channel HTTP API need from
 * channel state and channel delivery, behind one interface made of four concerns: delivery
 * (frames to sockets), channel state (subscriptions, the cache, the reads of the HTTP API),
 * presence (signed-in users and their watchers) and the node's lifecycle (its connections, a
 * lost state, the stop). Every frame that goes to sockets for a channel (events, client
 * events, member_added/removed, subscription_count, watchlist online/offline) is handed to the
 * adapter, so a single node takes the same path a cluster does.
 *
 * Two implementations pass one contract test suite (test/unit/channels/adapter):
 * - the local one (local-adapter.ts): channel state on the worker shard that owns each channel
 *   (`channelShardFor`), frames through this process's uWS topics;
 * - the cluster one (redis/redis-adapter.ts): channel state in Redis, frames relayed between
 *   nodes over Redis pub/sub. What a cluster adds beyond the four concerns (a connection quota
 *   and rate limits counted across nodes, a relay the HTTP API waits for, an outage to report)
 *   is one capability, `cluster`, null on a single node: callers read it once.
 * Each method below states its guarantee for both.
 *
 * Transitions that matter across a cluster are decided by the adapter, from its view of the
 * whole channel: `occupied` / `vacated` and `memberAdded` / `memberRemoved` in the results
 * below, each decided once (local: by the owning shard, which sees every subscription of the
 * channel; cluster: by one Redis script per change). The channel webhooks follow the same
 * decisions: the adapter in use emits them.
 */
import type { AppConfig } from '../../config/schema.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import type { PresenceSnapshot } from '../frames.js';
import type { ClientSocket } from '../socket-registry.js';
import type { RateCounter } from '../rate-limits/rate-counter.js';
import type { HistoryRead, HistoryRecovery } from '../messages.js';
import type { ClusterFigures } from '../../metrics/prometheus.js';

/** Charges triggered messages to an app's daily quota; throws (or rejects with) APP_OVER_QUOTA. */
export interface MessageCharger {
  charge(app: Pick<AppConfig, 'id' | 'messageQuota'>, messages: number): void | Promise<void>;
  /** The app was removed: drops today's count, so that an app created later with the same id starts at 0. */
  forget(appId: string): void | Promise<void>;
}

/** A connection as the adapter sees it: a uWS WebSocket or an HTTP fallback session (socket-registry.ts). */
export type ChannelSocket = ClientSocket;

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
  /** A recovering client's last serial: the result carries `recovery`. */
  since?: string;
  /**
   * With `since`: the socket ids the client had since that serial (at most 8, each a socket
   * id): the replay leaves out the events left out for them, as for `socketId`.
   */
  previousSocketIds?: readonly string[];
}

/** A cache channel's cached event: name and data as last published. */
export interface CachedEvent {
  event: string;
  data: string;
}

export interface SubscribeResult {
  /**
   * Presence only: the members after this join (for subscription_succeeded). May be a getter
   * built from presenceJson when read: the frame is made from presenceJson where there is one.
   */
  presence?: PresenceSnapshot;
  /**
   * Presence, optional: the same members as JSON text, `{"ids":[…],"hash":{…},"count":N}`,
   * spliced into subscription_succeeded as is (the local shards keep it serialised).
   */
  presenceJson?: string;
  /** The channel had no subscriber before this join (channel_occupied). */
  occupied: boolean;
  /** Presence only: true when this join is the user's first connection (member_added due). */
  memberAdded?: boolean;
  /** Subscribers (connections) after this join, for subscription_count. */
  subscriptionCount: number;
  /** Cache channels only: the cached event as the join read it, or null on a miss (see attach). */
  cached?: CachedEvent | null;
  /**
   * With `since`: the kept events after it, read with the join, so that the events with a later
   * serial are exactly those the socket gets live once attached in the turn the join resolved.
   * Cluster: the events the node receives between the read and attach() are added to the list
   * until attach() (redis/history-seam.ts): send it in the turn of attach(), right before it.
   */
  recovery?: HistoryRecovery;
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
  /** The last subscriber left (channel_vacated). */
  vacated: boolean;
  /** Presence only: true when the user's last connection left (member_removed due). */
  memberRemoved?: boolean;
  /** Subscribers (connections) after this leave. */
  subscriptionCount: number;
}

/** A subscription the front end has (what a lost state is rebuilt from): presence ones carry their member. */
export interface FrontEndSubscription {
  appId: string;
  channel: string;
  socketId: string;
  member?: PresenceMember;
  /** The front end no longer wants it: its leave is queued or in flight. */
  leaving?: boolean;
}

/** What tapSubscriptions hands the recorded subscriptions to: the debug tap's part of it. */
export type SubscriptionTap = Pick<DebugTap, 'watching' | 'subscription'>;

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

/** Occupied channels counted without listing them: the total over every app, and some apps' own. */
export interface OccupiedChannelCounts {
  /** Occupied channels of every app. */
  total: number;
  /** Occupied channels of each app asked for, in the order asked. */
  byApp: number[];
}

/** One row of listChannels: an occupied channel, with its user count when asked for. */
export interface OccupiedChannel {
  channel: string;
  userCount?: number;
}

/** Frames to sockets. */
export interface ChannelDelivery {
  /**
   * Delivers a ready-encoded frame to every subscriber of the channel, except the socket with
   * `exceptSocketId`. Synchronous hand-off: no await on the hot path. At most once per socket
   * (a socket over its send buffer cap misses frames and is let go with 4100).
   * Local: delivered at once, in call order. Cluster: handed to Redis on one connection, so the
   * frames one node publishes reach every node in the order published; this node's sockets get
   * the frame once Redis has taken it (a trigger through this node never overtakes one accepted
   * earlier through another). Outage (Redis away): this node's sockets still get it, the other
   * nodes do not (pub/sub keeps nothing), and `cluster.relayed()` rejects.
   */
  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): void;
  /**
   * Puts a socket on the channel's delivery (after subscription_succeeded went out to it):
   * from now on it gets the channel's frames. For a cache channel, `joined` is the subscribe's
   * answer and the return value the event to replay: call attach in the event-loop turn the
   * subscribe resolved in, since an event published on the channel while the join was in
   * flight (when the socket could not receive it yet) replaces the one the join read, so the
   * subscriber never gets an older event as the latest. Undefined for other channels.
   * Synchronous on both (cluster: this node also starts listening to the channel's relay).
   */
  attach(socket: ChannelSocket, appId: string, channel: string, joined?: SubscribeResult): CachedEvent | null | undefined;
  /** Takes a socket off the channel's delivery (it unsubscribed; a closed socket leaves by itself). Synchronous. */
  detach(socket: ChannelSocket, appId: string, channel: string): void;
}

/** Subscriptions, the cache and the channel reads of the HTTP API. */
export interface ChannelStateStore {
  /**
   * Records a subscription; the caller has already authorised it. A join that fails is not
   * retried (the caller tells the client, which may), except in a cluster's outage. Local: sent
   * to the owning shard in a per-shard batch; rejects when that batch fails (the shard timed out
   * or crashed; the shard is then reconciled with what the front end holds). Cluster: one Redis
   * script; during an outage (Redis away, or the node not registered again yet) it waits for
   * the cluster and joins then, and rejects with CLUSTER_UNAVAILABLE only after
   * `cluster.subscriptionWaitMs`. It resolves only once this node
   * listens to the channel's relay (Redis confirmed the SUBSCRIBE), so a socket attached when it
   * resolves gets every frame published afterwards through any node; a socket that is not
   * attached must leave (unsubscribe), which also stops that listening.
   */
  subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  /**
   * The same, for a caller that may change its mind: adapters may queue joins under load, and
   * ask `wanted` before sending one; if the caller no longer wants it, it is dropped and the
   * promise resolves with null (nothing was done). Local: queued per shard under load, `wanted`
   * asked when the join leaves the queue. Cluster: sent at once, `wanted` asked before and
   * after any wait for an outage to end.
   */
  subscribe(req: SubscribeRequest, wanted: () => boolean): Promise<SubscribeResult | null>;
  /**
   * Removes a subscription (explicit unsubscribe or socket close). Never dropped: the adapter
   * retries until it is applied (applying it twice changes nothing); it rejects only when the
   * server shuts down. Local: retried until the owning shard answers. Cluster: retried with
   * backoff through an outage; after one, the re-registration has already left it out.
   */
  unsubscribe(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult>;
  /**
   * Hands each subscribe and unsubscribe made through this adapter to `tap` (the dashboard's
   * debug console) once recorded, with the channel's new subscriber count, while `tap` watches
   * the app; a join dropped (null) or refused is not handed. Set once, by the composition root.
   * Local: once the owning shard answered. Cluster: once Redis answered; the subscriptions made
   * through other nodes are their nodes' to tell.
   */
  tapSubscriptions(tap: SubscriptionTap): void;
  /**
   * Records the last event of a cache channel. Fire-and-forget, at most once: local, to the
   * owning shard; cluster, to Redis (lost during an outage, counted as a relay failure).
   */
  storeCachedEvent(appId: string, channel: string, event: string, data: string): void;
  /**
   * A client event was relayed: hands it to the client_event webhook (fire-and-forget, to the
   * outbox of this node's shard owning the channel, on both). Call it only for apps with a
   * webhook that wants client_event: it costs a message per event.
   */
  clientEvent(e: RelayedClientEvent): void;
  /**
   * One channel's state (C4). Many channels: call per channel; they live on different shards.
   * Local: the owning shard's answer. Cluster: read from Redis; CLUSTER_UNAVAILABLE during an outage.
   */
  channelInfo(appId: string, channel: string, want: ChannelInfoRequest): Promise<ChannelInfo>;
  /**
   * Occupied channels of an app (C3), optionally by prefix, with user counts when asked; sorted
   * by name. Local: every shard asked. Cluster: read from Redis; CLUSTER_UNAVAILABLE during an outage.
   */
  listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<OccupiedChannel[]>;
  /**
   * How many channels are occupied, over every app and for each of `appIds` (the overview); the
   * cost does not grow with the apps or channels that exist, only with `appIds`. Local: one
   * request to each shard, which counts its channels as they become occupied and vacated.
   * Cluster: read from Redis (a count the join and leave scripts keep); CLUSTER_UNAVAILABLE
   * during an outage.
   */
  occupiedChannelCounts(appIds: readonly string[]): Promise<OccupiedChannelCounts>;
}

/** Channel history: the events of history channels (apps[].history), kept with a serial each. */
export interface ChannelHistory {
  /**
   * Publishes an event on a history channel: the channel's owner gives it the next serial and
   * keeps it, then its frame (with a top-level `"serial"`) goes out through publish(). Frames
   * go out in serial order, which is the order of the calls, once the event is stored durably
   * (it survives kill -9). Resolves once the frame went out; rejects (nothing sent) when the
   * owner could not keep it. Local: the owning shard (its LMDB environment). Cluster: one Redis
   * script gives the serial, keeps the event and publishes its frame to every node (this one
   * included), so serial order is delivery order on every node; CLUSTER_UNAVAILABLE during an
   * outage.
   */
  publishKept(appId: string, channel: string, event: string, data: string, exceptSocketId?: string, userId?: string): Promise<void>;
  /**
   * A history channel's kept events after `since` (a serial), or its last `limit`. Local: the
   * owning shard. Cluster: read from Redis; CLUSTER_UNAVAILABLE during an outage.
   */
  history(appId: string, channel: string, since: string | undefined, limit: number): Promise<HistoryRead>;
}

/** Signed-in users: presence channels' members, watchlists, terminating a user's connections. */
export interface UserPresence {
  /**
   * User ids of a presence channel (C6). Local: the owning shard's answer. Cluster: read from
   * Redis; CLUSTER_UNAVAILABLE during an outage.
   */
  presenceUserIds(appId: string, channel: string): Promise<string[]>;
  /**
   * A signed-in user's first connection on this node arrived (`online`) or its last one left:
   * tells the user's watchers (watchlist online / offline) when it is the user's first or last
   * connection as far as the adapter sees the user. Fire-and-forget. Local: this node's
   * watchers, at once. Cluster: recorded in Redis, and every node tells its watchers when it is
   * the first or last connection in the cluster; during an outage nothing is recorded, and the
   * re-registration that follows records the node's users and reports what changed.
   */
  userPresence(appId: string, userId: string, online: boolean): void;
  /**
   * Puts a socket on the watchlist delivery of each user and answers which of them are online
   * now (for the initial watchlist events). Local: at once, from this node's users. Cluster:
   * read from Redis; rejects with CLUSTER_UNAVAILABLE during an outage. A user recorded online
   * but whose watchers were not told yet (the telling follows the record) is in the answer and
   * is then also told to the socket as 'online': at least once, not exactly once.
   */
  watch(socket: ChannelSocket, appId: string, userIds: readonly string[]): string[] | Promise<string[]>;
  /**
   * Closes every connection of a signed-in user (C5); resolves with how many were closed on
   * this node. Local: this node's. Cluster: this node's at once, then a control message that
   * every other node acts on (at most once: a node cut off from Redis misses it); rejects with
   * CLUSTER_UNAVAILABLE when the message could not be sent.
   */
  terminateUserConnections(appId: string, userId: string): Promise<number>;
}

/** The node's side: its connections, a state lost under live sockets, the stop. */
export interface NodeLifecycle {
  /** Live connections of the app on this node (the connection quota on a single node). */
  connectionCount(appId: string): number;
  /**
   * For state lost while the sockets stay connected. Registers `frontEnd`, which the adapter
   * calls with the channels that lost their state; it answers the subscriptions the front end has
   * on them, and the adapter records those again, silently: no frames, no webhooks, no member
   * limit. Local: a shard worker died and was replaced (its subscribers and members with it);
   * the adapter also reconciles each shard with what `frontEnd` answers (ghost subscribers
   * removed). Cluster: the node re-registers after an outage or after it was reaped, and
   * records every subscription `frontEnd` answers under its new session.
   */
  onStateLost(frontEnd: (lost: LostChannels) => FrontEndSubscription[]): void;
  /**
   * Graceful stop, after the sockets were closed and before the shards stop. Local: nothing to
   * do. Cluster: the leaves in flight finish (their webhooks decided), then the node
   * deregisters and its transitions are reported once.
   */
  close(): Promise<void>;
}

/**
 * What a cluster adds: counts that span every node and the relay to the other nodes. A single
 * node has none of it (`ChannelAdapter.cluster` is null) and counts in memory.
 */
export interface ClusterCapability {
  /**
   * Records a new connection and answers whether the app is under `maxConnections` (null: no
   * limit; then recorded in the background and always true) counting every node. The front
   * end calls it before connection_established and `disconnected` for every admitted socket.
   * During an outage (with a limit) it rejects with CLUSTER_UNAVAILABLE.
   */
  admit(appId: string, socketId: string, maxConnections: number | null): Promise<boolean>;
  /**
   * A socket the front end admitted closed: its channels have been left. Fire-and-forget;
   * during an outage it fails, and the re-registration leaves the socket out.
   */
  disconnected(appId: string, socketId: string): void;
  /**
   * For a channel the front end answers itself (the signed-in user's `#server-to-user-`):
   * starts listening to its relay for the socket ahead of attach(), which takes it over, and
   * resolves once this node receives what any node publishes there (at once during an outage),
   * so subscription_succeeded goes out after it. A socket closed meanwhile gives it back
   * through disconnected().
   */
  listenFor(appId: string, channel: string, socketId: string): Promise<void>;
  /**
   * Throws CLUSTER_UNAVAILABLE (503) when an HTTP trigger could not reach every subscriber:
   * Redis away, this node not registered, or its subscriber connection not listening yet.
   */
  checkAvailable(): void;
  /**
   * Resolves once every frame published so far has been taken by Redis (so queued to every
   * other node's relay), rejects with CLUSTER_UNAVAILABLE when the latest could not be. The
   * HTTP API answers a trigger after it.
   */
  relayed(): Promise<void>;
  /**
   * An app was removed through this node (deleted through the admin API, or gone from its config
   * file on a reload): drops what the app keeps in Redis beside its subscriptions (those go
   * with its sockets' leaves, on every node): its cache channels' events and its channels' kept
   * history, so that an app created later with the same id finds none. Rejects with
   * CLUSTER_UNAVAILABLE during an outage. (One node: each shard drops the app's cached and kept
   * events when it takes the removal.)
   */
  forgetApp(appId: string): Promise<void>;
  /** The daily message quota, counted in Redis across nodes; CLUSTER_UNAVAILABLE during an outage. */
  readonly messageQuota: MessageCharger;
  /** The per-app rate limits, counted in Redis across nodes; CLUSTER_UNAVAILABLE during an outage. */
  readonly rateCounter: RateCounter;
  /** This node's figures as a member of the cluster, for /metrics and the admin overview. */
  readonly figures: ClusterFigures;
}

/** The whole adapter. */
export interface ChannelAdapter extends ChannelDelivery, ChannelStateStore, ChannelHistory, UserPresence, NodeLifecycle {
  /** What a cluster adds; null on a single node. Read it once: it does not change. */
  readonly cluster: ClusterCapability | null;
}
