/**
 * `herald push-to-postgres`: moves a stopped single node's push devices (records, interests,
 * user associations: every instance in every shard of its data dir) into the PostgreSQL store
 * of a cluster, the way from one node onto a cluster.
 *
 * - The data dir is locked as a server locks it: the command refuses to run beside Herald.
 * - The node's installation secret goes to PostgreSQL first (device ids are derived from it,
 *   so a device re-registering through the cluster keeps its id); a database that already has
 *   another secret is refused before anything is written.
 * - Devices are copied in batches, one transaction each; a device arrives with its record, its
 *   interests and its user at once. Every batch makes PostgreSQL's copy of its devices exactly
 *   the data dir's (upsert, interests replaced), so a run interrupted at any point (SIGINT,
 *   SIGKILL, a lost connection) loses nothing and duplicates nothing when run again: the
 *   batches it committed are simply written again. SIGINT stops after the batch under way.
 * - The data dir is only read; it stays usable by a single node until the operator retires it.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { lockDataDir, DataDirError, RESHARD_PLAN_FILE, type DataDirIdentity } from '../../../shards/data-dir.js';
import { fnv1a32 } from '../../../shards/hash.js';
import { openShardDatabase } from '../../../shards/storage.js';
import { decodeKey, keyAfter } from '../../keys.js';
import { decodeDeviceRecord, type DeviceRecord } from '../../shard/devices/device-record.js';
import { interestsOf, openDeviceDatabases } from '../../shard/devices/device-databases.js';
import { migrate } from './migrations.js';
import { testHookNumber } from '../../../test-hooks.js';

/** Devices per transaction. */
const BATCH = 500;

/** A positive integer test hook (HERALD_TEST_HOOKS=1), else undefined. */
function testHook(name: 'HERALD_PUSH_TO_POSTGRES_BATCH' | 'HERALD_PUSH_TO_POSTGRES_PAUSE_AFTER_BATCHES'): number | undefined {
  return testHookNumber(name);
}

/**
 * Test hook: after HERALD_PUSH_TO_POSTGRES_PAUSE_AFTER_BATCHES committed batches, prints
 * `paused` and waits (up to a minute) for a stop request or a kill.
 */
async function pauseForTest(batches: number, log: (line: string) => void, stopRequested: () => boolean): Promise<void> {
  if (batches !== testHook('HERALD_PUSH_TO_POSTGRES_PAUSE_AFTER_BATCHES')) return;
  log('paused');
  const until = Date.now() + 60_000;
  while (!stopRequested() && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
}

export class PushToPostgresError extends Error {
  override readonly name = 'PushToPostgresError';
}

export interface PushToPostgresOptions {
  dataDir: string;
  url: string;
  log: (line: string) => void;
  /** Polled between batches: true stops the copy there (what was committed stays). */
  stopRequested?: () => boolean;
}

export interface PushToPostgresResult {
  devices: number;
  subscriptions: number;
  usersAssociated: number;
  /** False when stopRequested ended the copy early. */
  complete: boolean;
  /** Transactions committed. */
  batches: number;
}

interface DeviceRow {
  instanceId: string;
  deviceId: string;
  record: DeviceRecord;
  interests: string[];
}

function readIdentity(dataDir: string): DataDirIdentity {
  const file = join(dataDir, 'herald.json');
  if (!existsSync(file)) throw new PushToPostgresError(`${dataDir} is not a Herald data dir (no herald.json)`);
  if (existsSync(join(dataDir, RESHARD_PLAN_FILE))) {
    throw new PushToPostgresError(`data dir ${dataDir} has an unfinished reshard: run \`herald reshard\` again to finish it first`);
  }
  return JSON.parse(readFileSync(file, 'utf8')) as DataDirIdentity;
}

export async function pushToPostgres(options: PushToPostgresOptions): Promise<PushToPostgresResult> {
  const { dataDir, log } = options;
  const identity = readIdentity(dataDir);
  let lock;
  try {
    lock = lockDataDir(dataDir, 'stop Herald before moving its push data');
  } catch (err) {
    if (err instanceof DataDirError) throw new PushToPostgresError(err.message);
    throw err;
  }
  const pool = new pg.Pool({ connectionString: options.url, max: 2, application_name: 'herald-push-to-postgres' });
  const result: PushToPostgresResult = { devices: 0, subscriptions: 0, usersAssociated: 0, complete: false, batches: 0 };
  try {
    const applied = await migrate(pool);
    if (applied.length > 0) log(`schema migrated (versions ${applied.join(', ')})`);
    await shareInstallSecret(pool, identity.installSecret);
    for (let shard = 0; shard < identity.shards; shard++) {
      const path = join(dataDir, `shard-${shard}`);
      if (!existsSync(path)) continue;
      const root = openShardDatabase(path);
      try {
        const copied = await copyShard(pool, openDeviceDatabases(root), options.stopRequested ?? (() => false), result, log);
        log(`shard ${shard}: ${copied} device(s) copied`);
      } finally {
        await root.close();
      }
      if (options.stopRequested?.()) break;
    }
    result.complete = !options.stopRequested?.();
    return result;
  } finally {
    await pool.end();
    lock.release();
  }
}

/** Gives the node's installation secret to the cluster, or refuses when the cluster has another. */
async function shareInstallSecret(pool: pg.Pool, secret: string): Promise<void> {
  await pool.query("INSERT INTO herald_cluster_settings (name, value) VALUES ('install_secret', $1) ON CONFLICT (name) DO NOTHING", [secret]);
  const { rows } = await pool.query<{ value: string }>("SELECT value FROM herald_cluster_settings WHERE name = 'install_secret'");
  if (rows[0]!.value !== secret) {
    throw new PushToPostgresError(
      'the PostgreSQL database already holds another installation secret (a cluster started there before, or another node was moved in): ' +
        'device ids would not match. Move the data into an empty database, before any cluster node starts on it.',
    );
  }
}

/** Copies every device of one shard, BATCH per transaction; resolves to how many. */
async function copyShard(
  pool: pg.Pool,
  db: ReturnType<typeof openDeviceDatabases>,
  stopRequested: () => boolean,
  result: PushToPostgresResult,
  log: (line: string) => void,
): Promise<number> {
  const size = testHook('HERALD_PUSH_TO_POSTGRES_BATCH') ?? BATCH;
  let copied = 0;
  let start: Uint8Array | undefined;
  for (;;) {
    // BATCH records from where the last batch ended, read before anything is written (no read transaction is held across a write).
    const batch: DeviceRow[] = [];
    let read = 0;
    let lastKey: string[] = [];
    for (const { key, value } of db.devices.getRange({ ...(start && { start }), limit: size })) {
      read++;
      lastKey = decodeKey(key as Uint8Array);
      const [instanceId, deviceId] = lastKey;
      if (instanceId === undefined || deviceId === undefined) continue;
      // Decoded at once: the value's bytes are not ours to keep.
      batch.push({ instanceId, deviceId, record: decodeDeviceRecord(value), interests: [] });
    }
    for (const device of batch) device.interests = interestsOf(db, device.instanceId, device.deviceId);
    if (batch.length > 0) {
      await writeBatch(pool, batch, result);
      result.batches++;
      await pauseForTest(result.batches, log, stopRequested);
    }
    copied += batch.length;
    if (read < size || stopRequested()) return copied;
    start = keyAfter(lastKey);
  }
}

/** One transaction: the batch's devices made exactly as in the data dir. */
async function writeBatch(pool: pg.Pool, batch: DeviceRow[], result: PushToPostgresResult): Promise<void> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO herald_push_devices AS d
         (instance_id, device_id, shard_hash, platform, token, bundle_identifier, user_id, metadata, created_at, interest_count)
       SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::json[], $9::float8[], $10::int[])
       ON CONFLICT (instance_id, device_id) DO UPDATE SET
         platform = EXCLUDED.platform, token = EXCLUDED.token, bundle_identifier = EXCLUDED.bundle_identifier,
         user_id = EXCLUDED.user_id, metadata = EXCLUDED.metadata, created_at = EXCLUDED.created_at,
         interest_count = EXCLUDED.interest_count`,
      [
        batch.map((d) => d.instanceId),
        batch.map((d) => d.deviceId),
        batch.map((d) => fnv1a32(d.deviceId)),
        batch.map((d) => d.record.platform),
        batch.map((d) => d.record.token),
        batch.map((d) => d.record.bundleIdentifier ?? null),
        batch.map((d) => d.record.userId ?? null),
        batch.map((d) => (d.record.metadata === undefined ? null : JSON.stringify(d.record.metadata))),
        batch.map((d) => d.record.createdAt),
        batch.map((d) => d.interests.length),
      ],
    );
    const subscribed = batch.flatMap((d) => d.interests.map((interest) => [d.instanceId, d.deviceId, interest] as const));
    await client.query(
      `DELETE FROM herald_push_device_interests i USING unnest($1::text[], $2::text[]) AS t(instance_id, device_id)
        WHERE i.instance_id = t.instance_id AND i.device_id = t.device_id`,
      [batch.map((d) => d.instanceId), batch.map((d) => d.deviceId)],
    );
    await client.query(
      `INSERT INTO herald_push_device_interests (instance_id, device_id, interest, shard_hash, platform, token, bundle_identifier, user_id)
       SELECT t.instance_id, t.device_id, t.interest, t.shard_hash, d.platform, d.token, d.bundle_identifier, d.user_id
         FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[]) AS t(instance_id, device_id, interest, shard_hash)
         JOIN herald_push_devices d ON d.instance_id = t.instance_id AND d.device_id = t.device_id`,
      [subscribed.map((s) => s[0]), subscribed.map((s) => s[1]), subscribed.map((s) => s[2]), subscribed.map((s) => fnv1a32(s[1]))],
    );
    await client.query('COMMIT');
    result.devices += batch.length;
    result.subscriptions += subscribed.length;
    result.usersAssociated += batch.filter((d) => d.record.userId !== undefined).length;
  } catch (err) {
    await client.query('ROLLBACK').catch((rollback: Error) => (broken = rollback));
    throw err;
  } finally {
    client.release(broken);
  }
}
