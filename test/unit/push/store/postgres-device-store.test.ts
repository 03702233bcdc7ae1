/**
 * The push device store contract against PostgreSQL (a private server for this file, a fresh
 * database per test), and what only a shared store shows: another node's store sees a write at
 * once, schema migrations are versioned and safe when many shards start together, and a store
 * whose server is away answers PUSH_STORE_UNAVAILABLE, then recovers by itself.
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { HeraldError } from '../../../../src/errors.js';
import { fnv1a32 } from '../../../../src/shards/hash.js';
import { inTransaction } from '../../../../src/push/store/postgres/connection.js';
import { MIGRATIONS, SCHEMA_VERSION, migrate } from '../../../../src/push/store/postgres/migrations.js';
import { PostgresDeviceStore, postgresShardOf } from '../../../../src/push/store/postgres/postgres-device-store.js';
import { filePostgresServer } from '../../../helpers/file-postgres.js';
import { until } from '../../../helpers/wait.js';
import { deviceStoreContract } from './device-store-contract.js';

const postgres = filePostgresServer();
let databases = 0;

async function freshDatabase(): Promise<string> {
  return postgres().createDatabase(`contract_${process.pid}_${++databases}`);
}

deviceStoreContract('postgres (one database shared by every shard)', async (shardCount) => {
  const url = await freshDatabase();
  const stores = Array.from({ length: shardCount }, (_, shardIndex) => new PostgresDeviceStore({ url, shardIndex, shardCount }));
  return {
    stores,
    scopeOf: postgresShardOf,
    sharedPartitions: true,
    close: async () => {
      for (const store of stores) await store.close();
    },
  };
});

const I = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';

describe('postgres device store', () => {
  it('is shared: a device written through one node is read, changed and deleted through another', async () => {
    const url = await freshDatabase();
    const nodeA = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    const nodeB = new PostgresDeviceStore({ url, shardIndex: 1, shardCount: 2 });
    try {
      await nodeA.register({ instanceId: I, deviceId: 'shared', platform: 'fcm', token: 'tok', metadata: { v: '1' } });
      expect(await nodeB.get(I, 'shared')).toMatchObject({ token: 'tok', metadata: { v: '1' } });
      expect(await nodeB.addInterest(I, 'shared', 'news')).toBe('added');
      expect(await nodeA.listInterests(I, 'shared', 10)).toEqual({ interests: ['news'] });
      expect(await nodeB.delete(I, 'shared')).toBe(true);
      expect(await nodeA.get(I, 'shared')).toBeUndefined();
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  it('never lets two nodes associating one user at once both pass the devices-per-user limit', async () => {
    const url = await freshDatabase();
    const nodes = Array.from({ length: 4 }, () => new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 }));
    try {
      for (let k = 0; k < 8; k++) await nodes[0]!.register({ instanceId: I, deviceId: `race-${k}`, platform: 'fcm', token: `tok-${k}` });
      // Every node has counted 0 devices elsewhere; the limit is 3.
      const outcomes = await Promise.all(Array.from({ length: 8 }, (_, k) => nodes[k % 4]!.setUserWithinLimit(I, `race-${k}`, 'gina', 0, 3)));
      expect(outcomes.filter((o) => o === 'ok')).toHaveLength(3);
      expect(outcomes.filter((o) => o === 'limit')).toHaveLength(5);
      expect(await nodes[1]!.countUserDevices(I, 'gina')).toBe(3);
    } finally {
      for (const node of nodes) await node.close();
    }
  });

  it('commits registrations in flight together, and a registration PostgreSQL refuses fails alone', async () => {
    const url = await freshDatabase();
    const store = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    try {
      await store.ready();
      const answers = await Promise.allSettled([
        ...Array.from({ length: 20 }, (_, k) => store.register({ instanceId: I, deviceId: `ok-${k}`, platform: 'fcm', token: `tok-${k}` })),
        // A NUL character is not valid in a PostgreSQL text value.
        store.register({ instanceId: I, deviceId: 'bad', platform: 'fcm', token: 'tok\u0000' }),
        store.register({ instanceId: I, deviceId: 'ok-last', platform: 'fcm', token: 'tok' }),
      ]);
      expect(answers.filter((a) => a.status === 'fulfilled')).toHaveLength(21);
      expect(answers[20]!.status).toBe('rejected');
      expect(await store.get(I, 'ok-last')).toMatchObject({ token: 'tok' });
      expect(await store.get(I, 'bad')).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('keeps one installation secret for every node: the first to ask gives its own', async () => {
    const url = await freshDatabase();
    const nodeA = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    const nodeB = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 2 });
    try {
      expect(await nodeA.installSecret('aa'.repeat(32))).toBe('aa'.repeat(32));
      expect(await nodeB.installSecret('bb'.repeat(32))).toBe('aa'.repeat(32));
      expect(await nodeA.installSecret('cc'.repeat(32))).toBe('aa'.repeat(32));
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  it('migrates once when many shards start at once, records the version, and refuses a newer schema', async () => {
    const url = await freshDatabase();
    const stores = Array.from({ length: 8 }, (_, shardIndex) => new PostgresDeviceStore({ url, shardIndex, shardCount: 8 }));
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    try {
      await Promise.all(stores.map((s) => s.ready()));
      const { rows } = await pool.query<{ version: number }>('SELECT version FROM herald_schema_migrations ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(MIGRATIONS.map((m) => m.version));
      expect(await migrate(pool)).toEqual([]);
      await pool.query('INSERT INTO herald_schema_migrations (version, name) VALUES ($1, $2)', [SCHEMA_VERSION + 1, 'from the future']);
      await expect(migrate(pool)).rejects.toThrow(/newer than this Herald knows/);
    } finally {
      await pool.end();
      for (const s of stores) await s.close();
    }
  });

  it('fails a migration whose connection the server drops, without an unhandled error, and applies it on the next try', async () => {
    const url = await freshDatabase();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    const slow = [{ version: 1, name: 'slow', sql: 'SELECT pg_sleep(30)' }];
    try {
      const migrating = migrate(pool, slow);
      migrating.catch(() => undefined);
      const pid = await until(
        async () => (await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'")).rows[0]?.pid,
        'the migration running',
      );
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await expect(migrating).rejects.toThrow();
      expect(await migrate(pool, [{ version: 1, name: 'quick', sql: 'SELECT 1' }])).toEqual([1]);
    } finally {
      await pool.end();
      await admin.end();
    }
  });

  it('migrates a version-1 database in place: its subscriptions keep being scanned, with what their devices hold', async () => {
    const url = await freshDatabase();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const store = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    try {
      expect(await migrate(pool, MIGRATIONS.slice(0, 1))).toEqual([1]);
      await pool.query(
        `INSERT INTO herald_push_devices (instance_id, device_id, shard_hash, platform, token, bundle_identifier, user_id, created_at, interest_count)
         VALUES ($1, 'old', $2, 'apns', 'tok', 'com.example', 'alice', 0, 1)`,
        [I, fnv1a32('old')],
      );
      await pool.query(`INSERT INTO herald_push_device_interests (instance_id, device_id, interest) VALUES ($1, 'old', 'news')`, [I]);
      await store.ready();
      const step = await store.scanInterestSteps(I, ['news']).next();
      expect(step.value).toEqual({
        device: { id: 'old', instanceId: I, platform: 'apns', token: 'tok', bundleIdentifier: 'com.example', userId: 'alice' },
        position: { listIndex: 0, afterDeviceId: 'old' },
      });
      expect(await store.checkConsistency()).toEqual([]);
    } finally {
      await pool.end();
      await store.close();
    }
  });

  it('never leaves a subscription carrying a stale token or user when two nodes change one device at once', async () => {
    const url = await freshDatabase();
    const nodeA = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    const nodeB = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    try {
      await nodeA.register({ instanceId: I, deviceId: 'busy', platform: 'fcm', token: 'tok' });
      for (let k = 0; k < 20; k++) {
        await Promise.all([
          nodeA.addInterest(I, 'busy', `a-${k}`),
          nodeB.setToken(I, 'busy', `tok-${k}`),
          nodeA.replaceInterests(I, 'busy', [`r-${k}`, ...Array.from({ length: k }, (_, j) => `a-${j}`)]),
          k % 2 ? nodeB.setUser(I, 'busy', `user-${k}`) : nodeB.register({ instanceId: I, deviceId: 'busy', platform: 'apns', token: `reg-${k}`, bundleIdentifier: 'com.example' }),
        ]);
        expect(await nodeA.checkConsistency(), `round ${k}`).toEqual([]);
      }
    } finally {
      await nodeA.close();
      await nodeB.close();
    }
  });

  it('fails a transaction whose connection the server drops between two statements, without an unhandled error', async () => {
    const url = await freshDatabase();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const admin = new pg.Pool({ connectionString: url, max: 1 });
    try {
      const outcome = inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const pid = rows[0]!.pid;
        await admin.query('SELECT pg_terminate_backend($1)', [pid]);
        await until(async () => (await admin.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rowCount === 0, 'the backend gone');
        await client.query('SELECT 1');
      });
      await expect(outcome).rejects.toMatchObject({ code: 'PUSH_STORE_UNAVAILABLE' });
      // The pool replaced the dropped connection.
      expect((await pool.query<{ n: number }>('SELECT 1 AS n')).rows).toEqual([{ n: 1 }]);
    } finally {
      await pool.end();
      await admin.end();
    }
  });

  it('answers PUSH_STORE_UNAVAILABLE while the server is away and recovers without a restart', async () => {
    const url = await freshDatabase();
    const store = new PostgresDeviceStore({ url, shardIndex: 0, shardCount: 1 });
    try {
      await store.register({ instanceId: I, deviceId: 'before', platform: 'fcm', token: 'tok' });
      await postgres().stop();
      let failure: unknown;
      try {
        await store.get(I, 'before');
      } catch (err) {
        failure = err;
      } finally {
        await postgres().start();
      }
      expect(failure).toBeInstanceOf(HeraldError);
      expect((failure as HeraldError).code).toBe('PUSH_STORE_UNAVAILABLE');
      // The pool drops the dead connections; the next requests reconnect.
      let device;
      for (let attempt = 0; attempt < 20 && device === undefined; attempt++) device = await store.get(I, 'before').catch(() => undefined);
      expect(device).toMatchObject({ id: 'before' });
    } finally {
      await store.close();
    }
  });
});
