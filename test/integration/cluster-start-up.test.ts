/**
 * Start-up of a cluster node (issue 14, docs/scaling.md): a node that cannot reach Redis refuses
 * to start, naming the URL with its password masked. Push in a cluster needs the shared
 * PostgreSQL (`cluster.postgresUrl`): without it, or with one it cannot reach, a node with push
 * instances refuses to start and says why (test/integration/cluster-push.test.ts serves push
 * from every node).
 */
import { describe, expect, it } from 'vitest';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH, HeraldProcess } from '../helpers/herald-process.js';
import { filePostgresServer } from '../helpers/file-postgres.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';

const APP = { id: 'lease-app', key: 'lease-key', secret: 'lease-secret' };
const bed = heraldClusterBed('start');
const postgres = filePostgresServer();

describe('a node whose Redis is unreachable', () => {
  it('refuses to start, naming the URL with the password masked', async () => {
    const url = `redis://:hunter2-secret@127.0.0.1:${await freePort()}`;
    const node = new HeraldProcess({ config: { apps: [APP], push: [], cluster: { redisUrl: url, keyPrefix: 'nowhere:', nodeId: 'node-x' } }, shards: 1 });
    try {
      const refused = await node.start().then(
        () => null,
        (err: unknown) => err,
      );
      expect(refused, 'the node must refuse to start').toBeInstanceOf(Error);
      expect(String(refused)).toMatch(/exited with [1-9]\d* before listening/);
      expect(node.stderr + node.stdout).toMatch(/127\.0\.0\.1:\d+/);
      expect(node.stderr + node.stdout).not.toContain('hunter2-secret');
      // One line with the cause and the setting, and no shard warning before it (the shards
      // stop at once rather than waiting for a Redis that refuses them).
      expect(node.stderr).toContain('connection refused: nothing listens there (ECONNREFUSED)');
      expect(node.stderr).toContain('check cluster.redisUrl (or HERALD_REDIS_URL)');
      expect(node.stderr).not.toContain('shard request failed');
      expect(node.stderr).not.toContain('shard close failed');
    } finally {
      await node.dispose();
    }
  });
});

describe.skipIf(ONE_PROCESS)('Redis eviction policy', () => {
  const EVICTION_WARNING = /Redis may evict Herald's keys/;

  it('a node warns at start-up when Redis may evict keys (maxmemory-policy not noeviction), and not otherwise', async () => {
    const evicting = await new RedisServer({ args: ['--maxmemory', '64mb', '--maxmemory-policy', 'allkeys-lru'] }).start();
    const config = (redisUrl: string, nodeId: string) => ({ apps: [APP], push: [], cluster: { redisUrl, keyPrefix: 'evict:', nodeId } });
    const warned = new HeraldProcess({ config: config(evicting.url, 'node-evict'), shards: 1 });
    const quiet = new HeraldProcess({ config: config(bed.redis.url, 'node-noevict'), shards: 1 });
    try {
      await Promise.all([warned.start(), quiet.start()]);
      // Logged before the node listens (start() resolved): on stderr already.
      expect(warned.stderr).toMatch(EVICTION_WARNING);
      expect(warned.stderr).toMatch(/"maxmemoryPolicy":"allkeys-lru"/);
      expect(quiet.stdout + quiet.stderr).not.toMatch(EVICTION_WARNING);
    } finally {
      await Promise.allSettled([warned.dispose(), quiet.dispose()]);
      await evicting.stop();
    }
  });
});

describe.skipIf(ONE_PROCESS)('push in a cluster', () => {
  it('a cluster node with push instances and no cluster.postgresUrl refuses to start, naming the setting', async () => {
    const cluster = bed.create({ apps: [APP], push: [[DEFAULT_PUSH]] });
    const refused = await cluster.a.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused, 'the node must refuse to start').toBeInstanceOf(Error);
    expect(String(refused)).toMatch(/exited with [1-9]\d* before listening/);
    expect(cluster.a.stderr).toContain('cluster.postgresUrl');
    expect(cluster.a.stderr).toContain('HERALD_POSTGRES_URL');
  });

  it('a node given a database that does not exist says so in one line, naming the setting', async () => {
    const url = new URL(postgres().url('nosuchdb'));
    const cluster = bed.create({ apps: [APP], push: [[DEFAULT_PUSH]], postgresUrl: url.toString() });
    const refused = await cluster.a.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused, 'the node must refuse to start').toBeInstanceOf(Error);
    expect(cluster.a.stderr).toContain('PostgreSQL refused Herald: database "nosuchdb" does not exist (SQLSTATE 3D000); check cluster.postgresUrl (or HERALD_POSTGRES_URL)');
    expect(cluster.a.stderr).not.toContain('Internal error in storage shard');
    expect(cluster.a.stderr).not.toContain('shard handler failed');
  });

  it('a node whose PostgreSQL is unreachable refuses to start, naming the URL with the password masked', async () => {
    const url = `postgres://herald:hunter2-secret@127.0.0.1:${await freePort()}/herald`;
    const cluster = bed.create({ apps: [APP], push: [[DEFAULT_PUSH]], postgresUrl: url });
    const refused = await cluster.a.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused, 'the node must refuse to start').toBeInstanceOf(Error);
    expect(cluster.a.stderr).toContain(`postgres://herald:***@127.0.0.1:`);
    expect(cluster.a.stderr).not.toContain('hunter2-secret');
  });
});
