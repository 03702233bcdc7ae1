/**
 * The tests' private redis-server writes nowhere in the working tree: it runs in a temporary
 * directory of its own (a replica's full sync writes an RDB file into the server's directory,
 * which was the current directory, the repository root), removed when it stops.
 */
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { afterAll, describe, expect, it } from 'vitest';
import { RedisServer } from '../../helpers/redis-server.js';
import { until } from '../../helpers/wait.js';

const servers: RedisServer[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()));
});

describe('RedisServer', () => {
  it('runs in a temporary dir of its own, where a replica writes its RDB, and removes it on stop', async () => {
    const master = await new RedisServer().start();
    servers.push(master);
    const replica = await new RedisServer({ args: ['--replicaof', '127.0.0.1', String(master.port)] }).start();
    servers.push(replica);
    const client = replica.client();
    try {
      const [, dir] = (await client.config('GET', 'dir')) as [string, string];
      expect(realpathSync(dir).startsWith(realpathSync(tmpdir()))).toBe(true);
      expect(realpathSync(dir)).not.toBe(realpathSync(process.cwd()));
      await until(async () => /master_link_status:up/.test(await client.info('replication')), 'the replica in sync', 10_000);
      // The full sync loaded an RDB file, kept in the replica's own dir.
      await until(() => readdirSync(dir).some((f) => f.endsWith('.rdb')), 'the replica RDB file', 10_000);
      await replica.stop();
      expect(existsSync(dir)).toBe(false);
    } finally {
      client.disconnect();
    }
  });
});
