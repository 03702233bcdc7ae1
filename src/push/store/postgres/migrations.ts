/**
 * The versioned schema of the push store in PostgreSQL, applied at start-up by every shard of
 * every node. A session-level advisory lock serialises the nodes that start at once: the first
 * applies what is missing, each in its own transaction with its row in
 * `herald_schema_migrations`; the others then find it applied. A database migrated by a newer
 * Herald (a version this one does not know) is refused rather than used.
 *
 * Text columns that are keys use the "C" collation: names and ids sort by their UTF-8 bytes,
 * the order of the LMDB store (interest pages and scan positions mean the same on both).
 */
import type pg from 'pg';
import { usingConnection } from './checked-out.js';

export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
}

/** Arbitrary, fixed: the advisory lock key of Herald's migrations ("HRLD"). */
export const MIGRATION_LOCK_KEY = 0x48524c44;

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'push devices, interests and user associations',
    sql: `
      CREATE TABLE herald_push_devices (
        instance_id text COLLATE "C" NOT NULL,
        device_id text COLLATE "C" NOT NULL,
        -- fnv1a32(device_id): which shard of a node answers for the device in scans and counts.
        shard_hash bigint NOT NULL,
        platform text NOT NULL,
        token text NOT NULL,
        bundle_identifier text,
        user_id text COLLATE "C",
        -- json, not jsonb: the metadata keys keep the order the SDK sent.
        metadata json,
        created_at double precision NOT NULL,
        interest_count integer NOT NULL DEFAULT 0,
        PRIMARY KEY (instance_id, device_id)
      );
      CREATE INDEX herald_push_devices_by_user ON herald_push_devices (instance_id, user_id, device_id) WHERE user_id IS NOT NULL;
      CREATE TABLE herald_push_device_interests (
        instance_id text COLLATE "C" NOT NULL,
        device_id text COLLATE "C" NOT NULL,
        interest text COLLATE "C" NOT NULL,
        PRIMARY KEY (instance_id, device_id, interest),
        FOREIGN KEY (instance_id, device_id) REFERENCES herald_push_devices (instance_id, device_id) ON DELETE CASCADE
      );
      CREATE INDEX herald_push_interest_devices ON herald_push_device_interests (instance_id, interest, device_id);
      -- Values every node must share: the installation secret that device ids derive from.
      CREATE TABLE herald_cluster_settings (
        name text PRIMARY KEY,
        value text NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'subscriptions ordered by device hash, one index range per shard',
    sql: `
      -- fnv1a32(device_id), as in herald_push_devices: the interest index is ordered by it, so
      -- a fan-out scan reads one range of it per shard (and partition), only its own entries.
      ALTER TABLE herald_push_device_interests ADD COLUMN shard_hash bigint;
      UPDATE herald_push_device_interests i SET shard_hash = d.shard_hash
        FROM herald_push_devices d WHERE d.instance_id = i.instance_id AND d.device_id = i.device_id;
      ALTER TABLE herald_push_device_interests ALTER COLUMN shard_hash SET NOT NULL;
      DROP INDEX herald_push_interest_devices;
      CREATE INDEX herald_push_interest_devices ON herald_push_device_interests (instance_id, interest, shard_hash, device_id);
      -- What a fan-out sends to, in the same (hash, id) order: its device lookups are
      -- index-only and walk this index forward with the scan, instead of random heap reads.
      CREATE INDEX herald_push_devices_by_hash ON herald_push_devices (instance_id, shard_hash, device_id)
        INCLUDE (platform, token, bundle_identifier, user_id, interest_count);
    `,
  },
  {
    version: 3,
    name: 'publish records, partitions, usage and delivery reports',
    sql: `
      CREATE TABLE herald_push_publishes (
        publish_id text COLLATE "C" PRIMARY KEY,
        instance_id text COLLATE "C" NOT NULL,
        kind text NOT NULL,
        -- msgpack of the accepted job (targets, payloads, webhookUrl): what a partition's run needs.
        job bytea NOT NULL,
        -- user publishes: the target ids, sorted and de-duplicated, msgpack deflated (user outcome bits index them).
        targets bytea,
        accepted_at double precision NOT NULL,
        partitions integer NOT NULL,
        -- every partition finished; FINISHED (and v1.PublishToUsersAttempt) queued.
        finished_at double precision,
        finalized boolean NOT NULL DEFAULT false
      );
      CREATE INDEX herald_push_publishes_pending ON herald_push_publishes (instance_id) WHERE finished_at IS NULL;
      CREATE INDEX herald_push_publishes_finished ON herald_push_publishes (finished_at) WHERE finished_at IS NOT NULL;
      CREATE TABLE herald_push_publish_parts (
        publish_id text COLLATE "C" NOT NULL REFERENCES herald_push_publishes (publish_id) ON DELETE CASCADE,
        partition integer NOT NULL,
        accepted_at double precision NOT NULL,
        state text NOT NULL DEFAULT 'queued',
        -- who runs it and until when; another node may take it over once lease_until has passed.
        lease_owner text,
        lease_until timestamptz,
        -- times it was claimed: more than 1 means a node took it over from one that stopped renewing.
        claims integer NOT NULL DEFAULT 0,
        -- msgpack of the part's ProgressRecord (counts, scan checkpoint); null before its first checkpoint.
        progress bytea,
        PRIMARY KEY (publish_id, partition)
      );
      CREATE INDEX herald_push_publish_parts_open ON herald_push_publish_parts (accepted_at, publish_id, partition) WHERE state <> 'finished';
      CREATE TABLE herald_push_usage (
        instance_id text COLLATE "C" NOT NULL,
        month text NOT NULL,
        notifications bigint NOT NULL,
        PRIMARY KEY (instance_id, month)
      );
      CREATE TABLE herald_push_reports (
        publish_id text COLLATE "C" NOT NULL REFERENCES herald_push_publishes (publish_id) ON DELETE CASCADE,
        kind text NOT NULL,
        device_id text COLLATE "C" NOT NULL,
        instance_id text COLLATE "C" NOT NULL,
        timestamp_secs bigint NOT NULL,
        received_at double precision NOT NULL,
        user_id text,
        PRIMARY KEY (publish_id, kind, device_id)
      );
    `,
  },
  {
    version: 4,
    name: 'subscriptions carry what a fan-out sends to',
    sql: `
      -- The device's platform, token, bundle identifier and user, copied into each of its
      -- subscriptions and kept equal by every write that changes them (in the transaction that
      -- holds the device row's lock): a fan-out reads one range of the interest index and needs
      -- no lookup per device.
      ALTER TABLE herald_push_device_interests
        ADD COLUMN platform text,
        ADD COLUMN token text,
        ADD COLUMN bundle_identifier text,
        ADD COLUMN user_id text COLLATE "C";
      UPDATE herald_push_device_interests i
         SET platform = d.platform, token = d.token, bundle_identifier = d.bundle_identifier, user_id = d.user_id
        FROM herald_push_devices d WHERE d.instance_id = i.instance_id AND d.device_id = i.device_id;
      ALTER TABLE herald_push_device_interests ALTER COLUMN platform SET NOT NULL, ALTER COLUMN token SET NOT NULL;
      -- Covering: a fan-out batch is an index-only scan of one range (once the table is vacuumed).
      DROP INDEX herald_push_interest_devices;
      CREATE INDEX herald_push_interest_devices ON herald_push_device_interests (instance_id, interest, shard_hash, device_id)
        INCLUDE (platform, token, bundle_identifier, user_id);
    `,
  },
  {
    version: 5,
    name: 'namespaces of push instances and purges of deleted ones',
    sql: `
      -- The namespace an instance's rows are kept under (their instance_id), once it differs
      -- from the instance id: it changes each time the instance is deleted.
      CREATE TABLE herald_push_namespaces (
        instance_id text COLLATE "C" PRIMARY KEY,
        namespace text COLLATE "C" NOT NULL
      );
      -- Retired namespaces whose rows are still to be deleted (in batches, in the background).
      CREATE TABLE herald_push_purges (
        namespace text COLLATE "C" PRIMARY KEY,
        instance_id text COLLATE "C" NOT NULL,
        retired_at double precision NOT NULL
      );
      CREATE INDEX herald_push_publishes_by_instance ON herald_push_publishes (instance_id);
      CREATE INDEX herald_push_reports_by_instance ON herald_push_reports (instance_id);
    `,
  },
  {
    version: 6,
    name: 'a new publish commits only before its transaction\'s deadline',
    sql: `
      -- Checked at COMMIT: a transaction that set herald.commit_deadline (set_config, local)
      -- and commits after it fails instead. A node gives up on a COMMIT that got no answer
      -- within its query bound and answers 503; a stalled server that takes the COMMIT up
      -- later must not store, and then send, the publish the client was refused.
      CREATE FUNCTION herald_check_commit_deadline() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF clock_timestamp() > NULLIF(current_setting('herald.commit_deadline', true), '')::timestamptz THEN
          RAISE EXCEPTION 'commit deadline passed' USING ERRCODE = 'query_canceled';
        END IF;
        RETURN NULL;
      END $$;
      CREATE CONSTRAINT TRIGGER herald_push_publishes_commit_deadline AFTER INSERT ON herald_push_publishes
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION herald_check_commit_deadline();
    `,
  },
];

/** The newest schema version this Herald knows. */
export const SCHEMA_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/** Applies every migration the database lacks, under the advisory lock; resolves to the versions it applied. */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  const client = await pool.connect();
  return usingConnection(client, async (broke) => {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(`CREATE TABLE IF NOT EXISTS herald_schema_migrations (
        version integer PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`);
      const { rows } = await client.query<{ version: number }>('SELECT version FROM herald_schema_migrations');
      const applied = new Set(rows.map((r) => r.version));
      const known = new Set(migrations.map((m) => m.version));
      const unknown = [...applied].filter((v) => !known.has(v));
      if (unknown.length > 0) {
        throw new Error(`the PostgreSQL schema has version ${Math.max(...unknown)}, newer than this Herald knows (${Math.max(...known)}): upgrade Herald`);
      }
      const done: number[] = [];
      for (const migration of migrations) {
        if (applied.has(migration.version)) continue;
        await client.query('BEGIN');
        try {
          await client.query(migration.sql);
          await client.query('INSERT INTO herald_schema_migrations (version, name) VALUES ($1, $2)', [migration.version, migration.name]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK').catch(() => undefined);
          throw err;
        }
        done.push(migration.version);
      }
      return done;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(broke);
    }
  });
}
