/**
 * `npm run bench:push-store [-- --sets 100000,1000000] [--registrations N] [--shards N]`
 *
 * The push device store, LMDB beside PostgreSQL in the same run (a private PostgreSQL started
 * for it: Debian's initdb/pg_ctl as the `postgres` user, a temp dir, a free port; fsync on):
 * 1. registrations per second: `--registrations` (default 5,000) new devices registered with
 *    64 in flight, as concurrent device-API requests reach one shard;
 * 2. for each size of `--sets` (default 100,000 and 1,000,000; `--devices N` is `--sets N`),
 *    the recipient set of an interest held by that many devices, walked as a publish's
 *    fan-out does (scanInterestSteps), `--shards` shards in parallel (default 2), each over its
 *    own slice. Seeding is not timed; each size is seeded on top of the one before.
 * Prints a table with the PostgreSQL/LMDB ratio. Figures, never pass/fail. BENCH_PG_POOL sets the
 * connections of each PostgreSQL store (default 4, as Herald's shards).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { PushDeviceStore, ScanSteps } from '../src/push/store/device-store.js';
import { LmdbDeviceStore } from '../src/push/store/lmdb-device-store.js';
import { PostgresDeviceStore } from '../src/push/store/postgres/postgres-device-store.js';
import { deviceShardFor, fnv1a32 } from '../src/shards/hash.js';
import { openShardDatabase } from '../src/shards/storage.js';
import { PostgresServer } from '../test/helpers/postgres-server.js';
import pg from 'pg';

const { values } = parseArgs({
  options: {
    devices: { type: 'string' },
    sets: { type: 'string', default: '100000,1000000' },
    registrations: { type: 'string', default: '5000' },
    shards: { type: 'string', default: '2' },
  },
});
const SETS = (values.devices ?? values.sets)
  .split(',')
  .map(Number)
  .sort((a, b) => a - b);
const REGISTRATIONS = Number(values.registrations);
const SHARDS = Number(values.shards);
const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const IN_FLIGHT = 64;
/** Connections per PostgreSQL store (Herald's shards use 4). */
const POOL = Number(process.env.BENCH_PG_POOL ?? 4);

const id = (prefix: string, k: number) => `fcm-${prefix}${k.toString(16).padStart(28, '0')}`;

/** Registrations per second with IN_FLIGHT in flight, on one store. */
async function registrationsPerSecond(store: PushDeviceStore): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < REGISTRATIONS) {
        const k = next++;
        await store.register({ instanceId: INSTANCE, deviceId: id('reg', k), platform: 'fcm', token: `token-${k}`, metadata: { sdk: '1.0.0' } });
      }
    }),
  );
  return REGISTRATIONS / ((performance.now() - started) / 1000);
}

async function drain(scan: ScanSteps): Promise<number> {
  let devices = 0;
  for (;;) {
    const step = scan.next();
    const next = step instanceof Promise ? await step : step;
    if (next.done) return devices;
    if (next.value.device !== null) devices++;
  }
}

/** Seconds for every shard to walk its part of the `all` interest, in parallel; checks the total. */
async function recipientSetSeconds(stores: PushDeviceStore[], devices: number): Promise<number> {
  const started = performance.now();
  const counts = await Promise.all(stores.map((s) => drain(s.scanInterestSteps(INSTANCE, ['all']))));
  const seconds = (performance.now() - started) / 1000;
  const total = counts.reduce((a, b) => a + b, 0);
  if (total !== devices) throw new Error(`recipient set has ${total} devices, expected ${devices}`);
  return seconds;
}

/** Subscribes devices `from`..`to` - 1 to `all`. */
async function seedLmdb(stores: LmdbDeviceStore[], from: number, to: number): Promise<void> {
  // Issued without waiting: lmdb-js commits them in large batches.
  const pending: Promise<unknown>[] = [];
  for (let k = from; k < to; k++) {
    const deviceId = id('set', k);
    const store = stores[deviceShardFor(deviceId, stores.length)]!;
    pending.push(store.register({ instanceId: INSTANCE, deviceId, platform: 'fcm', token: `token-${k}` }).then(() => store.replaceInterests(INSTANCE, deviceId, ['all'])));
    if (pending.length >= 10_000) await Promise.all(pending.splice(0));
  }
  await Promise.all(pending);
}

async function seedPostgres(url: string, from: number, to: number): Promise<void> {
  const client = new pg.Client(url);
  await client.connect();
  try {
    for (let start = from; start < to; start += 20_000) {
      const ids = Array.from({ length: Math.min(20_000, to - start) }, (_, k) => id('set', start + k));
      await client.query(
        `INSERT INTO herald_push_devices (instance_id, device_id, shard_hash, platform, token, created_at, interest_count)
         SELECT $1, d, h, 'fcm', 'token-' || d, 0, 1 FROM unnest($2::text[], $3::bigint[]) AS t(d, h)`,
        [INSTANCE, ids, ids.map(fnv1a32)],
      );
      await client.query(
        `INSERT INTO herald_push_device_interests (instance_id, device_id, interest, shard_hash, platform, token)
         SELECT $1, d, 'all', h, 'fcm', 'token-' || d FROM unnest($2::text[], $3::bigint[]) AS t(d, h)`,
        [INSTANCE, ids, ids.map(fnv1a32)],
      );
    }
    // What autovacuum does to a table that has settled: statistics and the visibility map.
    await client.query('VACUUM ANALYZE');
  } finally {
    await client.end();
  }
}

const postgres = await new PostgresServer({ fsync: true }).start();
const dir = mkdtempSync(join(tmpdir(), 'herald-bench-push-store-'));
try {
  const roots = Array.from({ length: SHARDS }, (_, i) => openShardDatabase(join(dir, `shard-${i}`)));
  const lmdb = roots.map((root) => new LmdbDeviceStore(root));
  const url = await postgres.createDatabase('bench');
  const pgStores = Array.from({ length: SHARDS }, (_, shardIndex) => new PostgresDeviceStore({ url, shardIndex, shardCount: SHARDS, poolSize: POOL }));
  for (const store of pgStores) await store.ready();

  const rows: [string, number, number][] = [];
  rows.push(['registrations/s (one shard, 64 in flight)', await registrationsPerSecond(lmdb[0]!), await registrationsPerSecond(pgStores[0]!)]);
  let seeded = 0;
  for (const size of SETS) {
    process.stdout.write(`seeding ${size} devices...\n`);
    await seedLmdb(lmdb, seeded, size);
    await seedPostgres(url, seeded, size);
    seeded = size;
    const lmdbScan = Math.min(await recipientSetSeconds(lmdb, size), await recipientSetSeconds(lmdb, size));
    const pgScan = Math.min(await recipientSetSeconds(pgStores, size), await recipientSetSeconds(pgStores, size));
    rows.push([`recipient set of ${size} devices, ${SHARDS} shards (s, best of 2)`, lmdbScan, pgScan]);
    process.stdout.write(`  ${size}: LMDB ${lmdbScan.toFixed(3)} s, PostgreSQL ${pgScan.toFixed(3)} s\n`);
  }

  process.stdout.write(`\n| measure | LMDB | PostgreSQL | PostgreSQL/LMDB |\n|---|---|---|---|\n`);
  for (const [name, a, b] of rows) process.stdout.write(`| ${name} | ${a.toFixed(a < 10 ? 3 : 0)} | ${b.toFixed(b < 10 ? 3 : 0)} | ${(b / a).toFixed(2)} |\n`);
  for (const store of pgStores) await store.close();
  for (const root of roots) await root.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
  await postgres.dispose();
}
