/**
 * Joins and leaves on their way to the shards, batched per shard (main thread).
 *
 * Why: one shard request per join or leave made a mass disconnect (10,000 sockets × 5 channels)
 * overflow the shard's bounded request queue; the leaves that found it full were dropped and
 * their subscribers and presence members stayed for good. Here each shard has an unbounded
 * FIFO of membership ops (bounded in practice: a connection has at most one op per channel,
 * and at most 1,000 channels) and at most MAX_BATCHES_IN_FLIGHT `channels.memberships`
 * requests of at most MAX_OPS_PER_BATCH ops in flight, so membership traffic never fills the
 * shard's queue and other requests (channel reads, publishes) are never stuck behind it. In a
 * storm the queue absorbs it: joins wait their turn (backpressure) and succeed later; nothing
 * is refused for being many.
 *
 * Failures: a leave is never dropped. A batch that fails (the shard timed out or crashed) puts
 * its leaves back at the head of the queue and retries them with a backoff (a leave is
 * idempotent on the shard) until they are applied or the pool shuts down. Its joins fail, as
 * one request did before (the caller tells the client, which may retry). A join withdrawn
 * before it was sent (the client unsubscribed or left meanwhile) is not sent at all.
 *
 * Reconcile: after any failed batch, the shard's state may differ from the front end's (a
 * timed-out batch may or may not have been applied). The shard is then reconciled: once no
 * batch is in flight, the queue pauses, the front end's subscriptions on that shard are sent as
 * `channels.reconcile` and the shard removes what the front end does not hold (webhooks
 * included) and re-records what it lacks. Every RECONCILE_INTERVAL_MS each shard is checked the
 * same way, first by comparing a digest of both sides (count, sum and xor of key hashes) and
 * only on a difference with the list, so state converges after any overload or crash whatever
 * the cause.
 */
import { HeraldError, type ErrorCode, ERROR_CATALOGUE } from '../../errors.js';
import { log } from '../../log.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { ChannelShardApi, MembershipOp, ReconcileRemoval, ReconciledSubscription } from '../messages.js';
import { subscriptionDigest } from '../state/subscription-digest.js';

type JoinReq = ChannelShardApi['channels.subscribe']['req'];
type JoinRes = ChannelShardApi['channels.subscribe']['res'];
type LeaveReq = ChannelShardApi['channels.unsubscribe']['req'];
type LeaveRes = ChannelShardApi['channels.unsubscribe']['res'];

/** Ops per channels.memberships request: small enough for a shard to answer in a few ms. */
const MAX_OPS_PER_BATCH = 256;
/** channels.memberships requests in flight per shard. */
const MAX_BATCHES_IN_FLIGHT = 4;
/** Subscriptions per channels.reconcile part. */
const RECONCILE_PART = 2000;
/** Every shard is reconciled this often even without failures (ms). */
export const RECONCILE_INTERVAL_MS = 60_000;
/** Delay before a failed reconcile is tried again (ms); traffic goes on meanwhile. */
const RECONCILE_RETRY_MS = 1_000;
/** First retry delay of leaves whose batch failed (ms), doubled per attempt up to the max. */
const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 5_000;

interface QueuedJoin {
  join: JoinReq;
  /** False once the caller no longer wants it: then it is not sent (resolved with null). */
  wanted: () => boolean;
  resolve: (res: JoinRes | null) => void;
  reject: (err: unknown) => void;
}
interface QueuedLeave {
  leave: LeaveReq;
  attempts: number;
  resolve: (res: LeaveRes) => void;
  reject: (err: unknown) => void;
}
type Queued = QueuedJoin | QueuedLeave;

/** A FIFO with O(1) shift and unshift-at-head for retries. */
class OpQueue {
  private items: Queued[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(op: Queued): void {
    this.items.push(op);
  }

  /** Puts ops back at the head, in their order. */
  putBack(ops: Queued[]): void {
    const rest = this.items.slice(this.head);
    this.items = [...ops, ...rest];
    this.head = 0;
  }

  /**
   * Takes up to `max` ops from the head. The slots they leave are cleared at once: a taken op
   * holds its request, its callbacks and its caller's closures, and must not stay reachable from
   * here after its answer (a connect storm left up to 4,096 of them, ~1 MB, until compaction).
   */
  take(max: number): Queued[] {
    const items = this.items as (Queued | undefined)[];
    const end = Math.min(this.head + max, items.length);
    const out: Queued[] = [];
    for (let i = this.head; i < end; i++) {
      out.push(items[i]!);
      items[i] = undefined;
    }
    this.head = end;
    if (this.head === items.length) {
      this.items = [];
      this.head = 0;
    } else if (this.head > 4096 && this.head * 2 > items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return out;
  }
}

interface ShardLane {
  readonly queue: OpQueue;
  inFlight: number;
  /** A pump is scheduled (setImmediate) or a retry timer is pending. */
  scheduled: boolean;
  retryTimer: NodeJS.Timeout | undefined;
  /**
   * A reconcile is due: it starts once nothing is in flight, and pauses the queue meanwhile.
   * 'check' compares digests first (the periodic one); 'full' goes straight to the list.
   */
  reconcileDue: false | 'check' | 'full';
  reconciling: boolean;
}

export interface MembershipBatchesOptions {
  /** The subscriptions the front end has on a shard's channels, for reconcile; null: unknown, no reconcile. */
  frontEndOn(shard: number): ReconciledSubscription[] | null;
  /** Tells the sockets of a channel about a subscriber a reconcile removed. */
  removed(removal: ReconcileRemoval): void;
  /**
   * The front-end thread these batches are of: digests and reconciles then speak for its
   * subscribers only (those whose socket id carries it), leaving other threads' alone.
   * Absent: for every subscriber of the shard (one front end).
   */
  frontEnd?: number | undefined;
}

export class MembershipBatches {
  private readonly lanes: ShardLane[];
  private session = 0;
  private readonly interval: NodeJS.Timeout;

  constructor(
    private readonly shards: ShardRequester<ChannelShardApi>,
    private readonly opts: MembershipBatchesOptions,
  ) {
    this.lanes = Array.from({ length: shards.shardCount }, () => ({
      queue: new OpQueue(),
      inFlight: 0,
      scheduled: false,
      retryTimer: undefined,
      reconcileDue: false,
      reconciling: false,
    }));
    this.interval = setInterval(() => {
      for (let shard = 0; shard < this.lanes.length; shard++) this.reconcileSoon(shard, 'check');
    }, RECONCILE_INTERVAL_MS);
    this.interval.unref();
  }

  /** Ops waiting or in flight on a shard (for logs and tests). */
  backlog(shard: number): number {
    const lane = this.lanes[shard]!;
    return lane.queue.length + lane.inFlight;
  }

  /**
   * Queues a join; resolves with the shard's answer, or null when `wanted()` turned false before
   * it was sent (nothing was done). Rejects with the op's own error or the batch's.
   */
  join(shard: number, join: JoinReq, wanted: () => boolean = () => true): Promise<JoinRes | null> {
    return new Promise((resolve, reject) => this.enqueue(shard, { join, wanted, resolve, reject }));
  }

  /** Queues a leave; resolves once the shard applied it. Rejects only when the pool shuts down. */
  leave(shard: number, leave: LeaveReq): Promise<LeaveRes> {
    return new Promise((resolve, reject) => this.enqueue(shard, { leave, attempts: 0, resolve, reject }));
  }

  /**
   * Asks for a reconcile of the shard as soon as nothing is in flight on it: `full` sends the
   * front end's subscriptions; `check` first compares a digest of both sides and sends them only
   * when it differs (cheap enough to run periodically).
   */
  reconcileSoon(shard: number, kind: 'check' | 'full' = 'full'): void {
    const lane = this.lanes[shard];
    // Asked while one runs: it runs again after (what it listed may already be stale).
    if (!lane || lane.reconcileDue === 'full' || lane.reconcileDue === kind) return;
    lane.reconcileDue = kind;
    this.schedule(shard);
  }

  stop(): void {
    clearInterval(this.interval);
    for (const lane of this.lanes) clearTimeout(lane.retryTimer);
  }

  private enqueue(shard: number, op: Queued): void {
    const lane = this.lanes[shard];
    if (!lane) {
      op.reject(new Error(`no shard ${shard}`));
      return;
    }
    lane.queue.push(op);
    this.schedule(shard);
  }

  /** Pumps on the next turn: ops arriving in the same turn (many sockets) share batches. */
  private schedule(shard: number): void {
    const lane = this.lanes[shard]!;
    if (lane.scheduled) return;
    lane.scheduled = true;
    setImmediate(() => {
      lane.scheduled = false;
      this.pump(shard);
    });
  }

  private pump(shard: number): void {
    const lane = this.lanes[shard]!;
    if (lane.reconciling || lane.retryTimer) return;
    if (lane.reconcileDue) {
      // A barrier: the reconcile waits for the batches in flight, and the queue waits for it.
      if (lane.inFlight === 0) void this.reconcile(shard);
      return;
    }
    while (lane.inFlight < MAX_BATCHES_IN_FLIGHT && lane.queue.length > 0) {
      const batch: Queued[] = [];
      while (batch.length < MAX_OPS_PER_BATCH && lane.queue.length > 0) {
        for (const op of lane.queue.take(MAX_OPS_PER_BATCH - batch.length)) {
          if ('join' in op && !op.wanted()) op.resolve(null);
          else batch.push(op);
        }
      }
      if (batch.length > 0) this.send(shard, batch);
    }
  }

  private send(shard: number, batch: Queued[]): void {
    const lane = this.lanes[shard]!;
    lane.inFlight++;
    const ops: MembershipOp[] = batch.map((op) => ('join' in op ? { join: op.join } : { leave: op.leave }));
    this.shards.request(shard, { type: 'channels.memberships', ops }).then(
      ({ results }) => {
        lane.inFlight--;
        batch.forEach((op, i) => {
          const result = results[i];
          if (result?.ok) op.resolve(result.value as JoinRes & LeaveRes);
          else op.reject(result ? new HeraldError(knownCode(result.code), result.message) : new HeraldError('INTERNAL', 'No answer for a membership op'));
        });
        this.schedule(shard);
      },
      (err: unknown) => {
        lane.inFlight--;
        this.batchFailed(shard, batch, err);
        this.schedule(shard);
      },
    );
  }

  /** Joins fail; leaves go back to the head of the queue, retried after a backoff. */
  private batchFailed(shard: number, batch: Queued[], err: unknown): void {
    const lane = this.lanes[shard]!;
    const leaves: QueuedLeave[] = [];
    for (const op of batch) {
      if ('join' in op) op.reject(err);
      else leaves.push(op);
    }
    if (!this.shards.accepting) {
      for (const op of leaves) op.reject(err);
      return;
    }
    // Whatever part of the batch the shard applied, state may now differ: reconcile after.
    this.reconcileSoon(shard);
    if (leaves.length === 0) return;
    let attempts = 0;
    for (const op of leaves) attempts = Math.max(attempts, ++op.attempts);
    log.warn('channel leaves failed on their shard: retrying', { shard, leaves: leaves.length, attempt: attempts, error: String(err) });
    lane.queue.putBack(leaves);
    this.pauseFor(shard, Math.min(RETRY_MIN_MS * 2 ** (attempts - 1), RETRY_MAX_MS));
  }

  /** Stops sending on the shard for `ms` (a failing shard is not hammered). */
  private pauseFor(shard: number, ms: number): void {
    const lane = this.lanes[shard]!;
    clearTimeout(lane.retryTimer);
    lane.retryTimer = setTimeout(() => {
      lane.retryTimer = undefined;
      this.schedule(shard);
    }, ms);
    lane.retryTimer.unref();
  }

  /** A digest or reconcile request, naming this front-end thread when there is one. */
  private ofFrontEnd<R extends object>(req: R): R & { frontEnd?: number } {
    const { frontEnd } = this.opts;
    return frontEnd === undefined ? req : { ...req, frontEnd };
  }

  private async reconcile(shard: number): Promise<void> {
    const lane = this.lanes[shard]!;
    const kind = lane.reconcileDue;
    lane.reconcileDue = false;
    lane.reconciling = true;
    const session = ++this.session;
    try {
      const frontEnd = this.opts.frontEndOn(shard);
      if (frontEnd === null) return;
      if (kind === 'check') {
        const theirs = await this.shards.request(shard, this.ofFrontEnd({ type: 'channels.digest' as const }));
        const ours = subscriptionDigest(frontEnd.map((sub) => [sub.appId, sub.channel, sub.socketId]));
        if (theirs.count === ours.count && theirs.sum === ours.sum && theirs.xor === ours.xor) return;
        log.warn('channel state differs from the front end: reconciling', { shard, shardCount: theirs.count, heldCount: ours.count });
      }
      let removed: ReconcileRemoval[] = [];
      let restored = 0;
      for (let i = 0; i === 0 || i < frontEnd.length; i += RECONCILE_PART) {
        const last = i + RECONCILE_PART >= frontEnd.length;
        const res = await this.shards.request(shard, this.ofFrontEnd({ type: 'channels.reconcile' as const, session, subscriptions: frontEnd.slice(i, i + RECONCILE_PART), last }));
        removed = res.removed;
        restored = res.restored;
      }
      for (const removal of removed) this.opts.removed(removal);
      if (removed.length > 0 || restored > 0) {
        log.warn('channel state reconciled with the front end', { shard, removed: removed.length, restored, held: frontEnd.length });
      }
    } catch (err) {
      if (this.shards.accepting) {
        log.warn('channel state reconcile failed: retrying', { shard, error: String(err) });
        setTimeout(() => this.reconcileSoon(shard, kind || 'full'), RECONCILE_RETRY_MS).unref();
      }
    } finally {
      lane.reconciling = false;
      this.schedule(shard);
    }
  }
}

function knownCode(code: string): ErrorCode {
  return code in ERROR_CATALOGUE ? (code as ErrorCode) : 'INTERNAL';
}
