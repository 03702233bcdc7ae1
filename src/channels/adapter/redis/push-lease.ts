/**
 * Push instance lease: each push instance is served by exactly one node of a cluster (its
 * publishes, device writes and fan-out live in that node's LMDB). A node takes a lease per
 * instance it serves (SET NX PX, renewed every ttl/3) and refuses to start when a live node
 * holds it. A node that crashed leaves its lease to expire after `ttlMs`: a replacement waits
 * that long at most (acquire's waitMs) before giving up.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { log } from '../../../log.js';
import { whenAvailable } from './connection.js';
import type { RedisKeys } from './keys.js';
import { defineScripts, runScript } from './scripts.js';
import { DEFAULT_PUSH_INSTANCE } from '../../../config/schema.js';

const DEVELOPMENT_INSTANCE_ID = DEFAULT_PUSH_INSTANCE.instanceId;

/** A live node already serves the instance. */
export class PushLeaseHeldError extends Error {
  override readonly name = 'PushLeaseHeldError';
  constructor(
    readonly instanceId: string,
    readonly holder: string,
  ) {
    super(
      `push instance ${instanceId} is already served by live node ${holder}: in a cluster each push instance is served by one node. ` +
        'List it in `push` on that node only and give the other nodes "push": [] (a node started without a config file serves the ' +
        `built-in development instance ${DEVELOPMENT_INSTANCE_ID}: give every node a config file); see docs/scaling.md, "Push in a cluster"`,
    );
  }
}

export interface PushLeaseOptions {
  /** Lease lifetime (ms) without renewal; the config's cluster.nodeTimeoutMs. */
  ttlMs: number;
  /** Called when a renewal finds the lease held by someone else (it expired during an outage). */
  onLost?: (instanceId: string, holder: string | null) => void;
}

export class PushInstanceLease {
  /** `<nodeId>/<random>`: unique per process, so a restarted node does not mistake its predecessor's lease for its own. */
  readonly holder: string;
  private renewTimer: NodeJS.Timeout | undefined;
  private held = false;

  constructor(
    private readonly redis: Redis,
    private readonly keys: RedisKeys,
    nodeId: string,
    readonly instanceId: string,
    private readonly options: PushLeaseOptions,
  ) {
    defineScripts(redis);
    this.holder = `${nodeId}/${randomBytes(4).toString('hex')}`;
  }

  /**
   * Takes the lease, waiting up to `waitMs` for a holder that stopped renewing to lapse; throws
   * PushLeaseHeldError naming the holder when it is still held after that. Starts renewals.
   */
  async acquire(waitMs = 0): Promise<void> {
    const key = this.keys.pushLease(this.instanceId);
    const deadline = Date.now() + waitMs;
    let waitLogged = false;
    for (;;) {
      const ok = await whenAvailable(() => this.redis.set(key, this.holder, 'PX', this.options.ttlMs, 'NX'));
      if (ok === 'OK') break;
      const holder = await whenAvailable(() => this.redis.get(key));
      if (holder === this.holder) break;
      if (holder !== null && Date.now() >= deadline) throw new PushLeaseHeldError(this.instanceId, holder);
      if (holder !== null && !waitLogged) {
        waitLogged = true;
        log.warn('cluster: push instance held by another node: waiting for its lease to lapse (a node that stopped) before giving up', {
          instanceId: this.instanceId,
          holder,
          waitMs: Math.max(0, deadline - Date.now()),
        });
      }
      await new Promise((r) => setTimeout(r, Math.min(200, Math.max(10, this.options.ttlMs / 10))));
    }
    this.held = true;
    this.renewTimer = setInterval(() => void this.renew(), Math.max(10, Math.floor(this.options.ttlMs / 3)));
    this.renewTimer.unref();
  }

  /** True between acquire and release, unless a renewal found the lease taken. */
  get isHeld(): boolean {
    return this.held;
  }

  /** Extends the lease; reports it lost when another holder has it. Outage: retried next period. */
  async renew(): Promise<boolean> {
    try {
      const ok = await whenAvailable(() =>
        runScript<number>(this.redis, 'heraldLeaseRenew', [this.keys.pushLease(this.instanceId), this.holder, this.options.ttlMs]),
      );
      if (ok === 1) return true;
      const holder = await this.redis.get(this.keys.pushLease(this.instanceId)).catch(() => null);
      if (holder === null) {
        // Expired during an outage and nobody took it: take it back.
        const again = await this.redis.set(this.keys.pushLease(this.instanceId), this.holder, 'PX', this.options.ttlMs, 'NX');
        if (again === 'OK') return true;
      }
      this.held = false;
      clearInterval(this.renewTimer);
      log.error('cluster: push instance lease lost', { instanceId: this.instanceId, holder });
      this.options.onLost?.(this.instanceId, holder);
      return false;
    } catch {
      return this.held;
    }
  }

  /** Stops renewing without freeing the lease (a crash, for tests): it lapses after ttlMs. */
  abandon(): void {
    clearInterval(this.renewTimer);
    this.held = false;
  }

  /** Stops renewing and frees the lease (if still ours), so a replacement need not wait. */
  async release(): Promise<void> {
    clearInterval(this.renewTimer);
    if (!this.held) return;
    this.held = false;
    await runScript<number>(this.redis, 'heraldLeaseRelease', [this.keys.pushLease(this.instanceId), this.holder]).catch(() => {});
  }
}
