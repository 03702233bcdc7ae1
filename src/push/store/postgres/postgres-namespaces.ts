/**
 * The namespaces of push instances in the cluster's PostgreSQL (store/namespaces.ts): tables
 * `herald_push_namespaces` and `herald_push_purges` (migrations.ts, version 5), shared by every
 * shard of every node. Each shard holds the current namespaces in memory, read at start-up and
 * again for an instance whenever a tenant change names it (another node deleted or created it).
 * A retirement is one transaction under a lock on the instance, so shards and nodes that retire
 * the same namespace at once agree on its successor.
 *
 * A purge deletes the namespace's devices (their subscriptions cascade) and publishes (their
 * partitions and reports cascade), a batch per transaction; rows another node's purge holds are
 * skipped, so nodes purging the same namespace share the work.
 */
import type pg from 'pg';
import type { PushNamespaces } from '../namespaces.js';
import { inTransaction, storeCall, storeConnections, type PostgresStoreOptions, type SchemaReady } from './connection.js';

/** The namespaces' pool is always of NAMESPACE_POOL_SIZE connections. */
export type PostgresNamespacesOptions = Omit<PostgresStoreOptions, 'poolSize'>;

/** Connections of the namespaces' pool (a few small reads and writes per instance removal). */
const NAMESPACE_POOL_SIZE = 2;

export class PostgresNamespaces implements PushNamespaces {
  private readonly pool: pg.Pool;
  private readonly schema: SchemaReady;
  private readonly held = new Map<string, string>();
  private loaded: Promise<void> | undefined;

  constructor(options: PostgresNamespacesOptions) {
    ({ pool: this.pool, schema: this.schema } = storeConnections({ ...options, poolSize: NAMESPACE_POOL_SIZE }, 'namespaces'));
  }

  ready(): Promise<void> {
    this.loaded ??= (async () => {
      await this.schema.ready();
      const { rows } = await this.query<{ instance_id: string; namespace: string }>('SELECT instance_id, namespace FROM herald_push_namespaces');
      for (const row of rows) this.held.set(row.instance_id, row.namespace);
    })().catch((err: unknown) => {
      this.loaded = undefined;
      throw err;
    });
    return this.loaded;
  }

  current(instanceId: string): string {
    return this.held.get(instanceId) ?? instanceId;
  }

  async retire(instanceId: string, next: string): Promise<void> {
    await this.ready();
    const believed = this.current(instanceId);
    const now = await inTransaction(this.pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [instanceId]);
      const { rows } = await client.query<{ namespace: string }>('SELECT namespace FROM herald_push_namespaces WHERE instance_id = $1', [instanceId]);
      const current = rows[0]?.namespace ?? instanceId;
      // Retired already (by another shard or node) when `current` differs: its purge is asked
      // for again, for rows written to it meanwhile, and the current one is left as it is.
      if (believed !== next) {
        await client.query('INSERT INTO herald_push_purges (namespace, instance_id, retired_at) VALUES ($1, $2, $3) ON CONFLICT (namespace) DO NOTHING', [believed, instanceId, Date.now()]);
      }
      if (current !== believed) return current;
      await client.query(
        'INSERT INTO herald_push_namespaces (instance_id, namespace) VALUES ($1, $2) ON CONFLICT (instance_id) DO UPDATE SET namespace = EXCLUDED.namespace',
        [instanceId, next],
      );
      return next;
    });
    this.held.set(instanceId, now);
  }

  async refresh(instanceId: string): Promise<void> {
    await this.ready();
    const { rows } = await this.query<{ namespace: string }>('SELECT namespace FROM herald_push_namespaces WHERE instance_id = $1', [instanceId]);
    if (rows[0]) this.held.set(instanceId, rows[0].namespace);
    else this.held.delete(instanceId);
  }

  async pending(): Promise<string[]> {
    await this.ready();
    const { rows } = await this.query<{ namespace: string }>('SELECT namespace FROM herald_push_purges ORDER BY retired_at');
    return rows.map((r) => r.namespace);
  }

  async purgeStep(namespace: string, limit: number): Promise<boolean> {
    const deleted = await inTransaction(this.pool, async (client) => {
      const devices = await client.query(
        `DELETE FROM herald_push_devices WHERE (instance_id, device_id) IN (
           SELECT instance_id, device_id FROM herald_push_devices WHERE instance_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [namespace, limit],
      );
      if ((devices.rowCount ?? 0) > 0) return devices.rowCount ?? 0;
      const publishes = await client.query(
        `DELETE FROM herald_push_publishes WHERE publish_id IN (
           SELECT publish_id FROM herald_push_publishes WHERE instance_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [namespace, limit],
      );
      if ((publishes.rowCount ?? 0) > 0) return publishes.rowCount ?? 0;
      const reports = await client.query(
        `DELETE FROM herald_push_reports WHERE (publish_id, kind, device_id) IN (
           SELECT publish_id, kind, device_id FROM herald_push_reports WHERE instance_id = $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [namespace, limit],
      );
      const usage = await client.query('DELETE FROM herald_push_usage WHERE instance_id = $1', [namespace]);
      return (reports.rowCount ?? 0) + (usage.rowCount ?? 0);
    });
    if (deleted > 0) return false;
    // Rows another purge still holds: not done until they are gone.
    const { rows } = await this.query<{ left: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM herald_push_devices WHERE instance_id = $1)
           OR EXISTS (SELECT 1 FROM herald_push_publishes WHERE instance_id = $1) AS left`,
      [namespace],
    );
    if (rows[0]?.left) return false;
    await this.query('DELETE FROM herald_push_purges WHERE namespace = $1', [namespace]);
    return true;
  }

  async close(): Promise<void> {
    await this.pool.end();
  }

  private query<R extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    return storeCall(() => this.pool.query<R>(sql, params));
  }
}
