/**
 * The channel state a node records under its session (subscriptions, presence members,
 * sockets), as the node's liveness (src/cluster/liveness.ts) reaps and re-registers it.
 *
 * - Reaping: the liveness claims a dead session (exactly one claimant per session); its records
 *   are then removed in batches (SPOP: each channel once), each batch renewing the claim in the
 *   same atomic script. The claimant reports the transitions (member_removed, channel_vacated,
 *   subscription_count) through `onTransitions`, so they are reported once per cluster.
 * - Re-registration: when the node takes a new session, it records its snapshot (what it has
 *   locally: NodeSnapshot, idempotent) under it, then retires and reaps its previous session.
 *   Only real differences come out as transitions: users and channels that left during the
 *   outage, or everything when Redis came back empty. When Redis lost the previous session,
 *   what ended meanwhile (from the node's own record) is put back under it for the reaper
 *   (restoreLeft).
 */
import type { Redis } from 'ioredis';
import { log } from '../../../log.js';
import { whenAvailable } from '../../../cluster/connection.js';
import type { SessionRecords, SessionSwitch } from '../../../cluster/liveness.js';
import type { ChannelTransition, NodeSnapshot, NodeSubscription, RedisChannelState, RegisteredChannel, Registration } from './channel-state.js';
import type { RedisKeys } from './keys.js';
import { STATE_SCRIPTS } from './scripts.js';

/** Channels a reap handles per script call: bounds how long one call holds Redis. */
export const REAP_BATCH_CHANNELS = 100;
const NOTHING_REGISTERED: Registration = { transitions: [], channels: [] };

/**
 * What a front-end thread records under the node's session when several serve the node: at a
 * switch it takes the new session and records what it holds under it itself, on its own
 * connection, in one turn (so its later joins and leaves run after them), as the node does for
 * what it holds on its own thread.
 */
export interface RecordedPart {
  /** Takes `session` and records what the part holds under it; answers the registration and what ended since the part last registered. */
  register(session: string): Promise<{ registration: Registration; left: NodeSubscription[] }>;
  /** Resolves once every join and connect the part issued so far has settled. */
  settled(): Promise<void>;
  /** What ended is reported by the previous session's reap from here on (RedisChannelState.forget). */
  forget(left: NodeSubscription[]): void;
}

export interface ChannelRecordsOptions {
  /** What this node has locally right now (read synchronously at re-registration). */
  snapshot: () => NodeSnapshot;
  /** The node's front-end threads, each recording its own share (several threads). */
  parts?: () => RecordedPart[];
  /** Transitions this node must report; no other node reports the same ones. */
  onTransitions: (transitions: ChannelTransition[]) => void;
}

interface ReapedChannel {
  appId: string;
  channel: string;
  removed: string[] | Record<string, never>;
  vacated: boolean;
  count: number;
  sockets: number;
}

interface ReapReply {
  lost?: boolean;
  done: boolean;
  channels: ReapedChannel[] | Record<string, never>;
}

export class ChannelSessionRecords implements SessionRecords {
  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly state: RedisChannelState,
    private readonly options: ChannelRecordsOptions,
  ) {
    STATE_SCRIPTS.define(redis);
  }

  flush(): void {
    this.state.flushChanges();
  }

  keysOf(session: string): string[] {
    return [this.keys.sessionChannels(session), this.keys.sessionSockets(session)];
  }

  /** Reports the transitions batch by batch: a large dead node's first channels need not wait for its last. */
  reap(dead: string, claimant: string, leaseMs: number): Promise<boolean> {
    return this.reapEntries(dead, claimant, leaseMs, (batch) => this.emit(mergeTransitions(NOTHING_REGISTERED, batch)));
  }

  async reregister(change: SessionSwitch): Promise<void> {
    const { previous, current: me } = change;
    // Issued in the turn of the new session's first heartbeat: every join or leave the node
    // issues later runs after the snapshot's (scripts.ts).
    const snapshot = this.options.snapshot();
    const registration = this.state.register(snapshot);
    // What ended since the node last registered (read with the snapshot): in Redis under the
    // previous session, or lost with it when Redis came back without it.
    const ownLeft = this.state.leftSince(snapshot);
    const parts = this.options.parts?.() ?? [];
    // The threads record on their own connections: after the new session's first heartbeat is
    // in (on this connection, it is ahead of this node's own registration).
    const partRegistrations = parts.map((part) => change.started.then(() => part.register(me)));
    const [, own, ...others] = await whenAvailable(() => Promise.all([change.started, registration, ...partRegistrations]));
    const registered = mergeRegistrations([own, ...others.map((o) => o.registration)]);
    const left = [...ownLeft, ...others.flatMap((o) => o.left)];
    const fate = await change.fateOfPrevious();
    // Members re-added are announced to the channels' sockets only when the others saw them
    // leave (a survivor reaped the previous session); after Redis came back empty nobody did.
    if (fate !== 'reaped') {
      for (const t of registered.transitions) if (t.type === 'member_added') delete t.userInfo;
    }
    const reaped: ReapedChannel[] = [];
    try {
      // Joins in flight across the switch record themselves under the new session too (channel-state.ts):
      // let them land before the previous session's records are reaped.
      await Promise.all([this.state.settled(), ...parts.map((part) => part.settled())]);
      change.registered();
      if (fate === 'lost') {
        if (left.length > 0) await this.restoreLeft(change, left);
      } else if (await change.claimPrevious()) {
        await this.reapEntries(previous, me, change.leaseMs, (batch) => reaped.push(...batch));
      }
      // Reported from here on by the reap of the previous session (this node's or another's).
      this.state.forget(ownLeft);
      parts.forEach((part, i) => part.forget(others[i]!.left));
      log.info('cluster: node re-registered', { session: me, previous });
    } finally {
      // What the registration did is reported even if reaping the previous session failed
      // (its claim then lapses and a survivor reaps it).
      this.emit(mergeTransitions(registered, reaped));
    }
  }

  /**
   * Redis lost the previous session while subscriptions of it ended (members left, channels
   * emptied during a restart without persistence): nobody would ever report those leaves. They
   * are recorded again under the previous session, alive for nodeTimeoutMs, and left to the
   * reaper: by the time it claims the session every live node has re-registered what it holds
   * (a node reaps nobody for nodeTimeoutMs after a reconnect), so its reap reports exactly the
   * users and channels that are gone from the whole cluster, once, as after a node's death.
   */
  private async restoreLeft(change: SessionSwitch, left: NodeSubscription[]): Promise<void> {
    const alive = change.revivePrevious();
    const restored = this.state.restore(change.previous, left);
    await whenAvailable(() => Promise.all([alive, restored]));
    log.info('cluster: Redis came back without this node\'s records; the subscriptions that ended meanwhile are reported once every node has re-registered', {
      previous: change.previous,
      subscriptions: left.length,
    });
  }

  /**
   * Reaps a session `me` has claimed, batch by batch, handing each batch's channels to
   * `onBatch`. Returns true when the session is gone, false when the claim was lost to another node.
   */
  private async reapEntries(dead: string, me: string, leaseMs: number, onBatch: (channels: ReapedChannel[]) => void): Promise<boolean> {
    for (;;) {
      const json = await whenAvailable(() =>
        STATE_SCRIPTS.run<string>(this.redis, 'heraldReapBatch', [this.keys.prefix, me, dead, leaseMs, REAP_BATCH_CHANNELS]),
      );
      const reply = JSON.parse(json) as ReapReply;
      if (Array.isArray(reply.channels) && reply.channels.length > 0) onBatch(reply.channels);
      if (reply.lost) return false;
      if (reply.done) return true;
    }
  }

  private emit(transitions: ChannelTransition[]): void {
    if (transitions.length === 0) return;
    try {
      this.options.onTransitions(transitions);
    } catch (err) {
      log.error('cluster: transition listener failed', { error: String(err) });
    }
  }
}

/** Several registrations of one switch (the node's and its threads') as one: a channel's additions summed. */
export function mergeRegistrations(all: Registration[]): Registration {
  if (all.length === 1) return all[0]!;
  const channels = new Map<string, RegisteredChannel>();
  for (const r of all) {
    for (const c of r.channels) {
      const id = `${c.appId}:${c.channel}`;
      const seen = channels.get(id);
      channels.set(id, seen ? { ...seen, added: seen.added + c.added, subscriptionCount: Math.max(seen.subscriptionCount, c.subscriptionCount) } : { ...c });
    }
  }
  return { transitions: all.flatMap((r) => r.transitions), channels: [...channels.values()] };
}

/**
 * The transitions of a registration followed by a reap of the previous session, net: a channel
 * whose subscriptions were registered again and reaped in equal numbers reports no count change.
 */
export function mergeTransitions(registered: Registration, reaped: ReapedChannel[]): ChannelTransition[] {
  const out: ChannelTransition[] = [...registered.transitions];
  const counts = new Map<string, { appId: string; channel: string; net: number; count: number; vacated: boolean }>();
  for (const c of registered.channels) counts.set(`${c.appId}:${c.channel}`, { appId: c.appId, channel: c.channel, net: c.added, count: c.subscriptionCount, vacated: false });
  for (const c of reaped) {
    const removed = Array.isArray(c.removed) ? c.removed : [];
    for (const userId of removed) out.push({ type: 'member_removed', appId: c.appId, channel: c.channel, userId });
    const id = `${c.appId}:${c.channel}`;
    const entry = counts.get(id) ?? { appId: c.appId, channel: c.channel, net: 0, count: 0, vacated: false };
    entry.net -= c.sockets;
    entry.count = c.count;
    entry.vacated ||= c.vacated;
    counts.set(id, entry);
  }
  for (const { appId, channel, net, count, vacated } of counts.values()) {
    if (vacated) out.push({ type: 'channel_vacated', appId, channel });
    else if (net !== 0) out.push({ type: 'subscription_count', appId, channel, subscriptionCount: count });
  }
  return out;
}
