/**
 * Shard-side channel state for the channels one shard owns: subscriber sockets, presence
 * members (with how many connections each user has on the channel) and cache entries.
 * Everything is in memory: the state describes live connections of this process, so it has
 * nothing to survive a restart for. Cached events are in memory too and are lost on restart
 * (docs/protocol.md says so). Plain synchronous code, no I/O: the shard handlers wrap it.
 */
import { HeraldError } from '../../errors.js';
import { SmallMap } from '../small-map.js';

/** A presence member as held by the shard: user_info is kept as given (null when absent). */
interface Member {
  userInfo: unknown;
  /** Connections of this user subscribed to the channel. */
  connections: number;
}

interface ChannelState {
  /** socket id → user id (presence) or null. */
  subscribers: SmallMap<string | null>;
  /** Presence channels only: user id → member. */
  members: Map<string, Member> | null;
  /**
   * Presence channels only: the members as JSON text, kept in step with `members` so a join
   * does not serialise the whole list again (see presenceJson). Null until first asked for and
   * after a member leaves (rebuilt on the next request).
   */
  membersJson: MembersJson | null;
}

/** The comma-separated insides of the `ids` array and the `hash` object, in join order. */
interface MembersJson {
  ids: string;
  hash: string;
}

interface CacheEntry {
  event: string;
  data: string;
  /** Epoch ms after which the entry is gone. */
  expiresAt: number;
  /** What the entry counts against its app's bound (cacheEntryBytes). */
  bytes: number;
}

/** One app's cache entries, oldest written first (a Map keeps insertion order), and their bytes. */
interface AppCache {
  entries: Map<string, CacheEntry>;
  bytes: number;
}

/** Bytes an entry counts: UTF-8 bytes of channel name, event name and data. */
export function cacheEntryBytes(channel: string, event: string, data: string): number {
  return Buffer.byteLength(channel) + Buffer.byteLength(event) + Buffer.byteLength(data);
}

/** What changed with one join, for the caller's frames and webhooks. */
export interface JoinOutcome {
  /** False when the socket was already subscribed (a repeated join changes nothing). */
  changed: boolean;
  /** The channel had no subscriber before this join. */
  occupied: boolean;
  /** Presence: this was the user's first connection on the channel. */
  memberAdded: boolean;
  subscriptionCount: number;
  /** Presence only: members after the join, as [user id, user_info] pairs in join order (built when read). */
  readonly members?: [string, unknown][];
}

/** What changed with one leave. */
export interface LeaveOutcome {
  /** False when the socket was not subscribed. */
  changed: boolean;
  /** The last subscriber left. */
  vacated: boolean;
  /** Presence: the user whose last connection left, if any. */
  memberRemoved: string | null;
  subscriptionCount: number;
}

export interface JoinRequest {
  appId: string;
  channel: string;
  socketId: string;
  /** Presence channels: the member; required there, ignored elsewhere. */
  member?: { userId: string; userInfo?: unknown };
  /** Presence channels: distinct users allowed. */
  maxMembers: number;
}

export class ChannelStore {
  /** appId → channel → state. Only occupied channels have an entry. */
  private readonly apps = new Map<string, Map<string, ChannelState>>();
  /** appId → its cached last events. */
  private readonly caches = new Map<string, AppCache>();
  /** Occupied channels of every app (kept as channels become occupied and vacated). */
  private occupied = 0;

  constructor(private readonly now: () => number = Date.now) {}

  join(req: JoinRequest, presence: boolean): JoinOutcome {
    let channels = this.apps.get(req.appId);
    const existing = channels?.get(req.channel);
    if (existing?.subscribers.has(req.socketId)) {
      return withMembers({ changed: false, occupied: false, memberAdded: false, subscriptionCount: existing.subscribers.size }, existing);
    }
    const userId = presence ? req.member?.userId : undefined;
    if (presence && userId === undefined) throw new Error('presence join without a member');
    if (userId !== undefined && existing?.members && !existing.members.has(userId) && existing.members.size >= req.maxMembers) {
      throw new HeraldError('PRESENCE_MEMBER_LIMIT', `Presence channel ${req.channel} already has its maximum of ${req.maxMembers} members`);
    }
    if (!channels) {
      channels = new Map();
      this.apps.set(ownString(req.appId), channels);
    }
    let state = existing;
    if (!state) {
      state = { subscribers: new SmallMap(), members: presence ? new Map() : null, membersJson: null };
      channels.set(ownString(req.channel), state);
      this.occupied++;
    }
    state.subscribers.set(ownString(req.socketId), userId === undefined ? null : ownString(userId));
    let memberAdded = false;
    if (userId !== undefined && state.members) {
      const member = state.members.get(userId);
      if (member) {
        member.connections++;
      } else {
        const userInfo = req.member?.userInfo ?? null;
        state.members.set(ownString(userId), { userInfo, connections: 1 });
        memberAdded = true;
        const json = state.membersJson;
        if (json) {
          const id = JSON.stringify(userId);
          const comma = json.ids === '' ? '' : ',';
          json.ids += comma + id;
          json.hash += `${comma}${id}:${JSON.stringify(userInfo) ?? 'null'}`;
        }
      }
    }
    return withMembers({ changed: true, occupied: !existing, memberAdded, subscriptionCount: state.subscribers.size }, state);
  }

  leave(appId: string, channel: string, socketId: string): LeaveOutcome {
    const channels = this.apps.get(appId);
    const state = channels?.get(channel);
    if (!channels || !state || !state.subscribers.has(socketId)) {
      return { changed: false, vacated: false, memberRemoved: null, subscriptionCount: state?.subscribers.size ?? 0 };
    }
    const userId = state.subscribers.get(socketId) ?? null;
    state.subscribers.delete(socketId);
    let memberRemoved: string | null = null;
    if (userId !== null && state.members) {
      const member = state.members.get(userId);
      if (member && --member.connections <= 0) {
        state.members.delete(userId);
        state.membersJson = null;
        memberRemoved = userId;
      }
    }
    const vacated = state.subscribers.size === 0;
    if (vacated) {
      channels.delete(channel);
      this.occupied--;
      if (channels.size === 0) this.apps.delete(appId);
    }
    return { changed: true, vacated, memberRemoved, subscriptionCount: state.subscribers.size };
  }

  /**
   * Drops everything held for an app that was removed: its channels, their subscribers and
   * members, and its cached events. Answers the channels that were occupied, each with its
   * presence members (user ids, in join order), for the webhooks of their removal.
   */
  removeApp(appId: string): { channel: string; members: string[] }[] {
    const channels = this.apps.get(appId);
    this.apps.delete(appId);
    this.caches.delete(appId);
    if (!channels) return [];
    this.occupied -= channels.size;
    return [...channels].map(([channel, state]) => ({ channel, members: state.members ? [...state.members.keys()] : [] }));
  }

  /** Every subscription held, as [appId, channel, socketId] (a snapshot: safe to leave while walking it). */
  subscriptions(): [appId: string, channel: string, socketId: string][] {
    const out: [string, string, string][] = [];
    for (const [appId, channels] of this.apps) {
      for (const [channel, state] of channels) {
        for (const socketId of state.subscribers.keys()) out.push([appId, channel, socketId]);
      }
    }
    return out;
  }

  subscriptionCount(appId: string, channel: string): number {
    return this.apps.get(appId)?.get(channel)?.subscribers.size ?? 0;
  }

  /** Distinct users of a presence channel (0 elsewhere). */
  userCount(appId: string, channel: string): number {
    return this.apps.get(appId)?.get(channel)?.members?.size ?? 0;
  }

  /**
   * The presence part of subscription_succeeded as JSON text, `{"ids":[…],"hash":{…},"count":N}`
   * (null when the channel is not an occupied presence channel). Kept up to date on joins and
   * rebuilt after a leave, so a join storm costs one string append per join here, and the shard
   * ships one string rather than every member as a msgpack structure. The same JSON content as
   * JSON.stringify of frames.snapshotOf over the members; hash keys stay in join order (an
   * object would put integer-like ids first), which JSON readers do not depend on.
   */
  presenceJson(appId: string, channel: string): string | null {
    const state = this.apps.get(appId)?.get(channel);
    if (!state?.members) return null;
    let json = state.membersJson;
    if (!json) {
      const ids: string[] = [];
      const hash: string[] = [];
      for (const [userId, member] of state.members) {
        const id = JSON.stringify(userId);
        ids.push(id);
        hash.push(`${id}:${JSON.stringify(member.userInfo) ?? 'null'}`);
      }
      json = state.membersJson = { ids: ids.join(','), hash: hash.join(',') };
    }
    return `{"ids":[${json.ids}],"hash":{${json.hash}},"count":${state.members.size}}`;
  }

  userIds(appId: string, channel: string): string[] {
    const members = this.apps.get(appId)?.get(channel)?.members;
    return members ? [...members.keys()] : [];
  }

  /** Occupied channels on this shard: of every app, and of each of `appIds`. */
  occupiedCounts(appIds: readonly string[]): { total: number; byApp: number[] } {
    return { total: this.occupied, byApp: appIds.map((appId) => this.apps.get(appId)?.size ?? 0) };
  }

  /**
   * Occupied channels of the app on this shard, optionally by prefix, sorted by name; user
   * counts (members, 0 for a channel without) only when asked. Two flat arrays rather than an
   * object per channel: a listing of many channels then holds little beyond their names.
   */
  list(appId: string, prefix: string | undefined, withUserCount = false): { names: string[]; userCounts: number[] | null } {
    const channels = this.apps.get(appId);
    const names: string[] = [];
    if (!channels) return { names, userCounts: withUserCount ? [] : null };
    for (const channel of channels.keys()) if (prefix === undefined || channel.startsWith(prefix)) names.push(channel);
    names.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    return { names, userCounts: withUserCount ? names.map((name) => channels.get(name)!.members?.size ?? 0) : null };
  }

  /**
   * Keeps the channel's last event for `ttlSeconds`. The app's entries on this shard are bounded
   * by `maxBytes` (cacheEntryBytes): the oldest written are evicted first; an entry larger than
   * the bound alone is not kept (and the channel's older one is dropped).
   */
  storeCached(appId: string, channel: string, event: string, data: string, ttlSeconds: number, maxBytes = Infinity): void {
    let cache = this.caches.get(appId);
    if (!cache) {
      cache = { entries: new Map(), bytes: 0 };
      this.caches.set(appId, cache);
    }
    const previous = cache.entries.get(channel);
    if (previous) {
      // Re-inserted below, so it becomes the newest.
      cache.entries.delete(channel);
      cache.bytes -= previous.bytes;
    }
    const bytes = cacheEntryBytes(channel, event, data);
    if (bytes > maxBytes) {
      if (cache.entries.size === 0) this.caches.delete(appId);
      return;
    }
    for (const [oldest, entry] of cache.entries) {
      if (cache.bytes + bytes <= maxBytes) break;
      cache.entries.delete(oldest);
      cache.bytes -= entry.bytes;
    }
    cache.entries.set(channel, { event, data, expiresAt: this.now() + ttlSeconds * 1000, bytes });
    cache.bytes += bytes;
  }

  /** Bytes of the app's cache entries on this shard (cacheEntryBytes), expired ones not yet pruned included. */
  cachedBytes(appId: string): number {
    return this.caches.get(appId)?.bytes ?? 0;
  }

  /** The live cache entry, with its whole seconds left, or null. */
  cached(appId: string, channel: string): { event: string; data: string; ttl: number } | null {
    const cache = this.caches.get(appId);
    const entry = cache?.entries.get(channel);
    if (!cache || !entry) return null;
    const left = entry.expiresAt - this.now();
    if (left <= 0) {
      this.dropCached(appId, cache, channel, entry);
      return null;
    }
    return { event: entry.event, data: entry.data, ttl: Math.ceil(left / 1000) };
  }

  /** Drops expired cache entries; returns how many. Called on a timer by the shard. */
  pruneCache(): number {
    const now = this.now();
    let pruned = 0;
    for (const [appId, cache] of this.caches) {
      for (const [channel, entry] of cache.entries) {
        if (entry.expiresAt <= now) {
          this.dropCached(appId, cache, channel, entry);
          pruned++;
        }
      }
    }
    return pruned;
  }

  private dropCached(appId: string, cache: AppCache, channel: string, entry: CacheEntry): void {
    cache.entries.delete(channel);
    cache.bytes -= entry.bytes;
    if (cache.entries.size === 0) this.caches.delete(appId);
  }
}

/**
 * A string of its own for a key kept in the store. Strings decoded from a shard message are
 * slices of one string msgpackr decodes for the whole message: keeping a slice (a socket id, 32 B)
 * keeps that whole string alive, ~120 B per subscription in a join storm. The copy is a flat
 * string of the same characters (~0.2 µs, once per join).
 */
function ownString(s: string): string {
  return JSON.parse(JSON.stringify(s)) as string;
}

/**
 * Adds `members` to a presence join's outcome: [user id, user_info] pairs rather than an object
 * keyed by user id (a user id may be any string, `__proto__` included). A getter, built when
 * read (tests, tools) and reading the channel as it is then: the shard answers joins with
 * ChannelStore.presenceJson instead, so a join does not copy the member list.
 */
function withMembers(outcome: JoinOutcome, state: ChannelState): JoinOutcome {
  const members = state.members;
  if (!members) return outcome;
  return Object.defineProperty(outcome, 'members', {
    enumerable: true,
    get(): [string, unknown][] {
      const pairs: [string, unknown][] = [];
      for (const [id, member] of members) pairs.push([id, member.userInfo]);
      return pairs;
    },
  });
}
