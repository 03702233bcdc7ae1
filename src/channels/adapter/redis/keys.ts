/**
 * The Redis keys and pub/sub channel names of shared channel state, each starting with the
 * cluster's `keyPrefix`, beside the cluster's own (src/cluster/keys.ts, which these extend;
 * docs/scaling.md lists them all). Lua scripts build the per-channel and per-session keys
 * themselves from the same pieces (scripts.ts), so the layout below and the scripts must change
 * together.
 *
 * A channel is identified by `<appId>:<channel>`: channel names cannot contain `:`, so the last
 * `:` splits the pair whatever the app id holds. Session ids are generated (no `:` either).
 */
import { ClusterKeys } from '../../../cluster/keys.js';

/** `<appId>:<channel>`, the channel part of per-channel keys. */
export function channelId(appId: string, channel: string): string {
  return `${appId}:${channel}`;
}

/** Splits a channelId at its last `:` (channel names cannot contain one). */
export function splitChannelId(id: string): { appId: string; channel: string } {
  const at = id.lastIndexOf(':');
  return { appId: id.slice(0, at), channel: id.slice(at + 1) };
}

export class RedisKeys extends ClusterKeys {
  /** STRING: subscriptions (connections) on the channel, cluster-wide; absent = vacant. */
  subscriptionCount(appId: string, channel: string): string {
    return `${this.prefix}subs:${channelId(appId, channel)}`;
  }

  /** HASH user id → connections of that user on the presence channel, cluster-wide. */
  presenceUsers(appId: string, channel: string): string {
    return `${this.prefix}users:${channelId(appId, channel)}`;
  }

  /** HASH user id → user_info JSON of the user's first connection. */
  presenceInfo(appId: string, channel: string): string {
    return `${this.prefix}uinfo:${channelId(appId, channel)}`;
  }

  /** ZSET (all scores 0, so ordered by name) of the app's occupied channels: C3 with a prefix is a range. */
  occupiedChannels(appId: string): string {
    return `${this.prefix}chans:${appId}`;
  }

  /**
   * STRING: occupied channels of every app (hidden ones left out), counted by the scripts that
   * add to and remove from the `chans:` sets. Channels occupied by a node of an older version,
   * which did not count, are missing from it until they are vacated (it reads 0 at least).
   */
  occupiedTotal(): string {
    return `${this.prefix}occupied`;
  }

  /** STRING JSON `{event, data}` of a cache channel's last event, with the app's TTL. */
  cachedEvent(appId: string, channel: string): string {
    return `${this.prefix}cache:${channelId(appId, channel)}`;
  }

  /** STRING `<expiry ms>|<session>|<socketId>`: a channel_vacated held by the page-reload debounce. */
  vacateHold(appId: string, channel: string): string {
    return `${this.prefix}holdc:${channelId(appId, channel)}`;
  }

  /** HASH user id → hold token: member_removed events held by the page-reload debounce. */
  memberRemovalHolds(appId: string, channel: string): string {
    return `${this.prefix}holdm:${channelId(appId, channel)}`;
  }

  /** HASH socket id → session id: the app's live connections cluster-wide (maxConnections, hasSocket). */
  sockets(appId: string): string {
    return `${this.prefix}sockets:${appId}`;
  }

  /** HASH socket id → `-` or `+<userId>`: one session's subscriptions on one channel. */
  sessionSubscriptions(session: string, appId: string, channel: string): string {
    return `${this.prefix}nsubs:${session}:${channelId(appId, channel)}`;
  }

  /** SET of channelIds a session has subscriptions on (what a reaper walks). */
  sessionChannels(session: string): string {
    return `${this.prefix}nchans:${session}`;
  }

  /** SET of `<socketId>:<appId>` a session holds (what a reaper removes from `sockets`). */
  sessionSockets(session: string): string {
    return `${this.prefix}nsockets:${session}`;
  }

  /** STRING: messages charged to the app on one UTC day (day = days since the epoch). */
  quota(appId: string, day: number): string {
    return `${this.prefix}quota:${day}:${appId}`;
  }

  /** Pub/sub channel of one Herald channel's frames. */
  channelTopic(appId: string, channel: string): string {
    return `${this.prefix}msg:${channelId(appId, channel)}`;
  }

  /** The app and channel of a channelTopic, or null for another name. */
  parseChannelTopic(topic: string): { appId: string; channel: string } | null {
    const head = `${this.prefix}msg:`;
    if (!topic.startsWith(head)) return null;
    return splitChannelId(topic.slice(head.length));
  }
}
