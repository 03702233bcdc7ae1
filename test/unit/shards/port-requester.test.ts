/**
 * PortShardRequester against a real ShardPool (compiled workers, temp data dir): a front end's
 * requests go over its own ports (ShardPool.attachFrontEnd) and are answered as the pool's
 * are; a request past its timeout fails with SHARD_UNAVAILABLE and is not run; a crashed shard
 * worker fails the requests held on its port, the pool hands a fresh port (onFrontEndPort),
 * and replacePort makes the restart listener's request the first on it; a replaced worker
 * holds every front end's other requests until each has restored; a real worker thread makes
 * requests over transferred ports.
 */
import { Worker, type MessagePort } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PortShardRequester as PortShardRequesterClass } from '../../../src/shards/port-requester.js';
import type { HeraldShardApi } from '../../../src/shard-api.js';
import { distModule, loadShardModules, newShardPool, outcome, removeShardPoolDirs, SHARD_POOL_APP_ID as APP_ID, withTestHooks } from '../../helpers/shard-pool.js';
import { nextEvent, until } from '../../helpers/wait.js';

type RequesterModule = typeof import('../../../src/shards/port-requester.js');
type Requester = PortShardRequesterClass<HeraldShardApi>;

let PortShardRequester: RequesterModule['PortShardRequester'];

beforeAll(async () => {
  await loadShardModules();
  ({ PortShardRequester } = (await import(distModule('shards/port-requester.js'))) as RequesterModule);
}, 120_000);
afterAll(removeShardPoolDirs);

function requester(ports: MessagePort[], requestTimeoutMs = 30_000, maxQueuePerShard?: number): Requester {
  return new PortShardRequester<HeraldShardApi>(ports, { requestTimeoutMs, ...(maxQueuePerShard === undefined ? {} : { maxQueuePerShard }) });
}

function subscribe(channel: string, socketId = '1.1') {
  return { type: 'channels.subscribe' as const, appId: APP_ID, channel, socketId };
}

const LIST = { type: 'channels.list' as const, appId: APP_ID, withUserCount: false };

describe('PortShardRequester on a real pool', () => {
  it('gets answers over its own ports, errors included, and refuses once closed', async () => {
    const pool = await newShardPool(2);
    const front = requester(await pool.attachFrontEnd(1));
    try {
      expect(front.shardCount).toBe(2);
      expect((await front.broadcast({ type: 'core.ping' })).map((p) => p.shardIndex)).toEqual([0, 1]);
      // The same shard state as the pool's own requests see.
      await front.request(1, subscribe('over-port'));
      expect((await pool.request(1, LIST)).names).toEqual(['over-port']);
      expect((await front.request(1, LIST)).names).toEqual(['over-port']);
      // An error reply keeps its catalogue code (test hooks are off here).
      expect(await outcome(front.request(0, { type: 'core.stall', stallMs: 1 }))).toBe('ROUTE_NOT_FOUND');
      expect(front.inFlightCount(0)).toBe(0);
      expect(front.accepting).toBe(true);
    } finally {
      front.close();
    }
    expect(front.accepting).toBe(false);
    expect(await outcome(front.request(0, { type: 'core.ping' }))).toBe('SHARD_UNAVAILABLE');
    await pool.close();
  }, 30_000);

  it('fails a request past its timeout with SHARD_UNAVAILABLE, does not run it late, and bounds what is in flight', async () => {
    await withTestHooks('1', async () => {
      const pool = await newShardPool(1);
      const front = requester(await pool.attachFrontEnd(1), 30_000, 5);
      try {
        const stall = front.request(0, { type: 'core.stall', stallMs: 600 }, 5000);
        const late = Array.from({ length: 3 }, (_, i) => outcome(front.request(0, subscribe(`late-${i}`), 100)));
        expect(await Promise.all(late)).toEqual(['SHARD_UNAVAILABLE', 'SHARD_UNAVAILABLE', 'SHARD_UNAVAILABLE']);
        // Timed out but still held by the worker: they count until it answers them.
        expect(front.inFlightCount(0)).toBe(4);
        const started = Date.now();
        const accepted = outcome(front.request(0, { type: 'core.ping' }));
        expect(await outcome(front.request(0, { type: 'core.ping' }))).toBe('SHARD_UNAVAILABLE'); // the 6th
        expect(Date.now() - started).toBeLessThan(300); // refused at once, not after the stall
        expect(await stall).toEqual({ stalledMs: 600 });
        expect(await accepted).toBe('ok');
        // The shard reached the subscribes after their deadline: it ran none of them.
        expect((await front.request(0, LIST)).names).toEqual([]);
        await until(() => front.inFlightCount(0) === 0, 'the late answers');
      } finally {
        front.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('after a crash: held requests fail, the pool hands a new port, and the restart listener goes first on it', async () => {
    await withTestHooks('1', async () => {
      const pool = await newShardPool(2);
      const front = requester(await pool.attachFrontEnd(7));
      const answered: string[] = [];
      const portsGiven: [number, number][] = [];
      let afterRestart: Promise<unknown> | undefined;
      front.onShardRestart((shard) => {
        void front.request(shard, subscribe('restored', '1.2')).then(() => answered.push('restore'));
      });
      pool.onFrontEndPort((frontEnd, shard, port) => {
        portsGiven.push([frontEnd, shard]);
        front.replacePort(shard, port);
        afterRestart = front.request(shard, LIST).then((list) => {
          answered.push('after');
          return list.names;
        });
      });
      try {
        const started = Date.now();
        const crash = outcome(front.request(0, { type: 'core.crash', stallMs: 300 }));
        const held = Array.from({ length: 20 }, () => outcome(front.request(0, { type: 'core.ping' })));
        const other = Array.from({ length: 5 }, () => outcome(front.request(1, { type: 'core.ping' })));
        expect(await crash).toBe('SHARD_UNAVAILABLE');
        expect(await Promise.all(held)).toEqual(held.map(() => 'SHARD_UNAVAILABLE'));
        expect(Date.now() - started).toBeLessThan(5000); // far from the 30 s timeout
        expect(await Promise.all(other)).toEqual(other.map(() => 'ok'));

        await until(() => afterRestart, 'the new port');
        expect(portsGiven).toEqual([[7, 0]]);
        // The listener's restore was the first request on the new port: the list sent right
        // after replacePort already sees it.
        expect(await afterRestart).toEqual(['restored']);
        expect(answered).toEqual(['restore', 'after']);
        const ping = await front.request(0, { type: 'core.ping' });
        expect(ping.uptimeMs).toBeLessThan(Date.now() - started);
        expect(front.inFlightCount(0)).toBe(0);
      } finally {
        front.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('a request made while the new port is on its way waits for it, as the pool\'s own requests wait for a new worker', async () => {
    await withTestHooks('1', async () => {
      const pool = await newShardPool(1);
      const front = requester(await pool.attachFrontEnd(4));
      let newPort: MessagePort | undefined;
      pool.onFrontEndPort((_frontEnd, _shard, port) => (newPort = port)); // handed over below
      try {
        expect(await outcome(front.request(0, { type: 'core.crash' }))).toBe('SHARD_UNAVAILABLE');
        // The old port is closed and the new one not handed over yet.
        let answered = '';
        const waiting = outcome(front.request(0, subscribe('while-restarting'))).then((o) => (answered = o));
        await until(() => newPort !== undefined, 'the new port');
        expect(answered).toBe('');
        expect(front.inFlightCount(0)).toBe(1);
        front.replacePort(0, newPort!);
        expect(await waiting).toBe('ok');
        expect((await front.request(0, LIST)).names).toEqual(['while-restarting']);
      } finally {
        front.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('a replacement worker slower to start than the request timeout still takes the new port', async () => {
    await withTestHooks('1', async () => {
      // 150 ms: far less than a worker takes to start, so the re-attach waits past its timeout.
      const pool = await newShardPool(1, 150);
      const front = requester(await pool.attachFrontEnd(3), 150);
      let given = 0;
      pool.onFrontEndPort((_frontEnd, shard, port) => {
        given++;
        front.replacePort(shard, port);
      });
      try {
        expect(await outcome(pool.request(0, { type: 'core.crash' }, 5000))).toBe('SHARD_UNAVAILABLE');
        await until(() => given === 1, 'the new port');
        // Once the new worker is up, this front end's line to it works: nothing closed or dropped the port.
        let last = '';
        await until(
          async () => (last = await outcome(front.request(0, { type: 'core.ping' }, 2000))) === 'ok',
          () => `a ping answered over the new port (last: ${last})`,
          15_000,
        );
        expect(given).toBe(1);
      } finally {
        front.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('a replaced worker runs no front end request past its restore until every front end has restored', async () => {
    await withTestHooks('1', async () => {
      const pool = await newShardPool(1);
      const first = requester(await pool.attachFrontEnd(1));
      const second = requester(await pool.attachFrontEnd(2));
      let firstRestore: Promise<unknown> | undefined;
      let firstList: Promise<{ names: string[] }> | undefined;
      let secondPort: MessagePort | undefined;
      first.onShardRestart((shard) => {
        firstRestore = first.request(shard, subscribe('restore-1', '1.1'));
      });
      second.onShardRestart((shard) => second.send(shard, subscribe('restore-2', '2.1')));
      pool.onFrontEndPort((frontEnd, shard, port) => {
        if (frontEnd === 2) {
          secondPort = port; // handed over late, below
          return;
        }
        first.replacePort(shard, port);
        firstList = first.request(shard, LIST); // posted with the restore: it reaches the worker with it
      });
      try {
        expect(await outcome(first.request(0, { type: 'core.crash' }))).toBe('SHARD_UNAVAILABLE');
        await until(() => firstRestore && secondPort, 'both new ports');
        // The first front end's restore is run (its own restore phase is never held) ...
        await firstRestore;
        let listed: string[] | undefined;
        void firstList!.then((list) => (listed = list.names));
        // ... and its list, which reached the worker with it, waits for the second's restore.
        second.replacePort(0, secondPort!);
        expect((await firstList!).names).toEqual(['restore-1', 'restore-2']);
        expect(listed).toEqual(['restore-1', 'restore-2']);
        expect((await second.request(0, LIST)).names).toEqual(['restore-1', 'restore-2']);
      } finally {
        first.close();
        second.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('a front end that never restores holds the others no longer than the shard request timeout', async () => {
    await withTestHooks('1', async () => {
      const pool = await newShardPool(1, 30_000, undefined, { shardRequestTimeoutMs: 600 });
      const first = requester(await pool.attachFrontEnd(1));
      await pool.attachFrontEnd(2); // its ports are never used: it never restores
      let firstList: Promise<{ names: string[] }> | undefined;
      first.onShardRestart((shard) => first.send(shard, subscribe('restore-1', '1.1')));
      pool.onFrontEndPort((frontEnd, shard, port) => {
        if (frontEnd !== 1) return; // the second front end's new port is dropped, left open
        first.replacePort(shard, port);
        firstList = first.request(shard, LIST, 20_000);
      });
      try {
        expect(await outcome(first.request(0, { type: 'core.crash' }))).toBe('SHARD_UNAVAILABLE');
        await until(() => firstList !== undefined, 'the new port');
        const started = Date.now();
        // Held while the second front end is awaited, then run once the hold's bound passed.
        expect((await firstList!).names).toEqual(['restore-1']);
        expect(Date.now() - started).toBeLessThan(10_000);
      } finally {
        first.close();
        await pool.close();
      }
    });
  }, 30_000);

  it('detachFrontEnd closes the front end ports: its requests are refused at once', async () => {
    const pool = await newShardPool(2);
    const front = requester(await pool.attachFrontEnd(3));
    try {
      await front.broadcast({ type: 'core.ping' });
      await pool.detachFrontEnd(3);
      await until(async () => (await outcome(front.request(1, { type: 'core.ping' }))) === 'SHARD_UNAVAILABLE', 'the port closed');
      // At once: no new port will come, so nothing waits for one (the timeout is 30 s).
      const started = Date.now();
      expect(await outcome(front.request(0, { type: 'core.ping' }))).toBe('SHARD_UNAVAILABLE');
      expect(Date.now() - started).toBeLessThan(1000);
    } finally {
      front.close();
      await pool.close();
    }
  }, 30_000);

  it('serves a worker thread the ports were transferred to', async () => {
    const pool = await newShardPool(2);
    const ports = await pool.attachFrontEnd(4);
    const thread = new Worker(
      `
      const { parentPort, workerData } = require('node:worker_threads');
      (async () => {
        const { PortShardRequester } = await import(workerData.module);
        const shards = new PortShardRequester(workerData.ports, { requestTimeoutMs: 30000 });
        const pings = await shards.broadcast({ type: 'core.ping' });
        await shards.request(1, { type: 'channels.subscribe', appId: workerData.appId, channel: 'from-thread', socketId: '4.1' });
        shards.close();
        parentPort.postMessage({ shards: pings.map((p) => p.shardIndex) });
      })().catch((err) => parentPort.postMessage({ error: String(err) }));
      `,
      { eval: true, workerData: { ports, module: distModule('shards/port-requester.js'), appId: APP_ID }, transferList: ports },
    );
    // Listened for from the start: the thread ends right after its reply.
    const exited = nextEvent(thread, 'exit', 'the thread exit', 20_000);
    try {
      expect(await nextEvent(thread, 'message', 'the thread reply', 20_000)).toEqual({ shards: [0, 1] });
      expect((await pool.request(1, LIST)).names).toEqual(['from-thread']);
      // It closed its requester: nothing of ours keeps it alive.
      expect(await exited).toBe(0);
    } finally {
      await thread.terminate();
      await pool.close();
    }
  }, 30_000);
});
