/**
 * The channel adapter: everything the WebSocket front end and the channel HTTP API need from
 * channel state and channel delivery, behind one interface. Every frame that goes to sockets
 * for a channel (events, client events, member_added/removed, subscription_count, watchlist
 * online/offline) is handed to the adapter, so a single node takes the same path a cluster
 * does. The local implementation (local-adapter.ts) keeps state on the worker shards that own
 * each channel and delivers with uWS topics; the scale-out one (redis/redis-adapter.ts) keeps
 * state in Redis and relays frames over Redis pub/sub. Both pass one contract test suite
 * (test/unit/channels/adapter).
 *
 * Transitions that matter across a cluster are decided by the adapter, from its view of the
 * whole channel: `occupied` / `vacated` and `memberAdded` / `memberRemoved` in the results
 * below. The channel webhooks follow the same decisions: the adapter in use emits them (the
 * local one on the shard owning the channel, which sees every subscription of it).
 */
import type { WebSocket } from 'uWebSockets.js';
import type { AppConfig } from '../../config/schema.js';
import type { PresenceSnapshot } from '../frames.js';
import type { RateCounter } from '../rate-limits/rate-counter.js';

/** Charges triggered messages to an app's daily quota; throws (or rejects with) APP_OVER_QUOTA. */
export interface MessageCharger {
  charge(app: Pick<AppConfig, 'id' | 'messageQuota'>, messages: number): void | Promise<void>;
}

/** A connection as the adapter sees it: the uWS socket, whatever it carries. */
export type ChannelSocket = WebSocket<unknown>;

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

/** One row of listChannels: an occupied channel, with its user count when asked for. */
export interface OccupiedChannel {
  channel: string;
  userCount?: number;
}

export interface ChannelAdapter {
  /**
   * Delivers a ready-encoded frame to every subscriber of the channel, except the socket
   * with `exceptSocketId`. Synchronous hand-off: no await on the hot path.
   */
  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): void;
  /**
   * Puts a socket on the channel's delivery (after subscription_succeeded went out to it):
   * from now on it gets the channel's frames. For a cache channel, `joined` is the subscribe's
   * answer and the return value the event to replay: call attach in the event-loop turn the
   * subscribe resolved in, since an event published on the channel while the join was in
   * flight (when the socket could not receive it yet) replaces the one the join read, so the
   * subscriber never gets an older event as the latest. Undefined for other channels.
   */
  attach(socket: ChannelSocket, appId: string, channel: string, joined?: SubscribeResult): CachedEvent | null | undefined;
  /** Takes a socket off the channel's delivery (it unsubscribed; a closed socket leaves by itself). */
  detach(socket: ChannelSocket, appId: string, channel: string): void;
  /**
   * A signed-in user's first connection on this node arrived (`online`) or its last one left:
   * tells the user's watchers (watchlist online / offline), as far as the adapter sees the user.
   */
  userPresence(appId: string, userId: string, online: boolean): void;
  /**
   * Puts a socket on the watchlist delivery of each user and answers which of them are online
   * now (for the initial watchlist events): at once where the adapter knows (local), later where
   * it must ask shared state (cluster).
   */
  watch(socket: ChannelSocket, appId: string, userIds: readonly string[]): string[] | Promise<string[]>;
  /** Live connections of the app on this node (the connection quota, unless `admit` decides it). */
  connectionCount(appId: string): number;
  /**
   * Adapters whose connection quota spans several nodes: records a new connection and answers
   * whether the app is under `maxConnections` (null: no limit) counting every node. The front
   * end calls it before connection_established and `disconnected` for every admitted socket.
   */
  admit?(appId: string, socketId: string, maxConnections: number | null): Promise<boolean>;
  /** A socket the front end registered (or admitted) closed: its channels have been left. */
  disconnected?(appId: string, socketId: string): void;
  /**
   * Throws CLUSTER_UNAVAILABLE (503) when an HTTP trigger could not reach every subscriber
   * (a cluster node cut off from Redis). Adapters that cannot be cut off leave it out.
   */
  checkAvailable?(): void;
  /**
   * Cluster adapters, whose publish hands frames to other nodes asynchronously: resolves once
   * every frame published so far has been taken by the other nodes' relay, rejects with
   * CLUSTER_UNAVAILABLE when the latest could not be. The HTTP API answers a trigger after it.
   */
  relayed?(): Promise<void>;
  /** Adapters that count the message quota across nodes: the counter to charge (see channels/quota.ts). */
  readonly messageQuota?: MessageCharger;
  /** Counts the per-app rate limits across the cluster; absent, each node counts its own (memory). */
  readonly rateCounter?: RateCounter;
  /** Graceful stop, after the sockets were closed and before the shards stop (cluster: deregister). */
  close?(): Promise<void>;
  /** Records the last event of a cache channel (fire-and-forget to the owning shard). */
  storeCachedEvent(appId: string, channel: string, event: string, data: string): void;
  /**
   * A client event was relayed: hands it to the client_event webhook (fire-and-forget). Call
   * it only for apps with a webhook that wants client_event: it costs a message per event.
   */
  clientEvent(e: RelayedClientEvent): void;
  /** Records a subscription on the owning shard; the caller has already authorised it. */
  subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  /**
   * The same, for a caller that may change its mind: adapters may queue joins under load, and
   * ask `wanted` before sending one; if the caller no longer wants it, it is dropped and the
   * promise resolves with null (nothing was done). An adapter that sends at once never asks.
   */
  subscribe(req: SubscribeRequest, wanted: () => boolean): Promise<SubscribeResult | null>;
  /**
   * Removes a subscription (explicit unsubscribe or socket close). Never dropped: the adapter
   * retries until it is applied; it rejects only when the server shuts down.
   */
  unsubscribe(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult>;
  /** One channel's state (C4). Many channels: call per channel; they live on different shards. */
  channelInfo(appId: string, channel: string, want: ChannelInfoRequest): Promise<ChannelInfo>;
  /** Occupied channels of an app (C3), optionally by prefix, with user counts when asked; sorted by name. */
  listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<OccupiedChannel[]>;
  /** User ids of a presence channel (C6). */
  presenceUserIds(appId: string, channel: string): Promise<string[]>;
  /** Closes every connection of a signed-in user (C5); resolves with how many were closed. */
  terminateUserConnections(appId: string, userId: string): Promise<number>;
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
