/**
 * Main-thread side of the shards: one single-thread Piscina pool per shard, so a key always
 * reaches the same worker (and its LMDB environment). Every request is msgpackr-encoded,
 * carries an id (for logs) and a timeout; a timeout or a crashed worker answers a clean
 * SHARD_UNAVAILABLE (500) instead of hanging. Piscina replaces a worker that died.
 */
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { Packr } from 'msgpackr';
import { HeraldError, ERROR_CATALOGUE, type ErrorCode } from '../errors.js';
import { log } from '../log.js';
import type { ShardReply, ShardRequestOf, ShardRequestType, ShardResponseOf, ShardWorkerData } from './messages.js';

const packr = new Packr({ useRecords: false, moreTypes: false });

export interface ShardPoolOptions {
  shardCount: number;
  dataDir: string;
  config: unknown;
  installSecret: string;
  requestTimeoutMs: number;
}

export class ShardPool {
  readonly shardCount: number;
  private readonly pools: Piscina[];
  private readonly timeoutMs: number;
  private nextId = 1;
  private closed = false;

  constructor(opts: ShardPoolOptions) {
    this.shardCount = opts.shardCount;
    this.timeoutMs = opts.requestTimeoutMs;
    const filename = fileURLToPath(new URL('./worker.js', import.meta.url));
    this.pools = [];
    for (let shardIndex = 0; shardIndex < opts.shardCount; shardIndex++) {
      const workerData: ShardWorkerData = {
        shardIndex,
        shardCount: opts.shardCount,
        dataDir: opts.dataDir,
        config: opts.config,
        installSecret: opts.installSecret,
      };
      const pool = new Piscina({
        filename,
        minThreads: 1,
        maxThreads: 1,
        idleTimeout: Number.POSITIVE_INFINITY,
        // Shards run background work (webhook sends, push fan-out) between tasks:
        // the worker's event loop must never block on Atomics.wait.
        atomics: 'disabled',
        concurrentTasksPerWorker: 1024,
        workerData,
      });
      pool.on('error', (err: unknown) => log.error('shard worker error', { shard: shardIndex, error: String(err) }));
      this.pools.push(pool);
    }
  }

  /** Sends one request to a shard and resolves with its answer. Throws HeraldError. */
  async request<K extends ShardRequestType>(shard: number, message: ShardRequestOf<K>, timeoutMs = this.timeoutMs): Promise<ShardResponseOf<K>> {
    if (this.closed) throw new HeraldError('SHARD_UNAVAILABLE', 'Server is shutting down');
    const pool = this.pools[shard];
    if (!pool) throw new Error(`no shard ${shard}`);
    const id = this.nextId++;
    const encoded = packr.pack({ id, ...message });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      const raw = (await Promise.race([pool.run(encoded), timeout])) as Uint8Array;
      const reply = packr.unpack(raw) as ShardReply;
      if (reply.ok) return reply.value as ShardResponseOf<K>;
      if (reply.code in ERROR_CATALOGUE) throw new HeraldError(reply.code as ErrorCode, reply.message);
      throw new HeraldError('INTERNAL', reply.message);
    } catch (err) {
      if (err instanceof HeraldError) {
        if (err.code === 'SHARD_UNAVAILABLE') log.warn('shard request failed', { shard, id, type: message.type, error: err.message });
        throw err;
      }
      log.error('shard request failed', { shard, id, type: message.type, error: String(err) });
      throw new HeraldError('SHARD_UNAVAILABLE');
    } finally {
      clearTimeout(timer);
    }
  }

  /** Fire-and-forget: failures are logged, never thrown. */
  send<K extends ShardRequestType>(shard: number, message: ShardRequestOf<K>): void {
    this.request(shard, message).catch(() => undefined);
  }

  /** The same request to every shard, in parallel. */
  broadcast<K extends ShardRequestType>(message: ShardRequestOf<K>, timeoutMs?: number): Promise<ShardResponseOf<K>[]> {
    return Promise.all(this.pools.map((_, i) => this.request(i, message, timeoutMs)));
  }

  /** Asks every shard to flush and close its storage, then stops the workers. */
  async close(): Promise<void> {
    if (this.closed) return;
    try {
      await this.broadcast({ type: 'core.close' }, 10_000);
    } catch (err) {
      log.warn('shard close failed', { error: String(err) });
    }
    this.closed = true;
    await Promise.all(this.pools.map((p) => p.destroy()));
  }
}
