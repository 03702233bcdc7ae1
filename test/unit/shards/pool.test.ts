/**
 * ShardPool with real shard workers: the compiled pool and worker (dist/src/shards, built by
 * the shard-pool helper when older than src/) on a temp data dir. Covers the close ordering (requests already
 * sent finish before the shards close), a crashed worker (the requests it held fail at once
 * with SHARD_UNAVAILABLE, a new worker takes over, restart listeners are told), and a stalled
 * one (requests past their deadline are not run; a full queue refuses at once; close() keeps
 * to its budget).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadShardModules, newShardPool as newPool, outcome, removeShardPoolDirs, SHARD_POOL_APP_ID as APP_ID, withTestHooks } from '../../helpers/shard-pool.js';
import { sleep } from '../../helpers/wait.js';

beforeAll(loadShardModules, 120_000);
afterAll(removeShardPoolDirs);

/** Runs `fn` with what this process writes to stderr (Herald's log lines) captured. */
async function withStderr<T>(fn: () => Promise<T>): Promise<{ result: T; stderr: string }> {
  const original = process.stderr.write.bind(process.stderr);
  let captured = '';
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    captured += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return (original as (...args: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  try {
    return { result: await fn(), stderr: captured };
  } finally {
    process.stderr.write = original;
  }
}

describe('ShardPool.close', () => {
  it('lets every request already sent finish before the shards close: 3000 pings then close()', async () => {
    const pool = await newPool(2);
    const { result, stderr } = await withStderr(async () => {
      // 1500 per shard: more than the 1024 a worker takes at once, so some wait in Piscina's queue.
      const pings = Array.from({ length: 3000 }, (_, i) => outcome(pool.request(i % 2, { type: 'core.ping' })));
      const closed = pool.close();
      expect(pool.close()).toBe(closed); // a second close() waits for the same one
      const outcomes = await Promise.all(pings);
      await closed;
      return { outcomes, after: await outcome(pool.request(0, { type: 'core.ping' })) };
    });
    expect(result.outcomes.filter((o) => o !== 'ok')).toEqual([]);
    // Closed: new requests are refused cleanly.
    expect(result.after).toBe('SHARD_UNAVAILABLE');
    expect(stderr).not.toMatch(/Unexpected message from Worker|Terminating worker thread|Shard is closing|shard worker error/);
  }, 30_000);
});

describe('a crashed shard worker', () => {
  it('fails the requests it held at once, is replaced, and the pool says so', async () => {
    await withTestHooks('1', async () => {
      const pool = await newPool(2);
      try {
        const restarts: number[] = [];
        pool.onShardRestart((shard) => restarts.push(shard));
        const before = await pool.request(0, { type: 'core.ping' });

        const started = Date.now();
        // The worker blocks for 300 ms then exits: the pings sent meanwhile are held by it.
        const crash = outcome(pool.request(0, { type: 'core.crash', stallMs: 300 }));
        // time: the crash request reaches the worker, which then blocks for 300 ms.
        await sleep(50);
        const held = Array.from({ length: 50 }, () => outcome(pool.request(0, { type: 'core.ping' })));
        const other = Array.from({ length: 10 }, () => outcome(pool.request(1, { type: 'core.ping' })));
        expect(await crash).toBe('SHARD_UNAVAILABLE');
        expect(await Promise.all(held)).toEqual(held.map(() => 'SHARD_UNAVAILABLE'));
        // Promptly: the stall plus a little, far from the 30 s request timeout.
        expect(Date.now() - started).toBeLessThan(3000);
        expect(await Promise.all(other)).toEqual(other.map(() => 'ok')); // the other shard is untouched
        expect(restarts).toEqual([0]);

        // The replacement answers, started after the crash (the old worker was up before `started`).
        const after = await pool.request(0, { type: 'core.ping' });
        expect(after.shardIndex).toBe(0);
        expect(before.shardIndex).toBe(0);
        expect(after.uptimeMs).toBeLessThan(Date.now() - started - 250);

        // And a replacement can crash and be replaced too.
        expect(await outcome(pool.request(0, { type: 'core.crash' }))).toBe('SHARD_UNAVAILABLE');
        expect(await outcome(pool.request(0, { type: 'core.ping' }))).toBe('ok');
        expect(restarts).toEqual([0, 0]);
      } finally {
        await pool.close();
      }
    });
  }, 30_000);

  it('is refused without HERALD_TEST_HOOKS=1: the worker answers an error and keeps running', async () => {
    await withTestHooks(undefined, async () => {
      const pool = await newPool(1);
      try {
        const restarts: number[] = [];
        pool.onShardRestart((shard) => restarts.push(shard));
        const before = await pool.request(0, { type: 'core.ping' });
        expect(await outcome(pool.request(0, { type: 'core.crash' }))).toBe('ROUTE_NOT_FOUND');
        const after = await pool.request(0, { type: 'core.ping' });
        expect(after.uptimeMs).toBeGreaterThanOrEqual(before.uptimeMs); // the same worker
        expect(restarts).toEqual([]);
      } finally {
        await pool.close();
      }
    });
  }, 30_000);
});

describe('a stalled shard', () => {
  it('does not run the requests that timed out while it was blocked', async () => {
    await withTestHooks('1', async () => {
      const pool = await newPool(1);
      try {
        const stall = pool.request(0, { type: 'core.stall', stallMs: 600 }, 5000);
        // time: the stall reaches the worker, which then blocks.
        await sleep(50); // the worker is blocked now
        const late = Array.from({ length: 20 }, (_, i) =>
          outcome(pool.request(0, { type: 'channels.subscribe', appId: APP_ID, channel: `late-${i}`, socketId: `1.${i}` }, 100)),
        );
        expect(await Promise.all(late)).toEqual(late.map(() => 'SHARD_UNAVAILABLE'));
        expect(await stall).toEqual({ stalledMs: 600 });
        // The shard reached the 20 subscribes after their deadline: it recorded none of them.
        expect((await pool.request(0, { type: 'channels.list', appId: APP_ID, withUserCount: false })).names).toEqual([]);
        // A request that is on time still runs.
        await pool.request(0, { type: 'channels.subscribe', appId: APP_ID, channel: 'on-time', socketId: '2.1' });
        expect((await pool.request(0, { type: 'channels.list', appId: APP_ID, withUserCount: false })).names).toEqual(['on-time']);
      } finally {
        await pool.close();
      }
    });
  }, 30_000);

  it('is told that the server serves even when the notice reaches it past its deadline, and the start goes on', async () => {
    await withTestHooks('1', async () => {
      const pool = await newPool(1, 200, undefined, {}, { holdUntilServing: true });
      try {
        expect((await pool.request(0, { type: 'core.ping' })).serving).toBe(false);
        const stall = pool.request(0, { type: 'core.stall', stallMs: 600 }, 5000);
        // time: the stall reaches the worker, which then blocks.
        await sleep(50);
        // The worker answers after the pool's 200 ms: the notice does not fail the caller.
        await pool.markServing();
        await stall;
        expect((await pool.request(0, { type: 'core.ping' })).serving).toBe(true);
      } finally {
        await pool.close();
      }
    });
  }, 30_000);

  it('refuses requests at once with SHARD_UNAVAILABLE once its queue is full', async () => {
    await withTestHooks('1', async () => {
      const pool = await newPool(1, 30_000, 10);
      try {
        const stall = pool.request(0, { type: 'core.stall', stallMs: 500 });
        // time: the stall reaches the worker, which then blocks.
        await sleep(50);
        // 1024 go to the blocked worker (Piscina's per-worker window), 10 wait in the queue.
        const accepted = Array.from({ length: 1023 + 10 }, () => outcome(pool.request(0, { type: 'core.ping' })));
        const started = Date.now();
        const refused = await Promise.all(Array.from({ length: 5 }, () => outcome(pool.request(0, { type: 'core.ping' }))));
        expect(refused).toEqual(refused.map(() => 'SHARD_UNAVAILABLE'));
        expect(Date.now() - started).toBeLessThan(300); // not after the stall: at once
        await stall;
        expect((await Promise.all(accepted)).filter((o) => o !== 'ok')).toEqual([]);
        expect(await outcome(pool.request(0, { type: 'core.ping' }))).toBe('ok');
      } finally {
        await pool.close();
      }
    });
  }, 30_000);

  it('keeps close() within its budget when a shard is stuck', async () => {
    await withTestHooks('1', async () => {
      const pool = await newPool(2);
      const stall = outcome(pool.request(0, { type: 'core.stall', stallMs: 8000 }, 20_000));
      // time: the stall reaches the worker, which then blocks.
      await sleep(50);
      const started = Date.now();
      await pool.close(1000);
      // Drain and storage close together within the budget (plus stopping the workers).
      expect(Date.now() - started).toBeLessThan(2500);
      expect(await stall).toBe('SHARD_UNAVAILABLE');
    });
  }, 30_000);
});
