/**
 * Time to compute a publish's recipient set: one worker thread per shard, each over its own
 * shard's LMDB environment (as Herald's shards are), all started together; the figure is the
 * wall time until the last shard has walked its part of the audience with
 * LmdbDevices.scanInterestSteps (what the fan-out pulls). No gateway, no bookkeeping: the
 * lower bound of a publish's duration, and what the "≤ 1 s for 1,000,000 devices" target is
 * about.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { ScanMode, ScanRequest, ScanWorkerData, ScanWorkerMessage } from './scan-worker.js';

/** One timed walk over every shard. */
export interface ScanRun {
  /** From posting the request to every shard until the last answered, ms. */
  wallMs: number;
  /** Each shard's own walk time, ms. */
  shardMs: number[];
  /** CPU time of this process (the shard threads; the main thread only waits) during the run, ms. */
  cpuMs: number;
  devices: number;
}

/** Repeated timings of one audience. */
export interface ScanResult {
  interests: string[];
  mode: ScanMode;
  devices: number;
  runs: ScanRun[];
  /** The first run (least cache help) and the best and median runs, wall ms. */
  firstMs: number;
  bestMs: number;
  medianMs: number;
}

export interface ScanOptions {
  dataDir: string;
  shards: number;
  /** Audiences to time, each a list of interests and how to walk it. */
  audiences: { interests: string[]; mode: ScanMode }[];
  repeats: number;
  /** The whole phase is abandoned after this long, ms. */
  timeoutMs: number;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

/** Times each audience `repeats` times over all shards in parallel. */
export async function timeRecipientSets(options: ScanOptions): Promise<ScanResult[]> {
  const workers: Worker[] = [];
  const pending = new Map<Worker, (message: ScanWorkerMessage) => void>();
  let timer: NodeJS.Timeout | undefined;
  const failure = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`recipient-set timing took longer than ${options.timeoutMs / 1000} s`)), options.timeoutMs);
  });
  failure.catch(() => undefined); // awaited through guarded(); this only keeps a late timeout quiet
  const next = (worker: Worker): Promise<ScanWorkerMessage> => new Promise((resolve) => pending.set(worker, resolve));
  try {
    const ready: Promise<ScanWorkerMessage>[] = [];
    for (let shardIndex = 0; shardIndex < options.shards; shardIndex++) {
      const workerData: ScanWorkerData = { shardPath: join(options.dataDir, `shard-${shardIndex}`), shardIndex };
      const worker = new Worker(new URL('./scan-worker.js', import.meta.url), { workerData });
      workers.push(worker);
      ready.push(next(worker));
      worker.on('message', (message: ScanWorkerMessage) => {
        const resolve = pending.get(worker);
        pending.delete(worker);
        resolve?.(message);
      });
    }
    const errors = workers.map((worker) => new Promise<never>((_, reject) => worker.once('error', reject)));
    for (const error of errors) error.catch(() => undefined);
    const guarded = <T>(promise: Promise<T>): Promise<T> => Promise.race([promise, failure, ...errors]);
    await guarded(Promise.all(ready));

    const results: ScanResult[] = [];
    for (const { interests, mode } of options.audiences) {
      const runs: ScanRun[] = [];
      for (let repeat = 0; repeat < options.repeats; repeat++) {
        const answers = workers.map((worker) => next(worker));
        const cpuBefore = process.cpuUsage();
        const started = performance.now();
        for (const worker of workers) worker.postMessage({ interests, mode } satisfies ScanRequest);
        const replies = await guarded(Promise.all(answers));
        const wallMs = performance.now() - started;
        const cpu = process.cpuUsage(cpuBefore);
        let devices = 0;
        const shardMs: number[] = [];
        for (const reply of replies) {
          if (reply.type !== 'scanned') throw new Error(`unexpected scan worker message ${reply.type}`);
          devices += reply.devices;
          shardMs[reply.shardIndex] = reply.ms;
        }
        runs.push({ wallMs, shardMs, cpuMs: (cpu.user + cpu.system) / 1000, devices });
      }
      const walls = runs.map((run) => run.wallMs);
      results.push({
        interests,
        mode,
        devices: runs[0]!.devices,
        runs,
        firstMs: walls[0]!,
        bestMs: Math.min(...walls),
        medianMs: median(walls),
      });
    }
    return results;
  } finally {
    clearTimeout(timer);
    for (const worker of workers) worker.postMessage('close');
    await Promise.all(workers.map((worker) => Promise.race([
      new Promise<void>((resolve) => worker.once('exit', () => resolve())),
      new Promise<void>((resolve) => setTimeout(() => void worker.terminate().then(() => resolve()), 5_000)),
    ])));
  }
}
