/**
 * Cluster-wide channel state in Redis: subscriptions, presence members, occupied channels,
 * cache channels, live sockets per app and the daily message quota. Every change is applied by
 * a Lua script (scripts.ts), so the transitions it reports (first subscription anywhere, user's
 * first connection anywhere, ...) are decided once for the whole cluster. Connects, joins,
 * leaves, disconnects, hold releases and cache reads of one event-loop turn share one script
 * call (state-batch.ts), each with its own outcome. Reads (C3, C4, C6) answer from this shared
 * state alone: no node asks the others and waits. Every other command first sends the batched
 * changes asked for before it, so Redis runs a node's state commands in the order the node
 * issued them.
 *
 * Subscriptions are recorded under the node's current session (node-session.ts): a change made
 * under a session that is no longer alive is refused (status -2) and makes the node
 * re-register, so a node that was reaped cannot leave ghosts behind.
 */
import type { Redis } from 'ioredis';
import { HeraldError } from '../../../errors.js';
import { whenAvailable, RedisUnavailableError } from '../../../cluster/connection.js';
import type { RedisKeys } from './keys.js';
import type { NodeSession } from '../../../cluster/node-session.js';
import { cacheEntryBytes } from '../../state/channel-store.js';
import { STATE_SCRIPTS } from './scripts.js';
import { StateBatcher, type StateOpArgs } from './state-batch.js';

/** A presence member: user id and the user_info it subscribed with (any JSON value). */
export interface ClusterMember {
  userId: string;
  userInfo?: unknown;
}

export interface ClusterJoinOutcome {
  /** False when the socket was already subscribed (a repeated join changes nothing). */
  changed: boolean;
  /** This join made the channel occupied cluster-wide (channel_occupied due, once). */
  occupied: boolean;
  /** Presence: the user's first connection on the channel cluster-wide (member_added due, once). */
  memberAdded: boolean;
  /** Subscriptions (connections) on the channel cluster-wide after the join. */
  subscriptionCount: number;
  /** Presence only: the members after the join, as [user id, user_info] pairs. */
  members?: [string, unknown][];
  /**
   * This occupy came within the page-reload debounce of a vacate (a page reload): the vacate's node
   * drops its held channel_vacated and this node does not report channel_occupied.
   */
  cancelledVacate: boolean;
  /** The same for this user's member_removed / member_added. */
  cancelledMemberRemoval: boolean;
}

export interface ClusterLeaveOutcome {
  /** False when the socket was not subscribed under this node's session. */
  changed: boolean;
  /** The last subscription cluster-wide left (channel_vacated due, once). */
  vacated: boolean;
  /** Presence: the user whose last connection cluster-wide left (member_removed due, once). */
  memberRemoved: string | null;
  subscriptionCount: number;
  /**
   * With a page-reload debounce: tokens of the holds this leave left for its channel_vacated and
   * member_removed. Send the held event only if releaseHold answers true when the debounce ends.
   */
  holds?: { channel?: string; member?: string };
}

/** A change of shared state another node did not report: found by a reap or a re-registration. */
export type ChannelTransition =
  | { type: 'channel_occupied'; appId: string; channel: string }
  | { type: 'channel_vacated'; appId: string; channel: string }
  /** `userInfo`: the member's user_info, when the node that reports it holds the member (a registration). */
  | { type: 'member_added'; appId: string; channel: string; userId: string; userInfo?: unknown }
  | { type: 'member_removed'; appId: string; channel: string; userId: string }
  | { type: 'subscription_count'; appId: string; channel: string; subscriptionCount: number };

export interface ClusterChannelInfo {
  occupied: boolean;
  subscriptionCount: number;
  /** Distinct presence users (0 for other channels). */
  userCount: number;
  /** When asked: the cache channel's last event with its whole seconds left, or null. */
  cache?: { event: string; data: string; ttl: number } | null;
}

/** A channel touched by a registration: subscriptions added and the count after. */
export interface RegisteredChannel {
  appId: string;
  channel: string;
  added: number;
  subscriptionCount: number;
}

/** What a registration did: occupied / member_added transitions, and per-channel counts. */
export interface Registration {
  transitions: ChannelTransition[];
  channels: RegisteredChannel[];
}

/** One subscription of this node, as recorded in Redis. */
export interface NodeSubscription {
  appId: string;
  channel: string;
  socketId: string;
  member?: ClusterMember;
}

/** What a node has locally (its snapshot), for re-registration: its sockets and their subscriptions. */
export interface NodeSnapshot {
  sockets: { appId: string; socketId: string }[];
  subscriptions: NodeSubscription[];
}

/** Cached events dropped per script call when an app is removed: one call stays short however many the app has. */
const CACHE_FORGET_BATCH = 500;

const subscriptionKey = (appId: string, channel: string, socketId: string): string => `${appId}\u0000${channel}\u0000${socketId}`;

type JoinReply = [number, number, number, number, string[], number?, number?];
type LeaveReply = [number, number, number, number, string, string, string];

export class RedisChannelState {
  /** Joins and connects not settled yet (see settled()). */
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Connects, joins, leaves, disconnects, hold releases and cache reads, batched per event-loop turn. */
  private readonly batch: StateBatcher;
  /**
   * The node's own record of its subscriptions in Redis: joined (or registered) and not yet
   * seen leaving. A leave that Redis did not apply (an outage, or Redis came back without the
   * subscription) stays here, so a re-registration can tell what ended while Redis was away
   * even when Redis lost it (leftSince).
   */
  private readonly recorded = new Map<string, NodeSubscription>();

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly session: NodeSession,
  ) {
    STATE_SCRIPTS.define(redis);
    this.batch = new StateBatcher(redis, keys.prefix);
  }

  /**
   * Sends every change still waiting to be batched, now: a command issued next on the same
   * connection runs after them in Redis.
   */
  flushChanges(): void {
    this.batch.flush();
  }

  /** A command outside the batches: the changes asked for before it go first. */
  private direct<T>(call: () => Promise<T>): Promise<T> {
    this.batch.flush();
    return whenAvailable(call);
  }

  /**
   * Records a subscription. Throws PRESENCE_MEMBER_LIMIT when a presence channel already has
   * `maxMembers` other users (0: no limit), RedisUnavailableError during an outage or when the
   * session was just found gone (the node re-registers; the caller may retry).
   */
  join(appId: string, channel: string, socketId: string, member?: ClusterMember, maxMembers = 0): Promise<ClusterJoinOutcome> {
    return this.tracked(this.joinRecorded(appId, channel, socketId, member, maxMembers));
  }

  /**
   * Resolves once every join and connect issued so far has settled. Re-registration waits for
   * it before retiring the previous session, so a join in flight across the switch is recorded
   * under the new session before the old one is reaped.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.inFlight]);
  }

  private tracked<T>(work: Promise<T>): Promise<T> {
    this.inFlight.add(work);
    work.then(
      () => this.inFlight.delete(work),
      () => this.inFlight.delete(work),
    );
    return work;
  }

  private async joinRecorded(appId: string, channel: string, socketId: string, member: ClusterMember | undefined, maxMembers: number): Promise<ClusterJoinOutcome> {
    const session = this.session.current;
    const run = (under: string, max: number) => this.batch.run<JoinReply>(this.joinArgs(appId, channel, socketId, member, max, under));
    let reply = await run(session, maxMembers);
    if (this.session.current !== session && reply[0] !== -1) {
      // The node re-registered while this join was in flight: its snapshot may have missed the
      // socket, and the session it was recorded under is about to be reaped. Record it under
      // the current session too (idempotent); transitions reported by either count.
      const again = await run(this.session.current, reply[0] === 1 ? 0 : maxMembers);
      reply =
        reply[0] === -2
          ? again
          : [again[0] === -2 ? -2 : reply[0], reply[1] || again[1], reply[2] || again[2], again[3], again[4], reply[5] || again[5], reply[6] || again[6]];
    }
    const [status, occupied, added, count, flat, resumedChannel, resumedMember] = reply;
    if (status === 0 || status === 1) this.recorded.set(subscriptionKey(appId, channel, socketId), { appId, channel, socketId, ...(member && { member }) });
    if (status === -2) {
      this.session.reportGone();
      throw new RedisUnavailableError('node session was reaped; re-registering');
    }
    if (status === -1) {
      throw new HeraldError('PRESENCE_MEMBER_LIMIT', `Presence channel ${channel} already has its maximum of ${maxMembers} members`);
    }
    const out: ClusterJoinOutcome = {
      changed: status === 1,
      occupied: occupied === 1,
      memberAdded: added === 1,
      subscriptionCount: count,
      cancelledVacate: resumedChannel === 1,
      cancelledMemberRemoval: resumedMember === 1,
    };
    if (member) out.members = pairs(flat);
    return out;
  }

  /**
   * Removes a subscription of this node (explicit unsubscribe or socket close). Drop it from
   * the node's snapshot (NodeSnapshot) before calling, so that a re-registration's
   * snapshot taken meanwhile cannot record it again. With
   * `debounceMs` (webhookDelivery.pageReloadDebounceMs), a vacate or member removal leaves a hold a
   * join anywhere in the cluster cancels within that time (a page reload): see releaseHold.
   */
  leave(appId: string, channel: string, socketId: string, debounceMs = 0): Promise<ClusterLeaveOutcome> {
    // No async wrapper: a leave storm holds tens of thousands of these at once (state-batch.ts).
    return this.batch.run<LeaveReply>(['l', this.session.current, appId, channel, socketId, debounceMs]).then((reply) => {
      // Only a leave Redis applied leaves the record: one that found nothing may have been lost by Redis.
      if (reply[0] === 1) this.recorded.delete(subscriptionKey(appId, channel, socketId));
      return leaveOutcome(reply);
    });
  }

  /**
   * The subscriptions this node recorded in Redis that are not in `snapshot` (the one a
   * re-registration records): those that ended while Redis was away, left in Redis under the
   * previous session or, when Redis lost them, nowhere. Read synchronously with the snapshot;
   * they stay in the record until forget().
   */
  leftSince(snapshot: NodeSnapshot): NodeSubscription[] {
    const current = new Set(snapshot.subscriptions.map((s) => subscriptionKey(s.appId, s.channel, s.socketId)));
    const left: NodeSubscription[] = [];
    for (const [key, sub] of this.recorded) if (!current.has(key)) left.push(sub);
    return left;
  }

  /** Drops these subscriptions from the record (each unless a later join recorded it again). */
  forget(subscriptions: NodeSubscription[]): void {
    for (const sub of subscriptions) {
      const key = subscriptionKey(sub.appId, sub.channel, sub.socketId);
      if (this.recorded.get(key) === sub) this.recorded.delete(key);
    }
  }

  /**
   * Records subscriptions under `session` again, reporting nothing (what they tell was reported
   * when they were recorded the first time): Redis lost a previous session of this node, and the
   * subscriptions that ended meanwhile go back under it so that its reap reports their leaves,
   * once for the cluster. The session must be alive (heartbeat 'start').
   */
  async restore(session: string, subscriptions: NodeSubscription[]): Promise<void> {
    const joins = subscriptions.map(({ appId, channel, socketId, member }) => this.batch.run<JoinReply>(this.joinArgs(appId, channel, socketId, member, 0, session)));
    this.batch.flush();
    const replies = await whenAvailable(() => Promise.all(joins));
    if (replies.some(([status]) => status === -2)) throw new RedisUnavailableError('restored session gone');
  }

  /**
   * The end of a leave's page-reload debounce: true when the hold is still there (send the held
   * channel_vacated, or member_removed when `userId` is given), false when a join cancelled it.
   */
  async releaseHold(appId: string, channel: string, userId: string | null, token: string): Promise<boolean> {
    return (await this.batch.run<number>(['r', appId, channel, userId ?? '', token])) === 1;
  }

  /** C4: one channel's state from shared state. `cache` only when asked. */
  async channelInfo(appId: string, channel: string, want: { cache?: boolean } = {}): Promise<ClusterChannelInfo> {
    const [count, users, cached, pttl] = await this.direct(() =>
      STATE_SCRIPTS.run<[number, number, string | null, number]>(this.redis, 'heraldInfo', [this.keys.prefix, appId, channel, want.cache ? '1' : '0']),
    );
    const out: ClusterChannelInfo = { occupied: count > 0, subscriptionCount: count, userCount: users };
    if (want.cache) out.cache = cached ? cacheEntry(cached, pttl) : null;
    return out;
  }

  /** C3: the app's occupied channels, sorted by name, optionally by prefix, with presence user counts. */
  async listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<{ channel: string; userCount: number }[]> {
    const flat = await this.direct(() =>
      STATE_SCRIPTS.run<(string | number)[]>(this.redis, 'heraldList', [this.keys.prefix, appId, prefix ?? '', withUserCount ? '1' : '0']),
    );
    const out: { channel: string; userCount: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ channel: String(flat[i]), userCount: Number(flat[i + 1]) });
    return out;
  }

  /** Occupied channels of every app, and of each of `appIds` (scripts.ts COUNTS). */
  async occupiedCounts(appIds: readonly string[]): Promise<{ total: number; byApp: number[] }> {
    const [total, ...byApp] = await this.direct(() => STATE_SCRIPTS.run<number[]>(this.redis, 'heraldCounts', [this.keys.prefix, ...appIds]));
    return { total: total ?? 0, byApp };
  }

  /** C6: user ids of a presence channel (each once, however many connections and nodes). */
  async presenceUserIds(appId: string, channel: string): Promise<string[]> {
    return this.direct(() => this.redis.hkeys(this.keys.presenceUsers(appId, channel)));
  }

  /**
   * Stores a cache channel's last event for `ttlSeconds`, within the app's `maxBytes` for the
   * whole cluster (oldest-written entries evicted first; see CACHE_SET). False when the entry
   * alone is larger than `maxBytes` (not stored; the channel's previous entry is gone).
   */
  async storeCachedEvent(appId: string, channel: string, event: string, data: string, ttlSeconds: number, maxBytes: number): Promise<boolean> {
    const args = [this.keys.prefix, appId, channel, JSON.stringify({ event, data }), ttlSeconds * 1000, maxBytes, cacheEntryBytes(channel, event, data)];
    return (await this.direct(() => STATE_SCRIPTS.run<number>(this.redis, 'heraldCacheSet', args))) === 1;
  }

  /** Drops every cached event of an app (removed: an app created later with its id finds none), CACHE_FORGET_BATCH per script call. */
  async forgetCachedEvents(appId: string): Promise<void> {
    let left = 1;
    while (left > 0) left = await this.direct(() => STATE_SCRIPTS.run<number>(this.redis, 'heraldCacheForget', [this.keys.prefix, appId, CACHE_FORGET_BATCH]));
  }

  /** A cache channel's live last event with its whole seconds left, or null (batched: read after a join asked before it). */
  async cachedEvent(appId: string, channel: string): Promise<{ event: string; data: string; ttl: number } | null> {
    const reply = await this.batch.run<[string, number] | []>(['g', appId, channel]);
    return reply.length === 2 ? cacheEntry(reply[0], reply[1]) : null;
  }

  /**
   * Counts a new connection of the app cluster-wide. `maxConnections` null: unlimited. Returns
   * accepted false (nothing recorded) when the app is at its limit.
   */
  connect(appId: string, socketId: string, maxConnections: number | null): Promise<{ accepted: boolean; connections: number }> {
    return this.tracked(this.connectRecorded(appId, socketId, maxConnections));
  }

  private async connectRecorded(appId: string, socketId: string, maxConnections: number | null): Promise<{ accepted: boolean; connections: number }> {
    const session = this.session.current;
    const run = (under: string, max: number) => this.batch.run<[number, number]>(['c', under, appId, socketId, max]);
    let [status, connections] = await run(session, maxConnections ?? 0);
    if (this.session.current !== session && status !== 0) {
      // Re-registered meanwhile (see joinRecorded): record under the current session too.
      [status, connections] = await run(this.session.current, status === 1 ? 0 : (maxConnections ?? 0));
    }
    if (status === -2) {
      this.session.reportGone();
      throw new RedisUnavailableError('node session was reaped; re-registering');
    }
    return { accepted: status === 1, connections };
  }

  /** Forgets a closed connection; returns the app's connections after. */
  disconnect(appId: string, socketId: string): Promise<number> {
    return this.batch.run<number>(['d', this.session.current, appId, socketId]);
  }

  /** True when the socket id is a live connection of the app on any node. */
  async hasSocket(appId: string, socketId: string): Promise<boolean> {
    return (await this.direct(() => this.redis.hexists(this.keys.sockets(appId), socketId))) === 1;
  }

  /** Live connections of the app cluster-wide. */
  async connectionCount(appId: string): Promise<number> {
    return this.direct(() => this.redis.hlen(this.keys.sockets(appId)));
  }

  /**
   * Charges `messages` to the app's quota for today (Redis' UTC day), cluster-wide. Refused
   * (accepted false, nothing charged) when it would pass `quota`.
   */
  async chargeQuota(appId: string, messages: number, quota: number): Promise<{ accepted: boolean; used: number }> {
    const [accepted, used] = await this.direct(() => STATE_SCRIPTS.run<[number, number]>(this.redis, 'heraldChargeQuota', [this.keys.prefix, appId, messages, quota]));
    return { accepted: accepted === 1, used };
  }

  /** Deletes the app's quota count for today (Redis' UTC day). */
  async forgetQuota(appId: string): Promise<void> {
    await this.direct(() => STATE_SCRIPTS.run<number>(this.redis, 'heraldForgetQuota', [this.keys.prefix, appId]));
  }

  /** Takes `cost` units of a rate-limit key for this second, cluster-wide: 0, or ms until the window ends (refused). */
  async takeRate(key: string, cost: number, limit: number): Promise<number> {
    return this.direct(() => STATE_SCRIPTS.run<number>(this.redis, 'heraldRateTake', [this.keys.prefix, key, cost, limit]));
  }

  /**
   * Records everything the node holds under the current session: idempotent (a socket or
   * subscription already recorded changes nothing), no member limit. The commands are issued
   * synchronously, in the order given, before this returns its promise (in batches of
   * MAX_BATCH_OPS, after any change still waiting to be sent): a later join or leave of the
   * node runs after them in Redis (one connection, in order), so the snapshot and later
   * changes cannot cross. Returns what the registration changed (channels or members that were
   * not known cluster-wide, and counts), for the caller to report.
   */
  register(snapshot: NodeSnapshot): Promise<Registration> {
    const session = this.session.current;
    for (const sub of snapshot.subscriptions) this.recorded.set(subscriptionKey(sub.appId, sub.channel, sub.socketId), sub);
    const connects = snapshot.sockets.map(({ appId, socketId }) => this.batch.run<[number, number]>(['c', session, appId, socketId, 0]));
    const joins = snapshot.subscriptions.map(({ appId, channel, socketId, member }) =>
      this.batch.run<JoinReply>(this.joinArgs(appId, channel, socketId, member, 0, session)),
    );
    this.batch.flush();
    return whenAvailable(async () => {
      const [, replies] = await Promise.all([Promise.all(connects), Promise.all(joins)]);
      const transitions: ChannelTransition[] = [];
      const channels = new Map<string, RegisteredChannel>();
      replies.forEach(([status, occupied, added, count, , resumedChannel, resumedMember], i) => {
        const { appId, channel, member } = snapshot.subscriptions[i]!;
        if (status === -2) throw new RedisUnavailableError('node session gone during registration');
        if (status !== 1) return;
        if (occupied === 1 && resumedChannel !== 1) transitions.push({ type: 'channel_occupied', appId, channel });
        if (added === 1 && member && resumedMember !== 1) transitions.push({ type: 'member_added', appId, channel, userId: member.userId, userInfo: member.userInfo ?? null });
        const id = `${appId}:${channel}`;
        const entry = channels.get(id) ?? { appId, channel, added: 0, subscriptionCount: 0 };
        entry.added++;
        entry.subscriptionCount = count;
        channels.set(id, entry);
      });
      return { transitions, channels: [...channels.values()] };
    });
  }

  private joinArgs(appId: string, channel: string, socketId: string, member: ClusterMember | undefined, maxMembers: number, session = this.session.current): StateOpArgs {
    const userInfo = member ? JSON.stringify(member.userInfo ?? null) : '';
    return ['j', session, appId, channel, socketId, member ? '1' : '0', member?.userId ?? '', userInfo, maxMembers];
  }
}

function leaveOutcome([changed, vacated, removed, count, userId, channelHold, memberHold]: LeaveReply): ClusterLeaveOutcome {
  const out: ClusterLeaveOutcome = { changed: changed === 1, vacated: vacated === 1, memberRemoved: removed === 1 ? userId : null, subscriptionCount: count };
  if (channelHold || memberHold) out.holds = { ...(channelHold && { channel: channelHold }), ...(memberHold && { member: memberHold }) };
  return out;
}

/** Flat HGETALL reply of user id → user_info JSON as [id, info] pairs. */
function pairs(flat: string[]): [string, unknown][] {
  const out: [string, unknown][] = [];
  for (let i = 0; i < flat.length; i += 2) out.push([flat[i]!, JSON.parse(flat[i + 1]!) as unknown]);
  return out;
}

function cacheEntry(json: string, pttlMs: number): { event: string; data: string; ttl: number } | null {
  if (pttlMs === -2) return null;
  const { event, data } = JSON.parse(json) as { event: string; data: string };
  return { event, data, ttl: pttlMs < 0 ? 0 : Math.ceil(pttlMs / 1000) };
}
