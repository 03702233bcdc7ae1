/**
 * The hooks of a test file that needs one private redis-server (test/helpers/redis-server.ts):
 * started before the file's first test, stopped after its last. Kept apart from
 * redis-server.ts, which the benchmarks also use, outside vitest.
 */
import { afterAll, beforeAll } from 'vitest';
import { RedisServer } from './redis-server.js';

/** Registers the hooks; the returned function gives the server (from the first test on). */
export function fileRedisServer(): () => RedisServer {
  let redis: RedisServer | undefined;
  beforeAll(async () => {
    redis = await new RedisServer().start();
  });
  afterAll(async () => {
    await redis?.stop();
  });
  return () => {
    if (!redis) throw new Error('the redis-server starts in beforeAll');
    return redis;
  };
}
