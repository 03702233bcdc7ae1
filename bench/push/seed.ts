/**
 * The push benchmark's data dir: Herald's layout (`herald.json` + `shard-<i>/` LMDB
 * environments) holding the dataset of bench/push/dataset.ts, seeded directly into the shards
 * before Herald starts (one worker thread per shard, see seed-worker.ts and seed-bulk.ts) and
 * cached under bench/.cache between runs.
 *
 * The cache is trusted only when its manifest matches the device count, shard count and a hash
 * of the code that decides what is stored (store, keys, device ids, dataset), and when no
 * Herald run was interrupted on it (an `in-use` marker is left while Herald runs on the dir;
 * an interrupted publish would resume on the next start and pollute its counts). Otherwise
 * the dir is deleted and seeded again.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { openDataDir } from '../../src/shards/data-dir.js';
import { BENCH_INTERESTS } from './dataset.js';
import type { SeedWorkerData, SeedWorkerMessage } from './seed-worker.js';

/** Bump when the seeding changes in a way the source hash cannot see. */
const SEED_FORMAT = 1;
const MANIFEST = 'bench-seed.json';
const IN_USE = 'bench-in-use';
/** Devices per synced commit in a seed worker. */
const SEED_BATCH = 10_000;

/** Files whose content decides the seeded bytes; a change reseeds. */
const SOURCES = [
  'src/push/shard/devices/lmdb-devices.ts',
  'src/push/shard/devices/device-record.ts',
  'src/push/shard/devices/device-databases.ts',
  'src/push/interest-name.ts',
  'src/push/shard/devices/cursor.ts',
  'src/push/keys.ts',
  'src/push/http/devices/device-id.ts',
  'src/push/http/devices/gateway-token.ts',
  'src/shards/hash.ts',
  'src/shards/storage.ts',
  'bench/push/dataset.ts',
  'bench/push/seed-worker.ts',
  'bench/push/seed-bulk.ts',
];

/** What a seeded data dir holds, as written beside it. */
export interface SeedManifest {
  format: number;
  devices: number;
  shards: number;
  interests: typeof BENCH_INTERESTS;
  sourceHash: string;
  /** Per shard: device records and (device, interest) pairs stored. */
  perShard: { devices: number; subscriptions: number }[];
  seededAt: string;
  seedSeconds: number;
}

export interface SeededDataDir {
  dataDir: string;
  manifest: SeedManifest;
  /** False when the cache was used as it was. */
  seededNow: boolean;
  /** Marks the dir as in use by a Herald run; call the returned function once Herald stopped cleanly with every publish finished. */
  markInUse(): () => void;
}

export interface SeedOptions {
  repoRoot: string;
  devices: number;
  shards: number;
  /** Seeding is abandoned (workers terminated, dir deleted) after this long, ms. */
  timeoutMs: number;
  log: (line: string) => void;
}

function sourceHash(repoRoot: string): string {
  const hash = createHash('sha256');
  hash.update(`format ${SEED_FORMAT}\n`);
  for (const file of SOURCES) hash.update(`${file}\n`).update(readFileSync(join(repoRoot, file)));
  return hash.digest('hex');
}

function readManifest(dataDir: string): SeedManifest | undefined {
  try {
    return JSON.parse(readFileSync(join(dataDir, MANIFEST), 'utf8')) as SeedManifest;
  } catch {
    return undefined;
  }
}

/** The cached data dir for `devices` × `shards`, seeding it first when the cache cannot be used. */
export async function seededDataDir(options: SeedOptions): Promise<SeededDataDir> {
  const { repoRoot, devices, shards, log } = options;
  const dataDir = join(repoRoot, 'bench/.cache', `push-${devices}-devices-${shards}-shards`);
  const hash = sourceHash(repoRoot);
  const existing = readManifest(dataDir);
  const markInUse = (): (() => void) => {
    writeFileSync(join(dataDir, IN_USE), `${process.pid}\n`);
    return () => rmSync(join(dataDir, IN_USE), { force: true });
  };

  let why: string | undefined;
  if (!existing) why = 'no cached data dir';
  else if (existsSync(join(dataDir, IN_USE))) why = 'the last Herald run on the cached dir was interrupted';
  else if (existing.sourceHash !== hash || existing.format !== SEED_FORMAT) why = 'the store or dataset code changed';
  else if (existing.devices !== devices || existing.shards !== shards) why = 'the cached dir holds another dataset';
  if (!why) return { dataDir, manifest: existing!, seededNow: false, markInUse };

  log(`seeding ${devices.toLocaleString('en')} devices into ${shards} shard(s) (${why}) ...`);
  rmSync(dataDir, { recursive: true, force: true });
  const identity = openDataDir(dataDir, shards, { releaseLock: true });
  const started = performance.now();
  const workers: Worker[] = [];
  const perShard: SeedManifest['perShard'] = [];
  let timer: NodeJS.Timeout | undefined;
  try {
    const done = Array.from({ length: shards }, (_, shardIndex) => new Promise<void>((resolve, reject) => {
      const workerData: SeedWorkerData = {
        shardPath: join(dataDir, `shard-${shardIndex}`),
        shardIndex,
        shardCount: shards,
        devices,
        installSecret: identity.installSecret,
        batchSize: SEED_BATCH,
      };
      const worker = new Worker(new URL('./seed-worker.js', import.meta.url), { workerData });
      workers.push(worker);
      let lastLog = 0;
      worker.on('message', (message: SeedWorkerMessage) => {
        if (message.type === 'progress') {
          const now = performance.now();
          if (shardIndex === 0 && now - lastLog > 5_000) {
            lastLog = now;
            log(`  shard 0: ${message.written.toLocaleString('en')} of ${message.of.toLocaleString('en')} devices written`);
          }
        } else {
          perShard[shardIndex] = { devices: message.devices, subscriptions: message.subscriptions };
          if (message.devices !== message.written) {
            reject(new Error(`shard ${shardIndex} holds ${message.devices} devices after writing ${message.written}`));
          }
        }
      });
      worker.on('error', reject);
      worker.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`seed worker ${shardIndex} exited with ${code}`))));
    }));
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`seeding took longer than ${options.timeoutMs / 1000} s`)), options.timeoutMs);
    });
    await Promise.race([Promise.all(done), timeout]);
  } catch (err) {
    await Promise.all(workers.map((worker) => worker.terminate()));
    rmSync(dataDir, { recursive: true, force: true });
    throw err;
  } finally {
    clearTimeout(timer);
  }

  const stored = perShard.reduce((sum, shard) => sum + shard.devices, 0);
  if (stored !== devices) throw new Error(`seeded ${stored} devices, expected ${devices}`);
  const manifest: SeedManifest = {
    format: SEED_FORMAT,
    devices,
    shards,
    interests: BENCH_INTERESTS,
    sourceHash: hash,
    perShard,
    seededAt: new Date().toISOString(),
    seedSeconds: (performance.now() - started) / 1000,
  };
  writeFileSync(join(dataDir, MANIFEST), JSON.stringify(manifest, null, 2) + '\n');
  log(`  seeded in ${manifest.seedSeconds.toFixed(1)} s: ${perShard.map((s, i) => `shard ${i} ${s.devices.toLocaleString('en')}`).join(', ')}`);
  return { dataDir, manifest, seededNow: true, markInUse };
}
