/**
 * Start-up of a cluster node (issue 14, docs/scaling.md): a node that cannot reach Redis refuses
 * to start, naming the URL with its password masked. Push in a cluster: each push instance is
 * served by exactly one node, holding a lease in Redis; a node configured with an instance a
 * live node serves refuses to start (after waiting up to twice nodeTimeoutMs), and once the
 * holder is gone (SIGKILL: its lease lapses) the node starts and serves it.
 */
import { describe, expect, it } from 'vitest';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH, HeraldProcess } from '../helpers/herald-process.js';
import { freePort, RedisServer } from '../helpers/redis-server.js';
import { beamsSdk } from '../helpers/sdk-clients.js';

const APP = { id: 'lease-app', key: 'lease-key', secret: 'lease-secret' };
const bed = heraldClusterBed('start');

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

describe.skipIf(ONE_PROCESS)('push instance lease', () => {
  it('a second node serving the same push instance refuses to start while the first lives, and starts once it is killed', async () => {
    const cluster = bed.create({ apps: [APP], push: [[DEFAULT_PUSH], [DEFAULT_PUSH]], nodeTimeoutMs: 1000 });
    await cluster.a.start();
    const refused = await cluster.b.start().then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused, 'node B must refuse to start while node A holds the instance').toBeInstanceOf(Error);
    expect(String(refused)).toMatch(/exited with [1-9]\d* before listening/);
    expect(cluster.b.stderr).toContain(DEFAULT_PUSH.instanceId);
    // It said it was waiting for the holder's lease, then what to change.
    expect(cluster.b.stdout + cluster.b.stderr).toContain('waiting for its lease to lapse');
    expect(cluster.b.stderr).toContain('give the other nodes "push": []');
    expect(cluster.b.stderr).toContain('built-in development instance');

    await cluster.killNode(cluster.a);
    await cluster.b.start();
    // Node B serves the instance now (a node without it answers 404 INSTANCE_NOT_FOUND).
    await beamsSdk(cluster.b.port).deleteUser('someone');
  });
});
