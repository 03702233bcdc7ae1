/**
 * Main-thread side of the shards: one single-thread Piscina pool per shard, so a key always
 * reaches the same worker (and its LMDB environment). Every request is msgpackr-encoded,
 * carries an id (for logs) and a deadline; a timeout, a full queue or a crashed worker answers
 * a clean SHARD_UNAVAILABLE (500) instead of hanging. A request that reaches its shard after
 * its deadline (queued behind a stalled worker) is not run: its caller was already told it
 * failed. Each shard's queue is bounded (maxQueuePerShard), so a stalled shard cannot make
 * the main thread's memory grow without limit.
 *
 * A worker that dies is replaced by Piscina: the requests it held are rejected at once (its
 * `exit` event), the next ones go to the new worker. Its in-memory state (channel members) is
 * gone, so the pool tells `onShardRestart` listeners, before any later request can reach the
 * new worker, and they re-send what they need.
 *
 * Front ends (worker threads) talk to the shards over ports of their own, not through this
 * thread: `attachFrontEnd` hands each shard one end of a MessageChannel per front end. A
 * replaced worker is given fresh ports for every attached front end, after the restart
 * listeners' requests, and `onFrontEndPort` listeners forward them to their threads.
 */
import { fileURLToPath } from 'node:url';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import { ShardCodec } from './codec.js';
import type { CoreShardApi, ShardEnvelope, ShardPortTask, ShardReply, ShardRequestOf, ShardRequestType, ShardResponseOf, ShardWorkerData } from './messages.js';
import { DEFAULT_MAX_QUEUE_PER_SHARD, QueueFullRefusal, replyValue, timedOut, workerStopped } from './replies.js';
import type { ShardRequester, ShardRestartListener } from './requester.js';

const codec = new ShardCodec();

/** Default bound on a whole close(): draining the requests already sent, then closing storage (ms). */
const DEFAULT_CLOSE_TIMEOUT_MS = 15_000;
/**
 * Part of close()'s budget kept for the shards to flush and close their storage after the
 * drain (ms); at most half the budget.
 */
const STORAGE_CLOSE_RESERVE_MS = 5_000;
/** Requests a shard's Piscina queue holds beyond the 1024 its worker takes at once. */
export { DEFAULT_MAX_QUEUE_PER_SHARD };
/** Requests a worker takes at once (Piscina concurrentTasksPerWorker). */
const TASKS_PER_WORKER = 1024;
/**
 * V8 young generation of a shard worker (MB; V8 splits it into 2 semi-spaces and a large-object
 * part, so 6 MB means 2 MB semi-spaces). Node's default lets it grow to 48 MB (16 MB semi-spaces)
 * after a burst of allocation, and a grown young generation stays resident: at 10,000 connections
 * that cost ~150-300 B per connection in RSS. 2 MB semi-spaces match what `herald` is started with
 * (`node --max-semi-space-size=2`, docs/operations.md), which overrides this when given.
 */
export const SHARD_YOUNG_GENERATION_MB = 6;
/** Piscina's rejection when a pool's queue is at maxQueue. */
const QUEUE_AT_LIMIT = 'Task queue is at limit';

export interface ShardPoolOptions {
  /** The worker entry file (absolute path or file URL): it lists the areas a shard runs. */
  workerFile: string;
  shardCount: number;
  dataDir: string;
  config: unknown;
  installSecret: string;
  requestTimeoutMs: number;
  /** Requests queued per shard beyond what its worker holds (default DEFAULT_MAX_QUEUE_PER_SHARD); more fail at once. */
  maxQueuePerShard?: number;
  /** Answer test-only requests (default: HERALD_TEST_HOOKS=1 in the environment). */
  testHooks?: boolean;
  /** Workers wait for markServing() before they time what waits for clients (ShardContext.onServing); default false. */
  holdUntilServing?: boolean;
}

export type { ShardRestartListener } from './requester.js';

/**
 * Told the new port of an attached front end to a shard whose worker was replaced; the caller
 * hands it to that front end's thread (PortShardRequester.replacePort there).
 */
export type FrontEndPortListener = (frontEnd: number, shard: number, port: MessagePort) => void;

/** The shards of one process; `Api` is every request the worker entry's areas answer. */
export class ShardPool<Api = CoreShardApi> implements ShardRequester<Api> {
  readonly shardCount: number;
  private readonly pools: Piscina[];
  /** Each shard's workerData, passed (by reference) to every worker Piscina starts for it. */
  private readonly workerDatas: ShardWorkerData[] = [];
  private readonly timeoutMs: number;
  private nextId = 1;
  /** Tasks handed to each shard's Piscina pool and not settled yet. */
  private readonly inFlight: number[];
  /** Per shard: called when its in-flight count drops to 0 (close() waits on them). */
  private readonly drainWaiters: (() => void)[][];
  /** Per shard: highest worker thread id seen (0: none yet). */
  private readonly boots: number[];
  /** Per shard: worker deaths so far; a request that sees this change died with its worker. */
  private readonly losses: number[];
  /** Per shard: a loss was announced and the replacement's thread id is not known yet. */
  private readonly lossAnnounced: boolean[];
  private readonly restartListeners: ShardRestartListener[] = [];
  private readonly queueFull: QueueFullRefusal;
  /** Front ends with ports attached to every shard. */
  private readonly frontEnds = new Set<number>();
  private readonly frontEndPortListeners: FrontEndPortListener[] = [];
  /** close() has begun: new requests are refused. */
  private closing: Promise<void> | undefined;

  constructor(opts: ShardPoolOptions) {
    this.shardCount = opts.shardCount;
    this.timeoutMs = opts.requestTimeoutMs;
    this.inFlight = new Array<number>(opts.shardCount).fill(0);
    this.drainWaiters = Array.from({ length: opts.shardCount }, () => []);
    this.boots = new Array<number>(opts.shardCount).fill(0);
    this.losses = new Array<number>(opts.shardCount).fill(0);
    this.lossAnnounced = new Array<boolean>(opts.shardCount).fill(false);
    this.queueFull = new QueueFullRefusal(opts.shardCount);
    const filename = opts.workerFile.startsWith('file:') ? fileURLToPath(opts.workerFile) : opts.workerFile;
    this.pools = [];
    for (let shardIndex = 0; shardIndex < opts.shardCount; shardIndex++) {
      const workerData: ShardWorkerData = {
        shardIndex,
        shardCount: opts.shardCount,
        dataDir: opts.dataDir,
        config: opts.config,
        installSecret: opts.installSecret,
        testHooks: opts.testHooks ?? process.env.HERALD_TEST_HOOKS === '1',
        serving: opts.holdUntilServing !== true,
      };
      this.workerDatas.push(workerData);
      const pool = new Piscina({
        filename,
        minThreads: 1,
        maxThreads: 1,
        idleTimeout: Number.POSITIVE_INFINITY,
        // Shards run background work (webhook sends, push fan-out) between tasks:
        // the worker's event loop must never block on Atomics.wait.
        atomics: 'disabled',
        concurrentTasksPerWorker: TASKS_PER_WORKER,
        maxQueue: opts.maxQueuePerShard ?? DEFAULT_MAX_QUEUE_PER_SHARD,
        workerData,
        resourceLimits: { maxYoungGenerationSizeMb: SHARD_YOUNG_GENERATION_MB },
      });
      pool.on('error', (err: unknown) => log.error('shard worker error', { shard: shardIndex, error: String(err) }));
      pool.on('workerCreate', (worker: { id: number }) => this.noteBoot(shardIndex, worker.id));
      // Emitted synchronously while Piscina handles the worker's exit, before it rejects the
      // tasks the worker held and before its replacement can take any task.
      pool.on('workerDestroy', () => this.workerLost(shardIndex));
      this.pools.push(pool);
    }
  }

  /** Requests sent to the shard and not answered yet (its queue depth, for the dashboard). */
  inFlightCount(shard: number): number {
    return this.inFlight[shard] ?? 0;
  }

  /**
   * Registers a listener told when a shard's worker died and was replaced: whatever that shard
   * held in memory is gone. It runs before any request sent after the death can reach the new
   * worker, so requests it sends are the first the new worker handles.
   */
  onShardRestart(listener: ShardRestartListener): void {
    this.restartListeners.push(listener);
  }

  /**
   * Gives a front end a port to every shard: one MessageChannel per shard, one end attached to
   * the shard's worker, the other answered (index = shard) for the caller to transfer to the
   * front end's thread (see PortShardRequester). Attaching a front end again replaces its ports.
   */
  async attachFrontEnd(frontEnd: number, timeoutMs = this.timeoutMs): Promise<MessagePort[]> {
    if (this.closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Server is shutting down');
    this.frontEnds.add(frontEnd);
    return Promise.all(this.pools.map((_, shard) => this.attachPort(shard, frontEnd, undefined, timeoutMs)));
  }

  /** Closes a front end's ports on every shard; it is no longer re-attached after a restart. */
  async detachFrontEnd(frontEnd: number): Promise<void> {
    this.frontEnds.delete(frontEnd);
    const detach = { type: 'core.detachFrontEnd', frontEnd };
    await Promise.all(this.pools.map((_, shard) => this.run(shard, detach, this.timeoutMs)));
  }

  /**
   * Registers a listener given the new port of each attached front end to a shard whose worker
   * was replaced. It runs after the onShardRestart listeners, each port already on its way to
   * the new worker (requests posted on it wait there until the worker takes it).
   */
  onFrontEndPort(listener: FrontEndPortListener): void {
    this.frontEndPortListeners.push(listener);
  }

  /** False once close() has begun: requests are refused from then on. */
  get accepting(): boolean {
    return this.closing === undefined;
  }

  /** Worker deaths (and replacements) since start, over every shard. */
  get restarts(): number {
    return this.losses.reduce((a, b) => a + b, 0);
  }

  /**
   * The server accepts clients on every front end: what waits on each worker's
   * ShardContext.onServing runs, and a worker started from now on (a crash replacement) runs it at once.
   */
  async markServing(): Promise<void> {
    for (const data of this.workerDatas) data.serving = true;
    const serving = { type: 'core.serving' };
    // A notice the start does not hang on: a worker takes it whenever it comes (past its
    // deadline too), so one that answers late (logged by run) is told all the same.
    await Promise.all(this.pools.map((_, shard) => this.run(shard, serving, this.timeoutMs).catch(() => undefined)));
  }

  /** The config a worker started from now on (a crash replacement) is given; after a reload. */
  setWorkerConfig(config: unknown): void {
    for (const data of this.workerDatas) data.config = config;
  }

  /** Sends one request to a shard and resolves with its answer. Throws HeraldError. */
  async request<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>, timeoutMs = this.timeoutMs): Promise<ShardResponseOf<Api, K>> {
    if (this.closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Server is shutting down');
    return this.run(shard, message, timeoutMs);
  }

  /** Fire-and-forget: failures are logged, never thrown. */
  send<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>): void {
    this.request(shard, message).catch(() => undefined);
  }

  /** The same request to every shard, in parallel. */
  broadcast<K extends ShardRequestType<Api>>(message: ShardRequestOf<Api, K>, timeoutMs?: number): Promise<ShardResponseOf<Api, K>[]> {
    return Promise.all(this.pools.map((_, i) => this.request(i, message, timeoutMs)));
  }

  /**
   * Stops accepting requests, waits for those already sent to each shard to settle, then asks
   * that shard to stop its background work and flush and close its storage, then stops the
   * workers. Closing only after the drain matters: a shard handles up to 1024 requests at
   * once, so a close sent earlier would overtake queued requests.
   *
   * The whole close takes at most about `timeoutMs`: the drain ends early enough to leave the
   * storage close its reserve (STORAGE_CLOSE_RESERVE_MS, at most half the budget), and the
   * storage close gets what is left. A stuck shard is then stopped without its close: what it
   * had committed is on disk (LMDB commits are synchronous), what it had not is lost.
   */
  close(timeoutMs = DEFAULT_CLOSE_TIMEOUT_MS): Promise<void> {
    this.closing ??= this.closeShards(timeoutMs);
    return this.closing;
  }

  private async closeShards(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const drainDeadline = deadline - Math.min(STORAGE_CLOSE_RESERVE_MS, timeoutMs / 2);
    await Promise.all(
      this.pools.map(async (_, shard) => {
        if (!(await this.drained(shard, drainDeadline))) {
          log.warn('shard close: requests still in flight at the drain deadline', { shard, inFlight: this.inFlight[shard] });
        }
        try {
          await this.run(shard, { type: 'core.close' }, Math.max(1, deadline - Date.now()));
        } catch (err) {
          log.warn('shard close failed: stopping the worker without it', { shard, error: String(err) });
        }
      }),
    );
    await Promise.all(this.pools.map((p) => p.destroy()));
  }

  /** Attaches a new port of the front end to the shard's worker; answers the other end. */
  private attachPort(shard: number, frontEnd: number, awaitRestoreOf?: number[], timeoutMs = this.timeoutMs): Promise<MessagePort> {
    const { port1, port2 } = new MessageChannel();
    const attach = { type: 'core.attachFrontEnd', frontEnd, ...(awaitRestoreOf ? { awaitRestoreOf } : {}) };
    return this.run(shard, attach, timeoutMs, port1).then(
      () => port2,
      (err: unknown) => {
        port2.close();
        throw err;
      },
    );
  }

  private async run(shard: number, message: { type: string }, timeoutMs: number, port?: MessagePort): Promise<never> {
    const pool = this.pools[shard];
    if (!pool) throw new Error(`no shard ${shard}`);
    const id = this.nextId++;
    const envelope: ShardEnvelope = { id, deadline: Date.now() + timeoutMs, request: message };
    const encoded = codec.encode(envelope);
    const losses = this.losses[shard];
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(timedOut(shard, timeoutMs)), timeoutMs);
    });
    // A port cannot be msgpackr-encoded: it travels beside the envelope, transferred.
    const task = port ? pool.run({ envelope: encoded, port } satisfies ShardPortTask, { transferList: [port] }) : pool.run(encoded);
    try {
      const raw = (await Promise.race([this.track(shard, task as Promise<Uint8Array>), timeout])) as Uint8Array;
      const reply = codec.decode(raw) as ShardReply;
      this.noteBoot(shard, reply.boot);
      return replyValue(reply) as never;
    } catch (err) {
      if (err instanceof HeraldError) {
        if (err.code === 'SHARD_UNAVAILABLE') log.warn('shard request failed', { shard, id, type: message.type, error: err.message });
        throw err;
      }
      if ((err as Error)?.message === QUEUE_AT_LIMIT) throw this.queueFull.error(shard, this.inFlight[shard]!);
      // The worker died holding this request: workerLost() logged it once for all of them.
      if (this.losses[shard] !== losses) throw workerStopped(shard);
      // close() stopped a worker that had not finished (logged there).
      if (this.closing) throw new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} was stopped by the shutdown`);
      log.error('shard request failed', { shard, id, type: message.type, error: String(err) });
      throw new HeraldError('SHARD_UNAVAILABLE');
    } finally {
      clearTimeout(timer);
    }
  }

  /** Counts a task as in flight on its shard until it settles (whatever the caller's timeout). */
  private track<T>(shard: number, task: Promise<T>): Promise<T> {
    this.inFlight[shard]!++;
    const settled = (): void => {
      if (--this.inFlight[shard]! > 0) return;
      const waiters = this.drainWaiters[shard]!.splice(0);
      for (const waiter of waiters) waiter();
    };
    task.then(settled, settled);
    return task;
  }

  /** Resolves true once the shard has nothing in flight, false at the deadline. */
  private drained(shard: number, deadline: number): Promise<boolean> {
    if (this.inFlight[shard] === 0) return Promise.resolve(true);
    return new Promise((resolvePromise) => {
      const timer = setTimeout(() => resolvePromise(false), Math.max(0, deadline - Date.now()));
      this.drainWaiters[shard]!.push(() => {
        clearTimeout(timer);
        resolvePromise(true);
      });
    });
  }

  /** A worker of the shard is gone. Outside close(), that is a crash: Piscina starts another. */
  private workerLost(shard: number): void {
    if (this.closing) return;
    this.losses[shard]!++;
    log.error('shard worker died; its requests fail with SHARD_UNAVAILABLE and a new worker starts', { shard, inFlight: this.inFlight[shard] });
    if (this.lossAnnounced[shard]) return; // the replacement died before it was ready: same loss
    this.lossAnnounced[shard] = true;
    // A microtask: Piscina is still inside its exit handling (re-entering it is unsafe), and
    // this runs before the continuations of the requests it is about to reject, so whatever
    // the listeners send reaches the new worker first.
    queueMicrotask(() => this.announceRestart(shard));
  }

  /** Records a worker thread id seen for the shard; a new one nobody announced is a restart too. */
  private noteBoot(shard: number, boot: number): void {
    const known = this.boots[shard]!;
    if (!(boot > known)) return;
    this.boots[shard] = boot;
    if (this.lossAnnounced[shard]) {
      this.lossAnnounced[shard] = false;
    } else if (known !== 0 && !this.closing) {
      log.warn('shard worker replaced without a reported exit', { shard });
      this.announceRestart(shard);
    }
  }

  private announceRestart(shard: number): void {
    if (this.closing) return;
    for (const listener of this.restartListeners) {
      try {
        listener(shard);
      } catch (err) {
        log.error('shard restart listener failed', { shard, error: describeError(err) });
      }
    }
    this.reattachFrontEnds(shard);
  }

  /**
   * Gives the shard's new worker a fresh port for every attached front end (the old ones died
   * with the old worker) and hands each to the onFrontEndPort listeners at once: requests the
   * front end posts on it wait in the port until the worker has taken it. The worker holds each
   * front end's requests after its `core.restored` until all of them have sent theirs.
   */
  private reattachFrontEnds(shard: number): void {
    const frontEnds = [...this.frontEnds];
    for (const frontEnd of frontEnds) {
      const { port1, port2 } = new MessageChannel();
      const attach = { type: 'core.attachFrontEnd', frontEnd, awaitRestoreOf: frontEnds };
      // The port is never closed here: a worker slower to start than the timeout still takes it
      // (the worker attaches a port whatever its request's deadline), and one that dies holding it
      // is replaced by a worker that gets a fresh port for every front end.
      this.run(shard, attach, this.timeoutMs, port1).catch((err: unknown) => {
        log.warn('front end port not attached to the new shard worker yet', { shard, frontEnd, error: String(err) });
      });
      for (const listener of this.frontEndPortListeners) {
        try {
          listener(frontEnd, shard, port2);
        } catch (err) {
          log.error('front end port listener failed', { shard, frontEnd, error: describeError(err) });
        }
      }
    }
  }
}
