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

export interface SubscribeResult {
  /** Presence only: the members after this join (for subscription_succeeded). */
  presence?: { ids: string[]; hash: Record<string, unknown>; count: number };
  /** Presence only: true when this join is the user's first connection (member_added due). */
  memberAdded?: boolean;
  /** Subscribers (connections) after this join, for subscription_count. */
  subscriptionCount: number;
  /** Cache channels only: the cached event to replay, or null on a miss. */
  cached?: { event: string; data: string } | null;
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
  /** Records a subscription on the owning shard; the caller has already authorised it. */
  subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  /** Removes a subscription (explicit unsubscribe or socket close). */
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
   * no frames, no webhooks, no member limit. Adapters that cannot lose state leave it out.
   */
  onStateLost?(held: (lost: LostChannels) => HeldSubscription[]): void;
}
