/**
 * Node liveness: heartbeats, reaping of dead nodes, and re-registration after a Redis outage.
 *
 * - Heartbeat: every `nodeTimeoutMs / 3` the node extends its session's expiry (Redis time +
 *   nodeTimeoutMs) in the `nodes` sorted set. A beat that finds the session gone (it was reaped
 *   while this node was stalled or cut off) triggers a re-registration.
 * - Reaping: every `nodeTimeoutMs / 2` each node claims sessions whose expiry has passed (one
 *   atomic script: exactly one claimant per dead session), then removes their subscriptions,
 *   presence members and sockets in batches (SPOP: each channel once). The claimant reports the
 *   transitions (member_removed, channel_vacated, subscription_count) through `onTransitions`,
 *   so they are reported once per cluster. A claimant that dies mid-reap stops renewing its
 *   claim, and another node takes the reap over after nodeTimeoutMs. A node that has just
 *   reconnected reaps no other node for nodeTimeoutMs: the others were cut off too.
 * - Re-registration: whenever the command connection is ready again after a drop (and when a
 *   script finds the session gone), the node takes a new session, records its snapshot (what it
 *   has locally: NodeSnapshot, idempotent) under it, then retires and reaps its previous session. Only real
 *   differences come out as transitions: users and channels that left during the outage, or
 *   everything when Redis came back empty. When Redis lost the previous session, what ended
 *   meanwhile (from the node's own record) is put back under it for the reaper (restoreLeft).
 */
import type { Redis } from 'ioredis';
import { log } from '../../../log.js';
import type { ChannelTransition, NodeSnapshot, NodeSubscription, RedisChannelState, Registration } from './channel-state.js';
import { whenAvailable } from '../../../cluster/connection.js';
import type { RedisKeys } from './keys.js';
import type { NodeSession } from '../../../cluster/node-session.js';
import { defineScripts, runScript } from './scripts.js';

/** Channels a reap handles per script call: bounds how long one call holds Redis. */
export const REAP_BATCH_CHANNELS = 100;
const NOTHING_REGISTERED: Registration = { transitions: [], channels: [] };
/** Dead sessions claimed per reaper pass. */
const CLAIM_PER_PASS = 16;

export interface LivenessOptions {
  /** Silence (ms) after which a node is dead; the config's cluster.nodeTimeoutMs. */
  nodeTimeoutMs: number;
  /** What this node has locally right now (read synchronously at re-registration). */
  snapshot: () => NodeSnapshot;
  /** Transitions this node must report; no other node reports the same ones. */
  onTransitions: (transitions: ChannelTransition[]) => void;
  /** Heartbeat period (ms); default nodeTimeoutMs / 3. */
  heartbeatIntervalMs?: number;
  /** Reaper period (ms); default nodeTimeoutMs / 2. */
  reapIntervalMs?: number;
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

export class NodeLiveness {
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private reapTimer: NodeJS.Timeout | undefined;
  private registered = false;
  private stopped = false;
  private reaping = false;
  private reregistering: Promise<void> | null = null;
  private reregisterAgain = false;
  /**
   * No reaping before this time (ms): set to nodeTimeoutMs after every reconnect. When Redis
   * was away (restarted, failed over to a replica) every node was cut off alike, and the state a
   * replica kept shows all of them silent; the first node back must give the others the time
   * a live node needs to reconnect and re-register before it calls them dead, or their members
   * flap (removed, then added again when they come back).
   */
  private reapNotBefore = 0;
  private readonly onReady = () => {
    this.reapNotBefore = Date.now() + this.options.nodeTimeoutMs;
    if (!this.stopped) void this.reregister();
  };
  private readonly onClose = () => {
    this.registered = false;
  };

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    private readonly session: NodeSession,
    private readonly state: RedisChannelState,
    private readonly options: LivenessOptions,
  ) {
    defineScripts(redis);
    session.onGone(() => {
      if (!this.stopped) void this.reregister();
    });
  }

  /**
   * True while Redis is reachable and this node's session is registered: the moment to answer
   * the HTTP API from shared state. False during an outage and until re-registration is done.
   */
  get available(): boolean {
    return this.registered && this.redis.status === 'ready';
  }

  /** Registers the session (the connection must be ready) and starts heartbeats and the reaper. */
  async start(): Promise<void> {
    this.stopped = false;
    await whenAvailable(() => this.beat('start'));
    this.registered = true;
    this.redis.on('ready', this.onReady);
    this.redis.on('close', this.onClose);
    const beatEvery = this.options.heartbeatIntervalMs ?? Math.max(10, Math.floor(this.options.nodeTimeoutMs / 3));
    const reapEvery = this.options.reapIntervalMs ?? Math.max(10, Math.floor(this.options.nodeTimeoutMs / 2));
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), beatEvery);
    this.reapTimer = setInterval(() => void this.reapOnce().catch(() => {}), reapEvery);
    this.heartbeatTimer.unref();
    this.reapTimer.unref();
  }

  /**
   * Stops heartbeats and the reaper. With `deregister`, also removes this node's session now
   * (a graceful shutdown: the others need not wait nodeTimeoutMs) and reports the transitions.
   */
  async stop(deregister = false): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeatTimer);
    clearInterval(this.reapTimer);
    this.redis.off('ready', this.onReady);
    this.redis.off('close', this.onClose);
    if (deregister && this.redis.status === 'ready') {
      // Changes still waiting to be batched run before the session is removed, as they were asked.
      this.state.flushChanges();
      const session = this.session.current;
      const claimed = await runScript<number>(this.redis, 'heraldClaimSession', [this.keys.prefix, session, session, this.options.nodeTimeoutMs]);
      if (claimed === 1) await this.reapEntries(session, session, (batch) => this.emit(mergeTransitions(NOTHING_REGISTERED, batch)));
    }
    this.registered = false;
  }

  /** One heartbeat; a beat that finds the session gone re-registers the node. */
  async heartbeat(): Promise<void> {
    try {
      const session = this.session.current;
      const alive = await whenAvailable(() => this.beat('beat'));
      // A beat of a session already replaced (re-registration in between) means nothing.
      if (alive === 0 && !this.stopped && session === this.session.current) await this.reregister();
    } catch {
      // Redis is away: the 'ready' event after the reconnect re-registers.
    }
  }

  /**
   * One reaper pass: claims the sessions whose heartbeat expired and reaps them, reporting the
   * transitions. Returns how many sessions this node reaped to completion.
   */
  async reapOnce(): Promise<number> {
    if (this.reaping || !this.available || Date.now() < this.reapNotBefore) return 0;
    this.reaping = true;
    try {
      const me = this.session.current;
      const claimed = await whenAvailable(() =>
        runScript<string[]>(this.redis, 'heraldClaimDead', [this.keys.prefix, me, this.options.nodeTimeoutMs, CLAIM_PER_PASS]),
      );
      let reaped = 0;
      for (const dead of claimed) {
        log.warn('cluster: reaping a silent node', { session: dead, by: me });
        // Reported batch by batch: a large dead node's first channels need not wait for its last.
        if (await this.reapEntries(dead, me, (batch) => this.emit(mergeTransitions(NOTHING_REGISTERED, batch)))) reaped++;
      }
      return reaped;
    } finally {
      this.reaping = false;
    }
  }

  /**
   * Takes a new session, records what the node holds under it, then retires the previous
   * session. Runs one at a time; a request during a run runs once more after it.
   */
  reregister(): Promise<void> {
    if (this.reregistering) {
      this.reregisterAgain = true;
      return this.reregistering;
    }
    this.reregistering = (async () => {
      do {
        this.reregisterAgain = false;
        try {
          await this.reregisterOnce();
        } catch (err) {
          // Redis dropped again: the next 'ready' starts over.
          log.warn('cluster: re-registration failed; retried on reconnect', { error: String(err) });
        }
      } while (this.reregisterAgain && !this.stopped);
    })().finally(() => {
      this.reregistering = null;
    });
    return this.reregistering;
  }

  private async reregisterOnce(): Promise<void> {
    this.registered = false;
    const previous = this.session.rotate();
    // Issued in this order in one synchronous block: changes asked for under the previous
    // session first, then the new session is alive before its joins run, and every join or
    // leave the node issues later runs after the snapshot's (scripts.ts).
    this.state.flushChanges();
    const started = this.beat('start');
    const snapshot = this.options.snapshot();
    const registration = this.state.register(snapshot);
    // What ended since the node last registered (read with the snapshot): in Redis under the
    // previous session, or lost with it when Redis came back without it.
    const left = this.state.leftSince(snapshot);
    const [, registered] = await whenAvailable(() => Promise.all([started, registration]));
    const fate = await this.fateOf(previous);
    // Members re-added are announced to the channels' sockets only when the others saw them
    // leave (a survivor reaped the previous session); after Redis came back empty nobody did.
    if (fate !== 'reaped') {
      for (const t of registered.transitions) if (t.type === 'member_added') delete t.userInfo;
    }
    const reaped: ReapedChannel[] = [];
    try {
      // Joins in flight across the switch record themselves under the new session too (channel-state.ts):
      // let them land before the previous session's records are reaped.
      await this.state.settled();
      this.registered = true;
      const me = this.session.current;
      if (fate === 'lost') {
        if (left.length > 0) await this.restoreLeft(previous, left);
      } else {
        const claimed = await whenAvailable(() =>
          runScript<number>(this.redis, 'heraldClaimSession', [this.keys.prefix, me, previous, this.options.nodeTimeoutMs]),
        );
        if (claimed === 1) await this.reapEntries(previous, me, (batch) => reaped.push(...batch));
      }
      // Reported from here on by the reap of the previous session (this node's or another's).
      this.state.forget(left);
      log.info('cluster: node re-registered', { session: me, previous });
    } finally {
      // What the registration did is reported even if reaping the previous session failed
      // (its claim then lapses and a survivor reaps it).
      this.emit(mergeTransitions(registered, reaped));
    }
  }

  private beat(mode: 'start' | 'beat', session = this.session.current): Promise<number> {
    return runScript<number>(this.redis, 'heraldHeartbeat', [this.keys.prefix, session, this.options.nodeTimeoutMs, mode]);
  }

  /**
   * What became of this node's previous session while it was cut off: `reaped` by a survivor
   * (the others saw its members leave), `kept` (still recorded: Redis kept its data, or a
   * survivor is reaping it now), or `lost` (Redis came back without it: restarted empty, or
   * failed over to a replica that never had it). When Redis cannot say, `kept`: the previous
   * behaviour, a claim that finds nothing.
   */
  private async fateOf(previous: string): Promise<'reaped' | 'kept' | 'lost'> {
    const r = this.redis;
    const k = this.keys;
    try {
      const [reaped, alive, claimed, records] = await Promise.all([
        r.exists(k.reapedSession(previous)),
        r.zscore(k.nodes(), previous),
        r.hexists(k.reaping(), previous),
        r.exists(k.sessionChannels(previous), k.sessionSockets(previous)),
      ]);
      if (reaped === 1) return 'reaped';
      return alive !== null || claimed === 1 || records > 0 ? 'kept' : 'lost';
    } catch {
      return 'kept';
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
  private async restoreLeft(previous: string, left: NodeSubscription[]): Promise<void> {
    const alive = this.beat('start', previous);
    const restored = this.state.restore(previous, left);
    await whenAvailable(() => Promise.all([alive, restored]));
    log.info('cluster: Redis came back without this node\'s records; the subscriptions that ended meanwhile are reported once every node has re-registered', {
      previous,
      subscriptions: left.length,
    });
  }

  /**
   * Reaps a session this node has claimed, batch by batch, handing each batch's channels to
   * `onBatch`. Returns true when the session is gone, false when the claim was lost to another node.
   */
  private async reapEntries(dead: string, me: string, onBatch: (channels: ReapedChannel[]) => void): Promise<boolean> {
    for (;;) {
      const json = await whenAvailable(() =>
        runScript<string>(this.redis, 'heraldReapBatch', [this.keys.prefix, me, dead, this.options.nodeTimeoutMs, REAP_BATCH_CHANNELS]),
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
