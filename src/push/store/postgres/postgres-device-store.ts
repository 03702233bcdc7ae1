/**
 * The push device store in PostgreSQL (cluster mode with `cluster.postgresUrl`): one database
 * shared by every shard of every node, so any node serves any device. Each shard has its own
 * small pool (worker threads share nothing); the main thread never connects.
 *
 * Tables (migrations.ts): `herald_push_devices` (one row per device, with its user and
 * interest count) and `herald_push_device_interests` (one row per subscription, deleted with
 * its device, carrying a copy of the device's platform, token, bundle identifier and user so
 * that a fan-out reads only the interest index). Every write is one transaction, committed
 * (synchronous_commit) before it resolves. Read-modify-writes lock the device row (`FOR
 * UPDATE`), so two nodes changing one device serialise; a write that changes a copied value
 * copies it into the subscriptions in the same transaction, after taking that lock.
 *
 * Shard scope: scans, counts and a user's devices answer for the devices whose shard_hash
 * (fnv1a32 of the device id) falls in this shard's range, the shardIndex-th of shardCount
 * equal ranges of the hash (postgresShardOf; not the LMDB stores' `hash % shardCount`), so
 * a node's shards together cover each device once, and a shard's devices are one range of the
 * interest index, which is ordered by (hash, device id). Scans walk devices in that order
 * within each list entry; positions name the device id (its hash is computed again). A scan
 * given a `partition` answers for that partition's range instead, whichever shard asks.
 */
import pg from 'pg';
import { HeraldError } from '../../../errors.js';
import { fnv1a32 } from '../../../shards/hash.js';
import { MAX_INTERESTS_PER_DEVICE } from '../../interest-name.js';
import type { Platform } from '../../platform.js';
import type { SetUserOutcome } from '../../messages/devices.js';
import { decodeInterestCursor, encodeInterestCursor } from '../../shard/devices/cursor.js';
import {
  normaliseScanList,
  partitionBounds,
  type ScanDevice,
  type AddInterestResult,
  type Device,
  type DeviceRegistration,
  type InterestPage,
  type PushDeviceStore,
  type RegisterResult,
  type RemoveInterestResult,
  type ReplaceInterestsResult,
  type ScanPartition,
  type ScanPosition,
  type ScanStep,
  type ScanSteps,
  type SetUserResult,
  type StoreCounts,
} from '../device-store.js';
import { BatchedScanSteps, type ScanBatch } from './batched-scan-steps.js';
import { inTransaction, storeCall, storeConnections, type PostgresStoreOptions, type SchemaReady } from './connection.js';
import { RegistrationBatches, registrationParameters, type Registration, type RegistrationOutcome } from './registration-batches.js';

/** Registration batches committed at once (of POOL_SIZE connections: the rest serve the other requests). */
const REGISTRATION_WRITERS = 3;
/** Index entries read per query of a fan-out scan (this shard's and partition's only). */
const PG_SCAN_BATCH = 5000;

/**
 * What a fan-out sends to: columns of herald_push_devices, and (migration 4) copies of them in
 * each of the device's rows of herald_push_device_interests (SUBSCRIPTION_COPY).
 */
const DEVICE_COLUMNS = 'device_id, platform, token, bundle_identifier, user_id';

/** The device columns every subscription row carries, kept equal to its device's by every write. */
const SUBSCRIPTION_COPY = 'platform, token, bundle_identifier, user_id';

interface ScanRow {
  device_id: string;
  platform: Platform;
  token: string;
  bundle_identifier: string | null;
  user_id: string | null;
}

/** The device's SUBSCRIPTION_COPY values, as its new subscriptions take them. */
interface SubscriptionCopy {
  platform: Platform;
  token: string;
  bundle_identifier: string | null;
  user_id: string | null;
}

/**
 * A row of a scan batch, as an array: a device (DEVICE_COLUMNS, then null), or the batch's
 * BATCH_END_ROW (the last index entry walked, nulls, how many entries were walked).
 */
type CandidateRow =
  | [deviceId: string, platform: Platform, token: string, bundleIdentifier: string | null, userId: string | null, walked: null]
  | [lastWalked: string | null, platform: null, token: null, bundleIdentifier: null, userId: null, walked: number];

/**
 * The last row of every scan batch (a UNION ALL branch over the batch's index entries `c`):
 * where the next batch starts, and how many entries this one walked (fewer than asked: the
 * end of the range). Devices yielded under an earlier name are among them, not among the
 * device rows.
 */
const BATCH_END_ROW = `SELECT (SELECT device_id FROM c ORDER BY shard_hash DESC, device_id DESC LIMIT 1), NULL, NULL, NULL, NULL, count(*)::int FROM c`;

interface DeviceRow extends Omit<ScanRow, 'device_id'> {
  metadata: Record<string, string> | null;
  created_at: number;
  interest_count: number;
}

function scanDeviceOf(row: CandidateRow, instanceId: string): ScanDevice {
  return {
    id: row[0]!,
    instanceId,
    platform: row[1]!,
    token: row[2]!,
    bundleIdentifier: row[3] ?? undefined,
    userId: row[4] ?? undefined,
  };
}

function scanDevice(row: ScanRow, instanceId: string): ScanDevice {
  return {
    id: row.device_id,
    instanceId,
    platform: row.platform,
    token: row.token,
    bundleIdentifier: row.bundle_identifier ?? undefined,
    userId: row.user_id ?? undefined,
  };
}

/**
 * Locks the device's row for an association with `userId` and says what it finds: `free` when
 * the device has no user yet (the caller may associate it), else the answer as it stands.
 */
async function lockForAssociation(client: pg.PoolClient, instanceId: string, deviceId: string, userId: string): Promise<SetUserResult | 'free'> {
  const { rows } = await client.query<{ user_id: string | null }>('SELECT user_id FROM herald_push_devices WHERE instance_id = $1 AND device_id = $2 FOR UPDATE', [
    instanceId,
    deviceId,
  ]);
  const row = rows[0];
  if (!row) return 'not-found';
  if (row.user_id === userId) return 'ok';
  return row.user_id === null ? 'free' : 'already-associated';
}

/** Associates a device locked by lockForAssociation with `userId`, its subscriptions too. */
async function associate(client: pg.PoolClient, instanceId: string, deviceId: string, userId: string): Promise<'ok'> {
  await client.query('UPDATE herald_push_devices SET user_id = $3 WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId, userId]);
  await copyToSubscriptions(client, [instanceId], [deviceId]);
  return 'ok';
}

/**
 * Makes the subscriptions of the devices `deviceIds` (of `instanceIds`, pairwise) carry their
 * devices' current values. Run after the write that changed the devices, in its transaction:
 * it holds the device rows' locks, which every subscription write takes first, and this
 * statement's snapshot (read committed) is newer than any subscription committed before.
 */
async function copyToSubscriptions(client: pg.PoolClient, instanceIds: readonly string[], deviceIds: readonly string[]): Promise<void> {
  await client.query(
    `UPDATE herald_push_device_interests i
        SET platform = d.platform, token = d.token, bundle_identifier = d.bundle_identifier, user_id = d.user_id
       FROM unnest($1::text[], $2::text[]) AS t(instance_id, device_id)
       JOIN herald_push_devices d ON d.instance_id = t.instance_id AND d.device_id = t.device_id
      WHERE i.instance_id = d.instance_id AND i.device_id = d.device_id
        AND (i.platform, i.token, i.bundle_identifier, i.user_id) IS DISTINCT FROM (d.platform, d.token, d.bundle_identifier, d.user_id)`,
    [instanceIds, deviceIds],
  );
}

/** Which shard of `shardCount` answers for a device in the per-shard questions of the PostgreSQL store. */
export function postgresShardOf(deviceId: string, shardCount: number): number {
  return Math.floor((fnv1a32(deviceId) * shardCount) / 2 ** 32);
}

export interface PostgresDeviceStoreOptions extends PostgresStoreOptions {
  shardCount: number;
}

export class PostgresDeviceStore implements PushDeviceStore {
  readonly kind = 'postgres';
  private readonly pool: pg.Pool;
  /** The device hashes this shard answers for in scans and counts. */
  private readonly scope: { low: number; high: number };
  private readonly schema: SchemaReady;
  private readonly registrations = new RegistrationBatches(
    (batch) => this.writeRegistrations(batch),
    (err) => err instanceof HeraldError && err.code === 'PUSH_STORE_UNAVAILABLE',
    REGISTRATION_WRITERS,
  );

  constructor(options: PostgresDeviceStoreOptions) {
    this.scope = partitionBounds({ index: options.shardIndex, count: options.shardCount });
    ({ pool: this.pool, schema: this.schema } = storeConnections(options, 'devices'));
  }

  /** Connects and applies the schema migrations once; after a failure, the next call tries again. */
  ready(): Promise<void> {
    return this.schema.ready();
  }

  async installSecret(candidate: string): Promise<string> {
    await this.query("INSERT INTO herald_cluster_settings (name, value) VALUES ('install_secret', $1) ON CONFLICT (name) DO NOTHING", [candidate]);
    const { rows } = await this.query<{ value: string }>("SELECT value FROM herald_cluster_settings WHERE name = 'install_secret'", []);
    return rows[0]!.value;
  }

  private async query<R extends pg.QueryResultRow>(text: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    await this.ready();
    return storeCall(() => this.pool.query<R>(text, values));
  }

  /** Runs `work` in one transaction on one connection; rolled back when it throws. */
  private async transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    await this.ready();
    return inTransaction(this.pool, work);
  }

  /** This shard's range of device hashes (postgresShardOf), as SQL with its two parameters at `$at`, `$at+1`. */
  private shardFilter(at: number): { sql: string; values: number[] } {
    return { sql: `shard_hash >= $${at} AND shard_hash < $${at + 1}`, values: [this.scope.low, this.scope.high] };
  }

  /**
   * The hashes a scan covers: `partition`'s range when given, whichever shard asks (a cluster
   * publish's partitions are claimed by any shard of any node), else this shard's range.
   */
  private bounds(partition: ScanPartition | undefined): { low: number; high: number } {
    return partition ? partitionBounds(partition) : this.scope;
  }

  register(registration: DeviceRegistration): Promise<RegisterResult> {
    const { instanceId, deviceId, platform, token, bundleIdentifier, metadata } = registration;
    return this.registrations.register({ instanceId, deviceId, platform, token, bundleIdentifier, metadata, createdAt: Date.now() });
  }

  /**
   * One batch of registrations (RegistrationBatches) in one transaction, so one commit: one
   * statement for the upserts in lock order and the interests each re-registered device keeps
   * (read in the statement's snapshot), then, when some device was re-registered, one that
   * copies their new values into their subscriptions.
   */
  private async writeRegistrations(batch: readonly Registration[]): Promise<RegistrationOutcome[]> {
    const { values, order } = registrationParameters(batch);
    return this.transaction(async (client) => {
      const { rows } = await client.query<{ row: number; created: boolean; interests: string[] }>(
      `WITH input AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[], $8::float8[])
           WITH ORDINALITY AS t(instance_id, device_id, shard_hash, platform, token, bundle_identifier, metadata, created_at, row)
       ), up AS (
         INSERT INTO herald_push_devices AS d
           (instance_id, device_id, shard_hash, platform, token, bundle_identifier, metadata, created_at, interest_count, user_id)
         SELECT instance_id, device_id, shard_hash, platform, token, bundle_identifier, metadata::json, created_at, 0, NULL
           FROM input ORDER BY row
         ON CONFLICT (instance_id, device_id) DO UPDATE SET
           platform = EXCLUDED.platform,
           token = EXCLUDED.token,
           bundle_identifier = COALESCE(EXCLUDED.bundle_identifier, d.bundle_identifier),
           metadata = COALESCE(EXCLUDED.metadata, d.metadata),
           user_id = NULL
         RETURNING d.instance_id, d.device_id, (xmax = 0) AS created
       )
       SELECT input.row::int AS row, up.created,
              CASE WHEN up.created THEN '{}'::text[] ELSE ARRAY(
                SELECT interest FROM herald_push_device_interests i
                 WHERE i.instance_id = up.instance_id AND i.device_id = up.device_id ORDER BY interest
              ) END AS interests
         FROM up JOIN input ON input.instance_id = up.instance_id AND input.device_id = up.device_id`,
        values,
      );
      // A re-registered device's subscriptions take its new token (platform, bundle, no user);
      // in a second statement, which sees subscriptions added while the upsert waited for the row.
      // (Not only those with interests above: that list is of the upsert's older snapshot.)
      const kept = rows.filter((r) => !r.created).map((r) => r.row - 1);
      if (kept.length > 0) {
        const [instanceIds, deviceIds] = values as [string[], string[]];
        await copyToSubscriptions(client, kept.map((k) => instanceIds[k]!), kept.map((k) => deviceIds[k]!));
      }
      const byRow = new Array<RegistrationOutcome>(rows.length);
      for (const r of rows) byRow[r.row - 1] = { created: r.created, interests: r.interests };
      return order.map((row) => byRow[row]!);
    });
  }

  async get(instanceId: string, deviceId: string): Promise<Device | undefined> {
    const { rows } = await this.query<DeviceRow>(
      'SELECT platform, token, bundle_identifier, user_id, metadata, created_at, interest_count FROM herald_push_devices WHERE instance_id = $1 AND device_id = $2',
      [instanceId, deviceId],
    );
    const row = rows[0];
    if (!row) return undefined;
    const device: Device = { id: deviceId, instanceId, platform: row.platform, token: row.token, createdAt: row.created_at, interestCount: row.interest_count };
    if (row.bundle_identifier !== null) device.bundleIdentifier = row.bundle_identifier;
    if (row.metadata !== null) device.metadata = row.metadata;
    if (row.user_id !== null) device.userId = row.user_id;
    return device;
  }

  async delete(instanceId: string, deviceId: string): Promise<boolean> {
    const { rowCount } = await this.query('DELETE FROM herald_push_devices WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId]);
    return (rowCount ?? 0) > 0;
  }

  async deleteIfToken(instanceId: string, deviceId: string, token: string): Promise<boolean> {
    const { rowCount } = await this.query('DELETE FROM herald_push_devices WHERE instance_id = $1 AND device_id = $2 AND token = $3', [instanceId, deviceId, token]);
    return (rowCount ?? 0) > 0;
  }

  async setMetadata(instanceId: string, deviceId: string, metadata: Record<string, string>): Promise<boolean> {
    const { rowCount } = await this.query('UPDATE herald_push_devices SET metadata = $3::json WHERE instance_id = $1 AND device_id = $2', [
      instanceId,
      deviceId,
      JSON.stringify(metadata),
    ]);
    return (rowCount ?? 0) > 0;
  }

  setToken(instanceId: string, deviceId: string, token: string): Promise<boolean> {
    return this.transaction(async (client) => {
      const { rowCount } = await client.query('UPDATE herald_push_devices SET token = $3 WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId, token]);
      if (!rowCount) return false;
      await copyToSubscriptions(client, [instanceId], [deviceId]);
      return true;
    });
  }

  setUser(instanceId: string, deviceId: string, userId: string): Promise<SetUserResult> {
    return this.transaction(async (client) => {
      const found = await lockForAssociation(client, instanceId, deviceId, userId);
      return found === 'free' ? associate(client, instanceId, deviceId, userId) : found;
    });
  }

  setUserWithinLimit(instanceId: string, deviceId: string, userId: string, _devicesOnOtherShards: number, maxDevicesPerUser: number): Promise<SetUserOutcome> {
    return this.transaction(async (client): Promise<SetUserOutcome> => {
      // Every node's association of this user waits here, so the count below cannot be overtaken.
      // (A hash collision between two users only makes them wait for each other.)
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))', [instanceId, userId]);
      const found = await lockForAssociation(client, instanceId, deviceId, userId);
      if (found !== 'free') return found;
      const { rows: counted } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM herald_push_devices WHERE instance_id = $1 AND user_id = $2', [
        instanceId,
        userId,
      ]);
      return counted[0]!.n >= maxDevicesPerUser ? 'limit' : associate(client, instanceId, deviceId, userId);
    });
  }

  async countUserDevices(instanceId: string, userId: string): Promise<number> {
    const shard = this.shardFilter(3);
    const { rows } = await this.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM herald_push_devices WHERE instance_id = $1 AND user_id = $2 AND ${shard.sql}`,
      [instanceId, userId, ...shard.values],
    );
    return rows[0]!.n;
  }

  async listInterests(instanceId: string, deviceId: string, limit: number, cursor?: string): Promise<InterestPage | 'not-found' | 'bad-cursor'> {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    // '' sorts before every name (none is empty): a plain range condition the index serves.
    let after = '';
    if (cursor !== undefined) {
      const name = decodeInterestCursor(cursor);
      if (name === undefined) return 'bad-cursor';
      after = name;
    }
    // One statement, one snapshot: the device's existence and its page agree.
    const { rows } = await this.query<{ interest: string | null }>(
      `SELECT i.interest FROM herald_push_devices d
         LEFT JOIN LATERAL (
           SELECT interest FROM herald_push_device_interests
            WHERE instance_id = d.instance_id AND device_id = d.device_id AND interest > $3
            ORDER BY interest LIMIT $4
         ) i ON true
        WHERE d.instance_id = $1 AND d.device_id = $2`,
      [instanceId, deviceId, after, limit + 1],
    );
    if (rows.length === 0) return 'not-found';
    const interests = rows.flatMap((r) => (r.interest === null ? [] : [r.interest]));
    if (interests.length <= limit) return { interests };
    interests.length = limit;
    return { interests, nextCursor: encodeInterestCursor(interests[limit - 1]!) };
  }

  /**
   * The device's interest count and what its subscriptions carry, its row locked for the rest
   * of the transaction (so no write changes them before it commits); undefined when there is
   * no such device.
   */
  private async lockDevice(client: pg.PoolClient, instanceId: string, deviceId: string): Promise<(SubscriptionCopy & { interest_count: number }) | undefined> {
    const { rows } = await client.query<SubscriptionCopy & { interest_count: number }>(
      `SELECT interest_count, ${SUBSCRIPTION_COPY} FROM herald_push_devices WHERE instance_id = $1 AND device_id = $2 FOR UPDATE`,
      [instanceId, deviceId],
    );
    return rows[0];
  }

  replaceInterests(instanceId: string, deviceId: string, interests: readonly string[]): Promise<ReplaceInterestsResult> {
    const wanted = [...new Set(interests)].sort();
    if (wanted.length > MAX_INTERESTS_PER_DEVICE) {
      throw new RangeError(`a device holds at most ${MAX_INTERESTS_PER_DEVICE} interests, got ${wanted.length}`);
    }
    return this.transaction(async (client): Promise<ReplaceInterestsResult> => {
      const device = await this.lockDevice(client, instanceId, deviceId);
      if (device === undefined) return 'not-found';
      await client.query('DELETE FROM herald_push_device_interests WHERE instance_id = $1 AND device_id = $2 AND NOT (interest = ANY($3::text[]))', [
        instanceId,
        deviceId,
        wanted,
      ]);
      await client.query(
        `INSERT INTO herald_push_device_interests (instance_id, device_id, interest, shard_hash, ${SUBSCRIPTION_COPY})
         SELECT $1, $2, name, $4, $5, $6, $7, $8 FROM unnest($3::text[]) AS name ON CONFLICT DO NOTHING`,
        [instanceId, deviceId, wanted, fnv1a32(deviceId), device.platform, device.token, device.bundle_identifier, device.user_id],
      );
      await client.query('UPDATE herald_push_devices SET interest_count = $3 WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId, wanted.length]);
      return 'ok';
    });
  }

  addInterest(instanceId: string, deviceId: string, interest: string): Promise<AddInterestResult> {
    return this.transaction(async (client): Promise<AddInterestResult> => {
      const device = await this.lockDevice(client, instanceId, deviceId);
      if (device === undefined) return 'not-found';
      const { rowCount: exists } = await client.query(
        'SELECT 1 FROM herald_push_device_interests WHERE instance_id = $1 AND device_id = $2 AND interest = $3',
        [instanceId, deviceId, interest],
      );
      if (exists) return 'unchanged';
      if (device.interest_count >= MAX_INTERESTS_PER_DEVICE) return 'too-many';
      await client.query(
        `INSERT INTO herald_push_device_interests (instance_id, device_id, interest, shard_hash, ${SUBSCRIPTION_COPY}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
        [instanceId, deviceId, interest, fnv1a32(deviceId), device.platform, device.token, device.bundle_identifier, device.user_id],
      );
      await client.query('UPDATE herald_push_devices SET interest_count = interest_count + 1 WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId]);
      return 'added';
    });
  }

  removeInterest(instanceId: string, deviceId: string, interest: string): Promise<RemoveInterestResult> {
    return this.transaction(async (client): Promise<RemoveInterestResult> => {
      if ((await this.lockDevice(client, instanceId, deviceId)) === undefined) return 'not-found';
      const { rowCount } = await client.query('DELETE FROM herald_push_device_interests WHERE instance_id = $1 AND device_id = $2 AND interest = $3', [
        instanceId,
        deviceId,
        interest,
      ]);
      if (!rowCount) return 'unchanged';
      await client.query('UPDATE herald_push_devices SET interest_count = interest_count - 1 WHERE instance_id = $1 AND device_id = $2', [instanceId, deviceId]);
      return 'removed';
    });
  }

  async deleteUser(instanceId: string, userId: string): Promise<number> {
    const shard = this.shardFilter(3);
    const { rowCount } = await this.query(`DELETE FROM herald_push_devices WHERE instance_id = $1 AND user_id = $2 AND ${shard.sql}`, [
      instanceId,
      userId,
      ...shard.values,
    ]);
    return rowCount ?? 0;
  }

  scanInterestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps {
    const list = normaliseScanList(interests);
    const { low, high } = this.bounds(partition);
    return this.indexSteps(instanceId, list, resumeFrom, (listIndex, afterHash, after) => {
      // A range of the interest index, which is ordered by device hash: this shard's and this
      // partition's entries only, each carrying what a send needs (an index-only scan of the
      // covering index, no lookup per device). A device subscribed to an interest earlier in
      // the list was yielded there (the first name needs no check).
      const earlier = list.slice(0, listIndex);
      return this.scanQuery(
        `WITH c AS MATERIALIZED (
           SELECT shard_hash, ${DEVICE_COLUMNS} FROM herald_push_device_interests
            WHERE instance_id = $1 AND interest = $2 AND (shard_hash, device_id) > ($3::bigint, $4::text) AND shard_hash >= $5 AND shard_hash < $6
            ORDER BY shard_hash, device_id LIMIT $7
         )
         SELECT ${DEVICE_COLUMNS}, NULL::int FROM c
          ${
            earlier.length === 0
              ? ''
              : `WHERE NOT EXISTS (SELECT 1 FROM herald_push_device_interests e
                                    WHERE e.instance_id = $1 AND e.device_id = c.device_id AND e.interest = ANY($8::text[]))`
          }
         UNION ALL
         ${BATCH_END_ROW}`,
        [instanceId, list[listIndex]!, afterHash, after, low, high, PG_SCAN_BATCH, ...(earlier.length === 0 ? [] : [earlier])],
      );
    });
  }

  scanUserSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps {
    const list = normaliseScanList(userIds);
    const { low, high } = this.bounds(partition);
    return this.indexSteps(instanceId, list, resumeFrom, (listIndex, afterHash, after) =>
      this.scanQuery(
        `WITH c AS MATERIALIZED (
           SELECT shard_hash, ${DEVICE_COLUMNS} FROM herald_push_devices
            WHERE instance_id = $1 AND user_id = $2 AND (shard_hash, device_id) > ($3::bigint, $4::text) AND shard_hash >= $5 AND shard_hash < $6
            ORDER BY shard_hash, device_id LIMIT $7
         )
         SELECT ${DEVICE_COLUMNS}, NULL::int FROM c
         UNION ALL
         ${BATCH_END_ROW}`,
        [instanceId, list[listIndex]!, afterHash, after, low, high, PG_SCAN_BATCH],
      ),
    );
  }

  async *scanDeviceSteps(
    instanceId: string,
    deviceIds: readonly string[],
    resumeFrom?: ScanPosition,
    partition?: ScanPartition,
  ): AsyncGenerator<ScanStep, void, undefined> {
    checkScanPosition(resumeFrom);
    const list = normaliseScanList(deviceIds);
    const { low, high } = this.bounds(partition);
    // A position names the last id handled: resume with the next one.
    const first = resumeFrom === undefined ? 0 : resumeFrom.listIndex + (resumeFrom.afterDeviceId === null ? 0 : 1);
    for (let start = first; start < list.length; start += PG_SCAN_BATCH) {
      const ids = list.slice(start, start + PG_SCAN_BATCH);
      const { rows } = await this.query<ScanRow>(
        `SELECT ${DEVICE_COLUMNS} FROM herald_push_devices
          WHERE instance_id = $1 AND device_id = ANY($2::text[]) AND shard_hash >= $3 AND shard_hash < $4`,
        [instanceId, ids, low, high],
      );
      const found = new Map(rows.map((row) => [row.device_id, row]));
      for (let k = 0; k < ids.length; k++) {
        const row = found.get(ids[k]!);
        if (row) yield { device: scanDevice(row, instanceId), position: { listIndex: start + k, afterDeviceId: row.device_id } };
      }
    }
  }

  /** One batch of a scan, its rows as arrays in CandidateRow's column order (no object per row). */
  private async scanQuery(text: string, values: unknown[]): Promise<CandidateRow[]> {
    await this.ready();
    return (await storeCall(() => this.pool.query<CandidateRow>({ text, values, rowMode: 'array' }))).rows;
  }

  /**
   * Walks `list` from `resumeFrom`, one batch query at a time (`batch(listIndex, afterHash,
   * after)`: the devices among the next PG_SCAN_BATCH index entries of this shard and partition
   * strictly after (afterHash, after), then the BATCH_END_ROW), never holding a transaction.
   * A batch's steps are answered without a promise each; the next batch is read meanwhile.
   */
  private indexSteps(
    instanceId: string,
    list: readonly string[],
    resumeFrom: ScanPosition | undefined,
    batch: (listIndex: number, afterHash: number, after: string) => Promise<CandidateRow[]>,
  ): ScanSteps {
    let listIndex = resumeFrom?.listIndex ?? 0;
    // ('', the hash 0) comes before every entry (no device id is empty).
    let after = resumeFrom?.afterDeviceId ?? '';
    return new BatchedScanSteps(async (): Promise<ScanBatch> => {
      checkScanPosition(resumeFrom);
      const steps: ScanStep[] = [];
      // Until a query yields a step (a list entry may end without a device to send) or the list ends.
      while (steps.length === 0 && listIndex < list.length) {
        const rows = await batch(listIndex, after === '' ? 0 : fnv1a32(after), after);
        let end: CandidateRow | undefined;
        for (const row of rows) {
          if (row[5] !== null) end = row;
          else steps.push({ device: scanDeviceOf(row, instanceId), position: { listIndex, afterDeviceId: row[0]! } });
        }
        const walked = end?.[5] ?? 0;
        if (walked < PG_SCAN_BATCH) {
          listIndex++;
          after = '';
          continue;
        }
        after = end![0]!;
        // A batch without a device to send: say where the walk stands, so a resumed scan skips it too.
        if (steps.length === 0) steps.push({ device: null, position: { listIndex, afterDeviceId: after }, skipped: walked });
      }
      return { steps, more: listIndex < list.length };
    });
  }

  async counts(instanceId: string): Promise<StoreCounts> {
    const shard = this.shardFilter(2);
    const { rows } = await this.query<{ devices: number; with_user: number; subscriptions: number }>(
      `SELECT count(*)::int AS devices, count(user_id)::int AS with_user, coalesce(sum(interest_count), 0)::int AS subscriptions
         FROM herald_push_devices WHERE instance_id = $1 AND ${shard.sql}`,
      [instanceId, ...shard.values],
    );
    const row = rows[0]!;
    return { devices: row.devices, subscriptions: row.subscriptions, devicesWithUser: row.with_user };
  }

  async platformCounts(instanceId: string): Promise<Record<Platform, number>> {
    const shard = this.shardFilter(2);
    const { rows } = await this.query<{ platform: Platform; n: number }>(
      `SELECT platform, count(*)::int AS n FROM herald_push_devices WHERE instance_id = $1 AND ${shard.sql} GROUP BY platform`,
      [instanceId, ...shard.values],
    );
    const counts: Record<Platform, number> = { apns: 0, fcm: 0, web: 0 };
    for (const row of rows) counts[row.platform] = row.n;
    return counts;
  }

  async checkConsistency(instanceId?: string): Promise<string[]> {
    const { rows } = await this.query<{ instance_id: string; device_id: string; interest_count: number; indexed: number }>(
      `SELECT d.instance_id, d.device_id, d.interest_count, count(i.interest)::int AS indexed
         FROM herald_push_devices d
         LEFT JOIN herald_push_device_interests i ON i.instance_id = d.instance_id AND i.device_id = d.device_id
        WHERE ($1::text IS NULL OR d.instance_id = $1)
        GROUP BY d.instance_id, d.device_id, d.interest_count
       HAVING d.interest_count <> count(i.interest)`,
      [instanceId ?? null],
    );
    const { rows: stale } = await this.query<{ instance_id: string; device_id: string; interest: string }>(
      `SELECT i.instance_id, i.device_id, i.interest
         FROM herald_push_device_interests i JOIN herald_push_devices d ON d.instance_id = i.instance_id AND d.device_id = i.device_id
        WHERE ($1::text IS NULL OR i.instance_id = $1)
          AND (i.platform, i.token, i.bundle_identifier, i.user_id) IS DISTINCT FROM (d.platform, d.token, d.bundle_identifier, d.user_id)
        ORDER BY i.instance_id, i.device_id, i.interest`,
      [instanceId ?? null],
    );
    return [
      ...rows.map((r) => `device ${r.instance_id}/${r.device_id}: interestCount ${r.interest_count} but ${r.indexed} interests indexed`),
      ...stale.map((r) => `device ${r.instance_id}/${r.device_id}: its subscription to ${r.interest} carries another platform, token, bundle or user`),
    ];
  }

  async close(): Promise<void> {
    await this.pool.end();
  }
}

function checkScanPosition(position: ScanPosition | undefined): void {
  if (position === undefined) return;
  if (!Number.isSafeInteger(position.listIndex) || position.listIndex < 0) {
    throw new RangeError(`scan position listIndex must be a non-negative integer, got ${position.listIndex}`);
  }
}
