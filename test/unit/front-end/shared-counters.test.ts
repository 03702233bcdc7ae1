/**
 * The process-wide counters over SharedArrayBuffers (src/front-end/shared-counters.ts) against
 * their in-memory counterparts: each contract runs the same cases on both. Then what only the
 * shared ones do: one budget for several attached threads (real worker threads hammering the
 * same buffers), a dead thread's connections taken off, slots zeroed and reused.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterEach, describe, expect, it } from 'vitest';
import { HeraldError } from '../../../src/errors.js';
import { MessageQuota } from '../../../src/channels/quota.js';
import { LocalRateCounter } from '../../../src/channels/rate-limits/local-rate-counter.js';
import type { RateCounter } from '../../../src/channels/rate-limits/rate-counter.js';
import { LocalConnectionCounts } from '../../../src/channels/local-connection-counts.js';
import type { ConnectionCounts } from '../../../src/channels/connection-counts.js';
import { SharedCounters, SharedMissBudget } from '../../../src/front-end/shared-counters.js';
import { MissBudget, type MissCounter } from '../../../src/channels/http-fallback/miss-budget.js';
import { nextEvent } from '../../helpers/wait.js';

const APPS = ['a', 'b', 'c'];

/** Thread 0's counters over new buffers, with a slot for each of APPS. */
function attachedThread(now?: () => number): SharedCounters {
  const main = SharedCounters.create({ threads: 2, maxApps: 8, ...(now && { now }) });
  const thread = SharedCounters.attach(main.init, 0, now ? { now } : {});
  for (const app of APPS) thread.setSlot(app, main.assignSlot(app));
  return thread;
}

type Quota = Pick<MessageQuota, 'charge' | 'usedToday' | 'forget'>;

const rateCounters: [string, (now: () => number) => RateCounter][] = [
  ['in memory', (now) => new LocalRateCounter(now)],
  ['shared', (now) => attachedThread(now).rateCounter],
];
const quotas: [string, (now?: () => number) => Quota][] = [
  ['in memory', (now) => new MessageQuota(now)],
  ['shared', (now) => attachedThread(now).quota],
];
const connectionCounts: [string, () => ConnectionCounts][] = [
  ['in memory', () => new LocalConnectionCounts()],
  ['shared', () => attachedThread()],
];

describe.each(rateCounters)('rate counter contract (%s)', (_name, make) => {
  it('takes up to the limit per one-second window, refuses past it with the ms left, and starts afresh next second', () => {
    let now = 10_000;
    const counter = make(() => now);
    for (const key of ['h:a', 'e:a', 'c:a', 'i:a\u0000192.0.2.1']) {
      expect(counter.take(key, 2, 3)).toBe(0);
      expect(counter.take(key, 1, 3)).toBe(0);
    }
    now = 10_250;
    expect(counter.take('h:a', 1, 3)).toBe(750);
    expect(counter.take('i:a\u0000192.0.2.1', 1, 3)).toBe(750);
    // Other keys and apps have their own count; a refusal took nothing.
    expect(counter.take('h:b', 3, 3)).toBe(0);
    expect(counter.take('i:a\u0000192.0.2.2', 3, 3)).toBe(0);
    now = 11_000;
    expect(counter.take('h:a', 3, 3)).toBe(0);
    expect(counter.take('h:a', 1, 3)).toBe(1000);
    expect(counter.take('i:a\u0000192.0.2.1', 3, 3)).toBe(0);
  });

  it('refuses a cost larger than the limit without taking anything', () => {
    const counter = make(() => 5_500);
    expect(counter.take('e:a', 4, 3)).toBe(500);
    expect(counter.take('e:a', 3, 3)).toBe(0);
    expect(counter.take('e:a', 1, 3)).toBe(500);
  });

  it('counts a key of an app it has no slot for too', () => {
    const counter = make(() => 20_000);
    expect(counter.take('c:unknown', 1, 1)).toBe(0);
    expect(counter.take('c:unknown', 1, 1)).toBe(1000);
  });
});

describe.each(quotas)('message quota contract (%s)', (_name, make) => {
  it('refuses a request that would go over, without charging it, and resets at 00:00 UTC', () => {
    let now = Date.UTC(2025, 0, 1, 23, 59, 0);
    const quota = make(() => now);
    const app = { id: 'a', messageQuota: 5 };
    quota.charge(app, 2);
    quota.charge(app, 2);
    let refusal: unknown;
    try {
      quota.charge(app, 2);
    } catch (err) {
      refusal = err;
    }
    expect(refusal).toBeInstanceOf(HeraldError);
    expect((refusal as HeraldError).code).toBe('APP_OVER_QUOTA');
    expect((refusal as HeraldError).status).toBe(403);
    expect((refusal as HeraldError).message).toContain('4 of 5');
    expect(quota.usedToday('a')).toBe(4);
    quota.charge(app, 1);
    expect(quota.usedToday('a')).toBe(5);
    now = Date.UTC(2025, 0, 2, 0, 0, 1);
    expect(quota.usedToday('a')).toBe(0);
    quota.charge(app, 5);
    expect(quota.usedToday('a')).toBe(5);
  });

  it('counts apps separately and does not count apps without a quota', () => {
    const quota = make();
    quota.charge({ id: 'a', messageQuota: 1 }, 1);
    quota.charge({ id: 'b', messageQuota: 1 }, 1);
    quota.charge({ id: 'c', messageQuota: null }, 1_000_000);
    expect(quota.usedToday('c')).toBe(0);
    expect(() => quota.charge({ id: 'a', messageQuota: 1 }, 1)).toThrow(/over its message quota/);
  });

  it('forgets a removed app: the same id starts at 0', () => {
    const quota = make();
    quota.charge({ id: 'a', messageQuota: 2 }, 2);
    quota.forget('a');
    expect(quota.usedToday('a')).toBe(0);
    quota.charge({ id: 'a', messageQuota: 2 }, 2);
  });
});

describe.each(connectionCounts)('connection counts contract (%s)', (_name, make) => {
  it("admits exactly up to the app's quota; a refusal counts nothing and a close frees a place", () => {
    const counts = make();
    expect([1, 2, 3].map(() => counts.tryConnect('a', 3, null))).toEqual(['ok', 'ok', 'ok']);
    expect(counts.tryConnect('a', 3, null)).toBe('app');
    expect(counts.connectionCount('a')).toBe(3);
    expect(counts.connectionCount()).toBe(3);
    expect(counts.tryConnect('b', null, null)).toBe('ok');
    counts.disconnected('a');
    expect(counts.connectionCount('a')).toBe(2);
    expect(counts.tryConnect('a', 3, null)).toBe('ok');
    expect(counts.connectionCounts()).toEqual(new Map([['a', 3], ['b', 1]]));
  });

  it("admits exactly up to the node's limit, across apps", () => {
    const counts = make();
    expect(counts.tryConnect('a', null, 2)).toBe('ok');
    expect(counts.tryConnect('b', 5, 2)).toBe('ok');
    expect(counts.tryConnect('b', 5, 2)).toBe('node');
    expect(counts.connectionCount('b')).toBe(1);
    expect(counts.connectionCount()).toBe(2);
    counts.disconnected('a');
    expect(counts.connectionCounts()).toEqual(new Map([['b', 1]]));
    expect(counts.tryConnect('c', null, 2)).toBe('ok');
    expect(counts.connectionCount()).toBe(2);
  });
});

describe('SharedCounters', () => {
  it('is one budget for every attached thread, and a dead thread comes off the totals', () => {
    const main = SharedCounters.create({ threads: 2, maxApps: 4 });
    const slot = main.assignSlot('a');
    const [t0, t1] = [0, 1].map((t) => SharedCounters.attach(main.init, t));
    for (const t of [t0!, t1!]) t.setSlot('a', slot);
    expect(t0!.tryConnect('a', 3, null)).toBe('ok');
    expect(t1!.tryConnect('a', 3, null)).toBe('ok');
    expect(t1!.tryConnect('a', 3, null)).toBe('ok');
    expect(t0!.tryConnect('a', 3, null)).toBe('app');
    expect(main.connectionCount('a')).toBe(3);
    expect(main.connectionCounts()).toEqual(new Map([['a', 3]]));
    expect([main.threadConnections(0), main.threadConnections(1)]).toEqual([1, 2]);
    main.dropThread(1);
    expect(main.connectionCount('a')).toBe(1);
    expect(main.connectionCount()).toBe(1);
    expect(t0!.tryConnect('a', 3, null)).toBe('ok');
    // The quota and rate windows are shared too.
    t0!.quota.charge({ id: 'a', messageQuota: 3 }, 2);
    expect(() => t1!.quota.charge({ id: 'a', messageQuota: 3 }, 2)).toThrow(/2 of 3/);
    expect(main.quota.usedToday('a')).toBe(2);
    expect(t0!.rateCounter.take('e:a', 2, 2)).toBe(0);
    expect(t1!.rateCounter.take('e:a', 1, 2)).toBeGreaterThan(0);
  });

  it("zeroes a released slot, counts a removed app's later closes for the node only, and reuses fresh slots first", () => {
    const main = SharedCounters.create({ threads: 1, maxApps: 2 });
    const thread = SharedCounters.attach(main.init, 0);
    thread.setSlot('a', main.assignSlot('a'));
    expect(thread.tryConnect('a', null, null)).toBe('ok');
    thread.quota.charge({ id: 'a', messageQuota: 10 }, 7);
    const slotA = main.assignSlot('a');
    main.releaseSlot('a');
    thread.clearSlot('a');
    expect(main.connectionCount()).toBe(1);
    thread.disconnected('a');
    expect(main.connectionCount()).toBe(0);
    // A fresh slot before the freed one; then the freed one, zeroed.
    const slotB = main.assignSlot('b');
    expect(slotB).not.toBe(slotA);
    expect(main.assignSlot('c')).toBe(slotA);
    thread.setSlot('c', slotA);
    expect(thread.quota.usedToday('c')).toBe(0);
    expect(thread.connectionCount('c')).toBe(0);
    expect(() => main.assignSlot('d')).toThrow(/all 2 app slots are taken/);
  });

  it('refuses to count a connection on main or for an app without a slot (a wiring bug)', () => {
    const main = SharedCounters.create({ threads: 1, maxApps: 1 });
    main.assignSlot('a');
    expect(() => main.tryConnect('a', null, null)).toThrow(/main thread holds no connections/);
    expect(() => SharedCounters.attach(main.init, 0).tryConnect('a', null, null)).toThrow(/has no slot/);
    expect(() => SharedCounters.attach(main.init, 1)).toThrow(/not in \[0, 1\)/);
  });
});

describe('SharedCounters from two worker threads', () => {
  const workers: Worker[] = [];
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.terminate()));
  });

  it('never admits, takes or charges past a limit, and the totals are exact', async () => {
    // The compiled module (npm run build): a worker thread cannot load TypeScript.
    const moduleUrl = pathToFileURL(join(import.meta.dirname, '../../../dist/src/front-end/shared-counters.js')).href;
    const main = SharedCounters.create({ threads: 2, maxApps: 4 });
    const slot = main.assignSlot('a');
    // [0]: the gate; [1], [2]: the barrier's arrivals and generation.
    const sync = new Int32Array(new SharedArrayBuffer(12));
    const limits = { appMax: 1_000, rate: 600, quota: 400, episodes: 100, start: Date.UTC(2026, 0, 1, 12) };
    const started = [0, 1].map((thread) => {
      const worker = new Worker(HAMMER, { eval: true, workerData: { moduleUrl, init: main.init, thread, slot, sync: sync.buffer, limits } });
      workers.push(worker);
      return nextEvent(worker, 'message', `worker ${thread} at the gate`, 30_000);
    });
    await Promise.all(started);
    // Both wait at the gate: opened, they run their episodes at the same time.
    const results = workers.map((worker, thread) => nextEvent<HammerResult>(worker, 'message', `worker ${thread}'s counts`, 120_000));
    Atomics.store(sync, 0, 1);
    Atomics.notify(sync, 0);
    const [r0, r1] = await Promise.all(results);
    expect([r0!.error, r1!.error]).toEqual([undefined, undefined]);
    const sums = (part: 'admitted' | 'taken' | 'charged'): number[] => r0![part].map((n, e) => n + r1![part][e]!);
    const every = (n: number): number[] => new Array<number>(limits.episodes).fill(n);
    // Each episode, the two threads between them took exactly what each limit allows.
    expect(sums('admitted')).toEqual(every(limits.appMax));
    expect(sums('taken')).toEqual(every(limits.rate));
    expect(sums('charged')).toEqual(every(limits.quota));
    expect(r0!.countsSeen).toEqual(every(limits.appMax));
    // Both raced for them: each thread got some and was refused some.
    expect(r0!.admitted.reduce((a, b) => a + b)).toBeGreaterThan(0);
    expect(r1!.admitted.reduce((a, b) => a + b)).toBeGreaterThan(0);
    // What they still hold (each closed all but its last episode's).
    const [held0, held1] = [r0!.admitted.at(-1)!, r1!.admitted.at(-1)!];
    expect(main.connectionCount('a')).toBe(limits.appMax);
    expect(main.connectionCount()).toBe(limits.appMax);
    expect([main.threadConnections(0), main.threadConnections(1)]).toEqual([held0, held1]);
    main.dropThread(0);
    expect(main.connectionCount('a')).toBe(held1);
    expect(main.connectionCount()).toBe(held1);
  });
});

interface HammerResult {
  /** Per episode: connections admitted, rate units taken, messages charged. */
  admitted: number[];
  taken: number[];
  charged: number[];
  /** Thread 0 only: the app's connection count once both stopped, per episode. */
  countsSeen: number[];
  error?: string;
}

/**
 * One worker thread's part. Once the gate opens, both threads run the same episodes, each a new
 * second and a new day of the clock, between barriers: connect until refused, then take one
 * rate unit and charge one message until each is refused; then (after thread 0 read the count) close what it holds,
 * except in the last episode.
 */
const HAMMER = `
const { parentPort, workerData } = require('node:worker_threads');
const { moduleUrl, init, thread, slot, sync: syncBuffer, limits } = workerData;
const sync = new Int32Array(syncBuffer);
function barrier() {
  const generation = Atomics.load(sync, 2);
  if (Atomics.add(sync, 1, 1) === 1) {
    Atomics.store(sync, 1, 0);
    Atomics.add(sync, 2, 1);
  } else {
    // Spinning, not waiting: both leave the barrier within a moment, to race each other.
    while (Atomics.load(sync, 2) === generation);
  }
}
import(moduleUrl).then(({ SharedCounters }) => {
  let now = limits.start;
  const counters = SharedCounters.attach(init, thread, { now: () => now });
  counters.setSlot('a', slot);
  const app = { id: 'a', messageQuota: limits.quota };
  const result = { admitted: [], taken: [], charged: [], countsSeen: [] };
  parentPort.postMessage('ready');
  Atomics.wait(sync, 0, 0);
  for (let e = 0; e < limits.episodes; e++) {
    now = limits.start + e * 86_400_000;
    let admitted = 0, taken = 0, charged = 0;
    while (counters.tryConnect('a', limits.appMax, null) === 'ok') admitted++;
    let taking = true, charging = true;
    while (taking || charging) {
      if (taking) {
        if (counters.rateCounter.take('e:a', 1, limits.rate) === 0) taken++;
        else taking = false;
      }
      if (charging) {
        try {
          counters.quota.charge(app, 1);
          charged++;
        } catch (err) {
          if (err.code !== 'APP_OVER_QUOTA') throw err;
          charging = false;
        }
      }
    }
    result.admitted.push(admitted);
    result.taken.push(taken);
    result.charged.push(charged);
    barrier();
    if (thread === 0) result.countsSeen.push(counters.connectionCount('a'));
    barrier();
    if (e < limits.episodes - 1) for (let i = 0; i < admitted; i++) counters.disconnected('a');
    barrier();
  }
  parentPort.postMessage(result);
}).catch((err) => parentPort.postMessage({ error: String(err && err.stack || err) }));
`;

describe('SharedMissBudget', () => {
  /** The same answers as MissBudget: a minute's window from a block's first miss, refusing past the budget. */
  const contract = (name: string, make: () => MissCounter): void => {
    it(`${name}: refuses a block past its misses until its window ends; other blocks unaffected`, () => {
      const misses = make();
      const t0 = 1_800_000_000_000;
      for (let i = 0; i < 3; i++) {
        expect(misses.retryAfterSeconds('203.0.113.7', t0 + i)).toBe(0);
        misses.missed('203.0.113.7', t0 + i);
      }
      expect(misses.retryAfterSeconds('203.0.113.7', t0 + 10)).toBe(60);
      expect(misses.retryAfterSeconds('203.0.113.7', t0 + 59_500)).toBe(1);
      expect(misses.retryAfterSeconds('198.51.100.1', t0 + 10)).toBe(0);
      expect(misses.retryAfterSeconds('203.0.113.7', t0 + 60_000)).toBe(0);
      misses.missed('203.0.113.7', t0 + 60_000);
      expect(misses.retryAfterSeconds('203.0.113.7', t0 + 60_001)).toBe(0);
    });
  };
  contract('MissBudget', () => new MissBudget(3));
  contract('SharedMissBudget', () => new SharedMissBudget(SharedCounters.create({ threads: 2, maxApps: 1 }).init, 3));

  it('is one budget for every thread: misses on one refuse on another', () => {
    const init = SharedCounters.create({ threads: 2, maxApps: 1 }).init;
    const [a, b] = [new SharedMissBudget(init, 2), new SharedMissBudget(init, 2)];
    const now = 1_800_000_000_000;
    a.missed('203.0.113.7', now);
    expect(b.retryAfterSeconds('203.0.113.7', now)).toBe(0);
    b.missed('203.0.113.7', now);
    expect(a.retryAfterSeconds('203.0.113.7', now)).toBe(60);
    expect(new SharedMissBudget(init, null).retryAfterSeconds('203.0.113.7', now)).toBe(0);
  });
});
