/**
 * Node liveness: heartbeats, the claims on dead sessions, and the switch to a new session after
 * a Redis outage. What a session's records are, and what reaping or re-registering them means,
 * is the recording area's (SessionRecords: the channel adapter's, channels/adapter/redis/session-records.ts).
 *
 * - Heartbeat: every `nodeTimeoutMs / 3` the node extends its session's expiry (Redis time +
 *   nodeTimeoutMs) in the `nodes` sorted set. A beat that finds the session gone (it was reaped
 *   while this node was stalled or cut off) triggers a re-registration.
 * - Reaping: every `nodeTimeoutMs / 2` each node claims sessions whose expiry has passed (one
 *   atomic script: exactly one claimant per dead session), then hands each to the records to
 *   reap (SessionRecords.reap), which renew the claim as they go and report what they removed,
 *   once per cluster. A claimant that dies mid-reap stops renewing its claim, and another node
 *   takes the reap over after nodeTimeoutMs. A node that has just reconnected reaps no other
 *   node for nodeTimeoutMs: the others were cut off too.
 * - Re-registration: whenever the command connection is ready again after a drop (and when a
 *   script finds the session gone), the node takes a new session, starts it, and hands the
 *   switch to the records (SessionRecords.reregister), which record what the node holds under
 *   the new session, then retire the previous one: claim and reap it, or, when Redis lost it,
 *   revive it for the reaper.
 */
import type { Redis } from 'ioredis';
import { log } from '../log.js';
import { whenAvailable } from './connection.js';
import type { ClusterKeys } from './keys.js';
import { LIVENESS_SCRIPTS } from './liveness-scripts.js';
import type { NodeSession } from './node-session.js';

/** Dead sessions claimed per reaper pass. */
const CLAIM_PER_PASS = 16;

/**
 * What became of a node's previous session while the node was cut off: `reaped` by a survivor
 * (the others saw what it recorded go), `kept` (still recorded: Redis kept its data, or a
 * survivor is reaping it now), or `lost` (Redis came back without it: restarted empty, or
 * failed over to a replica that never had it).
 */
export type SessionFate = 'reaped' | 'kept' | 'lost';

/**
 * A switch to a new session, handed to SessionRecords.reregister: the previous and the new
 * session, and the liveness steps the records take in their order.
 */
export interface SessionSwitch {
  readonly previous: string;
  readonly current: string;
  /** The new session's first heartbeat, issued in the same synchronous block just before reregister. */
  readonly started: Promise<number>;
  /** How long (ms) a claim on the previous session lasts unrenewed: each reap step renews it by this much (nodeTimeoutMs). */
  readonly leaseMs: number;
  /** What became of the previous session; `kept` when Redis cannot say (a claim then finds nothing). */
  fateOfPrevious(): Promise<SessionFate>;
  /** The records are in Redis again under the new session: the node is available. */
  registered(): void;
  /** Claims the previous session for this node to reap: false when another live claimant has it or nothing of it is left. */
  claimPrevious(): Promise<boolean>;
  /** Registers the previous session again, alive for nodeTimeoutMs, so that the reaper reaps what is recorded again under it. */
  revivePrevious(): Promise<number>;
}

/**
 * What an area records in Redis under the node's session, and how it reaps and re-registers it.
 * The liveness decides when a session is dead, which node reaps it and when the node takes a
 * new session; the records do the rest.
 */
export interface SessionRecords {
  /** Issues, synchronously, the changes still waiting to be recorded under the current session. */
  flush(): void;
  /** Keys that hold something while the session has records (a session with none has nothing to reap). */
  keysOf(session: string): string[];
  /**
   * Removes the records of `dead`, which `claimant` (this node's session) has claimed, renewing
   * the claim by `leaseMs` at each step, and reports what they removed. Resolves true when the
   * session is gone, false when the claim was lost to another node.
   */
  reap(dead: string, claimant: string, leaseMs: number): Promise<boolean>;
  /**
   * The node took a new session: records what it holds under it (issued synchronously, in the
   * turn of the new session's first heartbeat), then retires the previous session.
   */
  reregister(change: SessionSwitch): Promise<void>;
}

export interface LivenessOptions {
  /** Silence (ms) after which a node is dead; the config's cluster.nodeTimeoutMs. */
  nodeTimeoutMs: number;
  /** Heartbeat period (ms); default nodeTimeoutMs / 3. */
  heartbeatIntervalMs?: number;
  /** Reaper period (ms); default nodeTimeoutMs / 2. */
  reapIntervalMs?: number;
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
    private readonly keys: ClusterKeys,
    private readonly session: NodeSession,
    private readonly records: SessionRecords,
    private readonly options: LivenessOptions,
  ) {
    LIVENESS_SCRIPTS.define(redis);
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
   * (a graceful shutdown: the others need not wait nodeTimeoutMs) and its records, reported.
   */
  async stop(deregister = false): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeatTimer);
    clearInterval(this.reapTimer);
    this.redis.off('ready', this.onReady);
    this.redis.off('close', this.onClose);
    if (deregister && this.redis.status === 'ready') {
      // Changes still waiting to be batched run before the session is removed, as they were asked.
      this.records.flush();
      const session = this.session.current;
      const claimed = await this.claimSession(session, session);
      if (claimed === 1) await this.records.reap(session, session, this.options.nodeTimeoutMs);
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
   * One reaper pass: claims the sessions whose heartbeat expired and has the records reap them.
   * Returns how many sessions this node reaped to completion.
   */
  async reapOnce(): Promise<number> {
    if (this.reaping || !this.available || Date.now() < this.reapNotBefore) return 0;
    this.reaping = true;
    try {
      const me = this.session.current;
      const claimed = await whenAvailable(() =>
        LIVENESS_SCRIPTS.run<string[]>(this.redis, 'heraldClaimDead', [this.keys.prefix, me, this.options.nodeTimeoutMs, CLAIM_PER_PASS]),
      );
      let reaped = 0;
      for (const dead of claimed) {
        log.warn('cluster: reaping a silent node', { session: dead, by: me });
        if (await this.records.reap(dead, me, this.options.nodeTimeoutMs)) reaped++;
      }
      return reaped;
    } finally {
      this.reaping = false;
    }
  }

  /**
   * Takes a new session and has the records register under it and retire the previous one.
   * Runs one at a time; a request during a run runs once more after it.
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
    const current = this.session.current;
    // Issued in this order in one synchronous block: changes asked for under the previous
    // session first, then the new session is alive before the records made under it run.
    this.records.flush();
    const started = this.beat('start');
    await this.records.reregister({
      previous,
      current,
      started,
      leaseMs: this.options.nodeTimeoutMs,
      fateOfPrevious: () => this.fateOf(previous),
      registered: () => {
        this.registered = true;
      },
      claimPrevious: async () => (await whenAvailable(() => this.claimSession(current, previous))) === 1,
      revivePrevious: () => this.beat('start', previous),
    });
  }

  private beat(mode: 'start' | 'beat', session = this.session.current): Promise<number> {
    return LIVENESS_SCRIPTS.run<number>(this.redis, 'heraldHeartbeat', [this.keys.prefix, session, this.options.nodeTimeoutMs, mode]);
  }

  private claimSession(me: string, target: string): Promise<number> {
    return LIVENESS_SCRIPTS.run<number>(this.redis, 'heraldClaimSession', [this.keys.prefix, me, target, this.options.nodeTimeoutMs, ...this.records.keysOf(target)]);
  }

  /** What became of this node's previous session while it was cut off (SessionFate). */
  private async fateOf(previous: string): Promise<SessionFate> {
    const r = this.redis;
    const k = this.keys;
    try {
      const [reaped, alive, claimed, records] = await Promise.all([
        r.exists(k.reapedSession(previous)),
        r.zscore(k.nodes(), previous),
        r.hexists(k.reaping(), previous),
        r.exists(...this.records.keysOf(previous)),
      ]);
      if (reaped === 1) return 'reaped';
      return alive !== null || claimed === 1 || records > 0 ? 'kept' : 'lost';
    } catch {
      return 'kept';
    }
  }
}
