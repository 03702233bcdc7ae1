/**
 * Publish records in PostgreSQL (cluster mode with `cluster.postgresUrl`): one database shared
 * by every shard of every node, so any node answers a publish's statistics, the monthly usage
 * and the delivery reports, and any node can send any part of a publish.
 *
 * Tables (migrations.ts, version 3):
 * - `herald_push_publishes`: the accepted job (msgpack), the user ids once (deflated), the
 *   partition count, and once every partition is finished `finished_at` and `finalized` (the
 *   FINISHED webhook queued);
 * - `herald_push_publish_parts`: one row per partition with its lease (`lease_owner`,
 *   `lease_until`), how often it was claimed, and its ProgressRecord (msgpack);
 * - `herald_push_usage`: notifications per instance and UTC month, added by each checkpoint in
 *   the checkpoint's transaction;
 * - `herald_push_reports`: one row per (publish, kind, device), deleted with the publish.
 *
 * Partitions (PartitionLeases): a shard claims the oldest unfinished partition whose lease is
 * free or expired (`FOR UPDATE SKIP LOCKED`, so claimers never wait on each other), runs it,
 * renews its lease with every checkpoint and on a timer, and loses it to another node only
 * after `publishLeaseMs` without renewal. A checkpoint is stored only while the lease is the
 * writer's (LeaseLostError otherwise), so counts stay exact: the node that takes a partition
 * over resumes from its last checkpoint, and only the sends made after it are made again.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { pack, unpack } from 'msgpackr';
import pg from 'pg';
import type { PostgresTimeouts } from '../../../config/schema.js';
import { HeraldError } from '../../../errors.js';
import type { DeliveryReport, ReportCounts } from '../../messages/reports.js';
import type { PublishJob, PublishShardStats } from '../../messages/publishes.js';
import { userIndexOf } from '../../publish-results.js';
import {
  initialProgress, jobOf, LeaseLostError, statsOf, storedJob,
  type ProgressRecord, type PublishRecordStore, type StoredPublishJob, type UsageDelta,
} from '../publish-record-store.js';
import {
  DEFAULT_POSTGRES_TIMEOUTS, boundedClient, inTransaction, isUnavailable, storeCall, storeConnections, unavailable, type PostgresStoreOptions, type SchemaReady,
} from './connection.js';

/** The NOTIFY channel that wakes every node's claimers when a publish is stored. */
export const PUBLISH_CHANNEL = 'herald_push_publish';

/** A partition this shard now holds the lease of. */
export interface ClaimedPart {
  job: PublishJob;
  partition: number;
  partitions: number;
  /** Its last checkpoint, or null when none was stored yet. */
  progress: ProgressRecord | null;
  /** Another owner held it before (its lease expired): sends after that owner's last checkpoint may be made again. */
  takenOver: boolean;
}

/** A finished publish whose closing webhooks are due: its job and every partition's record. */
export interface CompletedPublish {
  job: PublishJob;
  parts: ProgressRecord[];
}

/** The initial record of a partition that has no checkpoint yet. */
export function initialPartRecord(job: PublishJob, partition: number): ProgressRecord {
  return { ...initialProgress(job), partition };
}

export interface PostgresPublishStoreOptions extends PostgresStoreOptions {
  /** Who holds the leases this store takes: unique per shard and process start. */
  owner: string;
  leaseMs: number;
}

export class PostgresPublishStore implements PublishRecordStore {
  readonly kind = 'postgres';
  readonly owner: string;
  private readonly pool: pg.Pool;
  private readonly url: string;
  private readonly leaseMs: number;
  private readonly shardIndex: number;
  private readonly schema: SchemaReady;
  private readonly timeouts: Readonly<PostgresTimeouts> | undefined;
  private listener: pg.Client | undefined;
  private closed = false;

  constructor(options: PostgresPublishStoreOptions) {
    this.url = options.url;
    this.owner = options.owner;
    this.leaseMs = options.leaseMs;
    this.shardIndex = options.shardIndex;
    this.timeouts = options.timeouts;
    ({ pool: this.pool, schema: this.schema } = storeConnections(options, 'publish'));
  }

  /** Connects and applies the schema migrations once; after a failure, the next call tries again. */
  ready(): Promise<void> {
    return this.schema.ready();
  }

  /**
   * Calls `onNotify` whenever a node stores a publish (PostgreSQL LISTEN on one connection of
   * its own). A lost connection is opened again on the next call; the claimers poll anyway.
   */
  async listen(onNotify: () => void): Promise<void> {
    if (this.listener || this.closed) return;
    const client = boundedClient(this.url, this.timeouts, `herald-publish-listen-${this.shardIndex}`);
    this.listener = client;
    client.on('notification', () => onNotify());
    client.on('error', () => {
      if (this.listener === client) this.listener = undefined;
      client.end().catch(() => undefined);
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${PUBLISH_CHANNEL}`);
    } catch (err) {
      if (this.listener === client) this.listener = undefined;
      await client.end().catch(() => undefined);
      throw isUnavailable(err) ? unavailable(err) : err;
    }
  }

  /**
   * Stores a new publish with its `partitions` unclaimed partitions and wakes every node's
   * claimers, in one transaction. False, and nothing written, when the publish is already known.
   * The transaction commits only within half of `queryMs` from its start (server clock;
   * migration 6), well before this node gives up on its COMMIT (`queryMs` after sending it): a
   * COMMIT that got no answer (PUSH_STORE_UNAVAILABLE) is refused when a stalled server takes
   * it up later, so a publish that failed is not stored and never sent.
   */
  async create(job: PublishJob, partitions: number): Promise<boolean> {
    const deadlineMs = Math.floor((this.timeouts ?? DEFAULT_POSTGRES_TIMEOUTS).queryMs / 2);
    return this.transaction(async (client) => {
      await client.query("SELECT set_config('herald.commit_deadline', (clock_timestamp() + $1 * interval '1 millisecond')::text, true)", [deadlineMs]);
      const targets = job.kind === 'users' ? deflateRawSync(pack(userIndexOf(job.targets))) : null;
      const { rowCount } = await client.query(
        `INSERT INTO herald_push_publishes (publish_id, instance_id, kind, job, targets, accepted_at, partitions)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (publish_id) DO NOTHING`,
        [job.publishId, job.instanceId, job.kind, pack(storedJob(job)), targets, job.acceptedAt, partitions],
      );
      if (rowCount === 0) return false;
      await client.query(
        `INSERT INTO herald_push_publish_parts (publish_id, partition, accepted_at)
         SELECT $1, p, $2 FROM generate_series(0, $3 - 1) AS p`,
        [job.publishId, job.acceptedAt, partitions],
      );
      await client.query(`SELECT pg_notify('${PUBLISH_CHANNEL}', $1)`, [job.publishId]);
      return true;
    });
  }

  /** Bytes of the instance's accepted publishes not finished yet (stored jobs), cluster-wide. */
  async pendingBytes(instanceId: string): Promise<number> {
    const { rows } = await this.query<{ bytes: string }>(
      'SELECT coalesce(sum(octet_length(job)), 0)::bigint AS bytes FROM herald_push_publishes WHERE instance_id = $1 AND finished_at IS NULL',
      [instanceId],
    );
    return Number(rows[0]!.bytes);
  }

  /**
   * Takes the lease of the oldest unfinished partition that nobody holds (never claimed, or its
   * lease expired); undefined when there is none. Never waits on another claimer.
   */
  async claim(): Promise<ClaimedPart | undefined> {
    const { rows } = await this.query<{ publish_id: string; partition: number; progress: Buffer | null; claims: number; job: Buffer; partitions: number }>(
      `WITH next AS (
         SELECT publish_id, partition FROM herald_push_publish_parts
          WHERE state <> 'finished' AND (lease_until IS NULL OR lease_until < now())
          ORDER BY accepted_at, publish_id, partition
          LIMIT 1 FOR UPDATE SKIP LOCKED
       ), taken AS (
         UPDATE herald_push_publish_parts p
            SET lease_owner = $1, lease_until = now() + $2 * interval '1 millisecond', claims = p.claims + 1
           FROM next WHERE p.publish_id = next.publish_id AND p.partition = next.partition
         RETURNING p.publish_id, p.partition, p.progress, p.claims
       )
       SELECT taken.*, pub.job, pub.partitions FROM taken JOIN herald_push_publishes pub USING (publish_id)`,
      [this.owner, this.leaseMs],
    );
    const row = rows[0];
    if (!row) return undefined;
    const job = jobOf(unpack(row.job) as StoredPublishJob);
    return {
      job,
      partition: row.partition,
      partitions: row.partitions,
      progress: row.progress ? (unpack(row.progress) as ProgressRecord) : null,
      takenOver: row.claims > 1,
    };
  }

  /** Extends the lease of partitions this owner holds; resolves to those it no longer holds. */
  async renew(parts: readonly { publishId: string; partition: number }[]): Promise<{ publishId: string; partition: number }[]> {
    if (parts.length === 0) return [];
    const ids = parts.map((p) => p.publishId);
    const partitions = parts.map((p) => p.partition);
    const { rows } = await this.query<{ publish_id: string; partition: number }>(
      `UPDATE herald_push_publish_parts p SET lease_until = now() + $2 * interval '1 millisecond'
         FROM unnest($3::text[], $4::int[]) AS h(publish_id, partition)
        WHERE p.publish_id = h.publish_id AND p.partition = h.partition AND p.lease_owner = $1 AND p.state <> 'finished'
        RETURNING p.publish_id, p.partition`,
      [this.owner, this.leaseMs, ids, partitions],
    );
    const held = new Set(rows.map((r) => `${r.publish_id}\0${r.partition}`));
    return parts.filter((p) => !held.has(`${p.publishId}\0${p.partition}`));
  }

  /** A partition's checkpoint and the usage it adds, stored only while this owner holds its lease. */
  async saveProgress(progress: ProgressRecord, usage?: UsageDelta): Promise<number> {
    const partition = progress.partition ?? 0;
    await this.transaction(async (client) => {
      const finished = progress.state === 'finished';
      const { rowCount } = await client.query(
        `UPDATE herald_push_publish_parts
            SET progress = $4, state = $5,
                lease_until = CASE WHEN $6 THEN lease_until ELSE now() + $7 * interval '1 millisecond' END
          WHERE publish_id = $1 AND partition = $2 AND lease_owner = $3 AND state <> 'finished'`,
        [progress.publishId, partition, this.owner, pack(progress), progress.state, finished, this.leaseMs],
      );
      if (rowCount === 0) throw new LeaseLostError(`partition ${partition} of ${progress.publishId} is no longer held by ${this.owner}`);
      if (finished) {
        // The last partition to finish dates the publish (retention; complete() dates it too,
        // under the publish's lock, when two last partitions finish at once).
        await client.query(
          `UPDATE herald_push_publishes SET finished_at = $2 WHERE publish_id = $1 AND finished_at IS NULL
             AND NOT EXISTS (SELECT 1 FROM herald_push_publish_parts WHERE publish_id = $1 AND state <> 'finished')`,
          [progress.publishId, progress.finishedAt ?? progress.updatedAt],
        );
      }
      if (usage && usage.notifications !== 0) {
        await client.query(
          `INSERT INTO herald_push_usage (instance_id, month, notifications) VALUES ($1, $2, $3)
           ON CONFLICT (instance_id, month) DO UPDATE SET notifications = herald_push_usage.notifications + excluded.notifications`,
          [usage.instanceId, usage.month, usage.notifications],
        );
      }
    });
    return 0;
  }

  /**
   * When every partition of the publish is finished and its closing webhooks are not queued
   * yet: calls `queue` (which queues them) and marks the publish finished and finalized, in one
   * transaction holding the publish's row, so two nodes finishing its last partitions at once
   * queue them once. A crash between `queue` and the commit queues them again later
   * (at least once). Resolves to whether `queue` was called.
   */
  async complete(publishId: string, queue: (done: CompletedPublish) => void): Promise<boolean> {
    return this.transaction(async (client) => {
      const publish = await client.query<{ job: Buffer; finalized: boolean }>(
        'SELECT job, finalized FROM herald_push_publishes WHERE publish_id = $1 FOR UPDATE',
        [publishId],
      );
      const row = publish.rows[0];
      if (!row || row.finalized) return false;
      const parts = await client.query<{ state: string; progress: Buffer | null }>(
        'SELECT state, progress FROM herald_push_publish_parts WHERE publish_id = $1 ORDER BY partition',
        [publishId],
      );
      if (parts.rows.some((p) => p.state !== 'finished' || p.progress === null)) return false;
      const records = parts.rows.map((p) => unpack(p.progress!) as ProgressRecord);
      const finishedAt = Math.max(...records.map((r) => r.finishedAt ?? r.updatedAt));
      await client.query('UPDATE herald_push_publishes SET finished_at = coalesce(finished_at, $2), finalized = true WHERE publish_id = $1', [publishId, finishedAt]);
      queue({ job: jobOf(unpack(row.job) as StoredPublishJob), parts: records });
      return true;
    });
  }

  /** Publishes whose partitions are all finished and whose closing webhooks are not queued (a node died in between). */
  async unfinalized(limit = 100): Promise<string[]> {
    const { rows } = await this.query<{ publish_id: string }>(
      `SELECT publish_id FROM herald_push_publishes pub
        WHERE NOT finalized AND NOT EXISTS (
          SELECT 1 FROM herald_push_publish_parts p WHERE p.publish_id = pub.publish_id AND p.state <> 'finished')
        LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.publish_id);
  }

  /**
   * Cancels a publish (`publish.cancel`: not every node stored it... in a cluster, its one store
   * failed after the insert): every partition finished without sending, the publish finalized
   * without webhooks. False when it was not stored.
   */
  async cancel(publishId: string, nowMs = Date.now()): Promise<boolean> {
    return this.transaction(async (client) => {
      const { rowCount } = await client.query(
        'UPDATE herald_push_publishes SET finished_at = $2, finalized = true WHERE publish_id = $1',
        [publishId, nowMs],
      );
      if (rowCount === 0) return false;
      await client.query("UPDATE herald_push_publish_parts SET state = 'finished', lease_until = NULL WHERE publish_id = $1", [publishId]);
      return true;
    });
  }

  async statsParts(instanceId: string, publishId: string): Promise<PublishShardStats[]> {
    const { rows } = await this.query<{ job: Buffer; targets: Buffer | null; partition: number; progress: Buffer | null; partitions: number }>(
      `SELECT pub.job, pub.targets, pub.partitions, p.partition, p.progress
         FROM herald_push_publishes pub JOIN herald_push_publish_parts p USING (publish_id)
        WHERE pub.publish_id = $1 AND pub.instance_id = $2 ORDER BY p.partition`,
      [publishId, instanceId],
    );
    if (rows.length === 0) return [];
    const job = jobOf(unpack(rows[0]!.job) as StoredPublishJob);
    const targets = rows[0]!.targets ? (unpack(inflateRawSync(rows[0]!.targets)) as string[]) : undefined;
    return rows.map((row) => {
      const record = row.progress ? (unpack(row.progress) as ProgressRecord) : initialPartRecord(job, row.partition);
      return statsOf(record, row.partition, row.partition === 0 ? targets : undefined);
    });
  }

  /** How many partitions the publish has (0 when unknown). */
  async partitionsOf(publishId: string): Promise<number> {
    const { rows } = await this.query<{ partitions: number }>('SELECT partitions FROM herald_push_publishes WHERE publish_id = $1', [publishId]);
    return rows[0]?.partitions ?? 0;
  }

  async usage(instanceId: string, month: string): Promise<number> {
    const { rows } = await this.query<{ notifications: string }>(
      'SELECT notifications FROM herald_push_usage WHERE instance_id = $1 AND month = $2',
      [instanceId, month],
    );
    return rows[0] ? Number(rows[0].notifications) : 0;
  }

  async instanceOf(publishId: string): Promise<string | undefined> {
    const { rows } = await this.query<{ instance_id: string }>('SELECT instance_id FROM herald_push_publishes WHERE publish_id = $1', [publishId]);
    return rows[0]?.instance_id;
  }

  async sweep(cutoffMs: number, limit = 1000): Promise<{ publishes: number; bytes: number }> {
    const { rows } = await this.query<{ bytes: string | null; n: number }>(
      `WITH gone AS (
         DELETE FROM herald_push_publishes WHERE publish_id IN (
           SELECT publish_id FROM herald_push_publishes WHERE finished_at < $1 ORDER BY finished_at LIMIT $2)
         RETURNING octet_length(job) + coalesce(octet_length(targets), 0) AS bytes)
       SELECT count(*)::int AS n, sum(bytes)::bigint AS bytes FROM gone`,
      [cutoffMs, limit],
    );
    return { publishes: rows[0]!.n, bytes: Number(rows[0]!.bytes ?? 0) };
  }

  /**
   * Records the first report of a (publish, device, kind): `onRecorded` runs inside the
   * transaction (it queues the user webhook), so a recorded report has its webhook, at least
   * once. `duplicate` changes nothing.
   */
  async recordReport(report: DeliveryReport, onRecorded: () => void, nowMs = Date.now()): Promise<'recorded' | 'duplicate'> {
    return this.transaction(async (client) => {
      const { rowCount } = await client.query(
        `INSERT INTO herald_push_reports (publish_id, kind, device_id, instance_id, timestamp_secs, received_at, user_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
        [report.publishId, report.kind, report.deviceId, report.instanceId, Math.floor(report.timestampSecs), nowMs, report.userId ?? null],
      );
      if (rowCount === 0) return 'duplicate';
      onRecorded();
      return 'recorded';
    });
  }

  async reportCounts(instanceId: string, publishId: string): Promise<ReportCounts> {
    const { rows } = await this.query<{ kind: string; n: number }>(
      'SELECT kind, count(*)::int AS n FROM herald_push_reports WHERE publish_id = $1 AND instance_id = $2 GROUP BY kind',
      [publishId, instanceId],
    );
    const counts: ReportCounts = { delivered: 0, opened: 0 };
    for (const row of rows) {
      if (row.kind === 'delivery') counts.delivered = row.n;
      else if (row.kind === 'open') counts.opened = row.n;
    }
    return counts;
  }

  /** Gives up the leases this owner holds (a clean stop: its checkpoints are stored), so another node resumes them at once. */
  async release(): Promise<void> {
    await this.query("UPDATE herald_push_publish_parts SET lease_until = now() WHERE lease_owner = $1 AND state <> 'finished'", [this.owner]);
  }

  async close(): Promise<void> {
    this.closed = true;
    const listener = this.listener;
    this.listener = undefined;
    await listener?.end().catch(() => undefined);
    await this.pool.end();
  }

  private query<R extends pg.QueryResultRow>(sql: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return storeCall(() => this.pool.query<R>(sql, values));
  }

  private transaction<T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, work, (err) => err instanceof LeaseLostError || err instanceof HeraldError);
  }
}

/** A lease owner id: unique per shard and process start (leases of an earlier start are never taken for this one's). */
export function leaseOwner(nodeId: string | undefined, shardIndex: number): string {
  return `${nodeId ?? hostname()}/${process.pid}/${shardIndex}/${randomUUID().slice(0, 8)}`;
}
