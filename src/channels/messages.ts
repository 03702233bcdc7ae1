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
    };
    res: {
      subscriptionCount: number;
      /** The channel had no subscriber before this join. */
      occupied: boolean;
      /** Presence: this join is the user's first connection on the channel. */
      memberAdded?: boolean;
      /** Presence: members after the join, [user id, user_info] in join order. */
      members?: [string, unknown][];
      /** Cache channels: the cached event, or null (a cache miss). */
      cached?: { event: string; data: string } | null;
    };
  };
  /** Removes a subscription; a socket that was not subscribed changes nothing. */
  'channels.unsubscribe': {
    req: { appId: string; channel: string; socketId: string };
    res: { subscriptionCount: number; vacated: boolean; memberRemoved?: boolean };
  };
  /** One channel's state (C4, and trigger `info`). */
  'channels.info': {
    req: { appId: string; channel: string; userCount?: boolean; subscriptionCount?: boolean; cache?: boolean };
    res: { occupied: boolean; userCount?: number; subscriptionCount?: number; cache?: { data: string; ttl: number } | null };
  };
  /** This shard's occupied channels of an app (C3). */
  'channels.list': {
    req: { appId: string; prefix?: string; withUserCount: boolean };
    res: { channels: [string, number | null][] };
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
  /** A client event was relayed: only sent when the app has a webhook wanting client_event. */
  'channels.clientEvent': {
    req: { appId: string; channel: string; event: string; data: string; socketId: string; userId?: string };
    res: {};
  };
}
