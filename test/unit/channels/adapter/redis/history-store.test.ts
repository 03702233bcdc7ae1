/**
 * The cluster's history store (RedisHistory) against a real private redis-server: serials one
 * by one per channel, complete only when nothing after `since` is missing, maxEvents,
 * ttlSeconds and maxHistoryBytes (counted exactly across channels, oldest first), a new
 * generation after the channel's record was lost, the prune and an app's removal; each append
 * publishes the frame with its serial; a point read starts a generation a later read reaches;
 * an event's except socket comes back in the envelope read only.
 */
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { RedisHistory, type ClusterHistoryBounds } from '../../../../../src/channels/adapter/redis/history-store.js';
import { keptEvent } from '../../../../../src/channels/frames.js';
import { fileRedisServer } from '../../../../helpers/file-redis.js';
import { until } from '../../../../helpers/wait.js';

const redisServer = fileRedisServer();
const open: Redis[] = [];
let prefixes = 0;

afterEach(() => {
  for (const r of open.splice(0)) r.disconnect();
});

function store(): { history: RedisHistory; redis: Redis; prefix: string } {
  const redis = redisServer().client();
  open.push(redis);
  const prefix = `hs${++prefixes}:`;
  return { history: new RedisHistory(redis, prefix), redis, prefix };
}

const BOUNDS: ClusterHistoryBounds = { maxEvents: 100, ttlSeconds: 300, maxBytes: 1_000_000 };

function append(history: RedisHistory, channel: string, data: string, bounds = BOUNDS, appId = 'app'): Promise<string> {
  return history.append({ appId, channel, event: 'e', data }, bounds, `topic:${channel}`, keptEvent('e', channel, data, '').slice(0, -2));
}

const sequence = (serial: string): number => Number(serial.split('-')[1]);

describe('RedisHistory', () => {
  it('gives serials one by one per channel and reads what follows since, complete only when nothing is missing', async () => {
    const { history } = store();
    const serials: string[] = [];
    for (let i = 0; i < 5; i++) serials.push(await append(history, 'history-a', `d${i}`));
    expect(serials.map(sequence)).toEqual([1, 2, 3, 4, 5]);
    expect(new Set(serials.map((s) => s.split('-')[0])).size).toBe(1);
    expect(await append(history, 'history-b', 'x')).toMatch(/^\d{13}-000000000001$/);

    const after = await history.read('app', 'history-a', serials[1], 100, 300);
    expect(after).toEqual({ complete: true, lastGiven: serials[4], events: serials.slice(2).map((serial, i) => ({ serial, event: 'e', data: `d${i + 2}`, publishedAt: expect.any(Number) })) });
    expect(await history.read('app', 'history-a', serials[4], 100, 300)).toMatchObject({ events: [], complete: true });
    expect((await history.read('app', 'history-a', serials[1], 2, 300)).complete).toBe(false);
    const last2 = await history.read('app', 'history-a', undefined, 2, 300);
    expect(last2.events.map((e) => e.data)).toEqual(['d3', 'd4']);
    expect(last2.complete).toBe(false);
    expect((await history.read('app', 'history-none', serials[0], 100, 300)).complete).toBe(false);
  });

  it('answers the last serial given with its mark, starting a generation that a read from it reaches', async () => {
    const { history } = store();
    const sub = redisServer().client();
    open.push(sub);
    const marks: string[] = [];
    sub.on('message', (_topic: string, message: string) => marks.push(message));
    await sub.subscribe('mark');
    const fresh = await history.point('app', 'history-p', 300, { topic: 'mark', message: 'm1' });
    expect(fresh).toMatch(/^\d{13}-000000000000$/);
    expect(await history.read('app', 'history-p', fresh, 100, 300)).toMatchObject({ events: [], complete: true, lastGiven: fresh });
    const first = await append(history, 'history-p', 'a');
    expect(first.split('-')[0]).toBe(fresh.split('-')[0]);
    const read = await history.read('app', 'history-p', fresh, 100, 300);
    expect(read).toMatchObject({ complete: true, lastGiven: first });
    expect(read.events.map((e) => e.data)).toEqual(['a']);
    expect(await history.point('app', 'history-p', 300, { topic: 'mark', message: 'm2' })).toBe(first);
    await until(() => marks.length === 2, 'both marks');
    expect(marks).toEqual(['m1', 'm2']);
  });

  it('publishes the frame with its serial and the except socket in the envelope', async () => {
    const { history } = store();
    const sub = redisServer().client();
    open.push(sub);
    const got: string[] = [];
    sub.on('message', (_topic: string, message: string) => got.push(message));
    await sub.subscribe('topic:history-pub');
    const serial = await history.append({ appId: 'app', channel: 'history-pub', event: 'e', data: '{"a":1}', exceptSocketId: '1.2' }, BOUNDS, 'topic:history-pub', keptEvent('e', 'history-pub', '{"a":1}', '').slice(0, -2));
    await until(() => got.length === 1, 'the frame');
    expect(got[0]).toBe(`*\n1.2\n${keptEvent('e', 'history-pub', '{"a":1}', serial)}`);
  });

  it("keeps an event's except socket for the node's own delivery, never in the read clients get; an event kept without one excepts nobody", async () => {
    const { history, redis, prefix } = store();
    const channel = 'history-except';
    const keep = (data: string, extra: { userId?: string; exceptSocketId?: string }): Promise<string> =>
      history.append({ appId: 'app', channel, event: 'e', data, ...extra }, BOUNDS, `topic:${channel}`, keptEvent('e', channel, data, '').slice(0, -2));
    const plain = await keep('plain', {});
    const said = await keep('said', { userId: 'u1', exceptSocketId: '123.456' });
    const triggered = await keep('triggered', { exceptSocketId: '789.012' });

    const read = await history.readEnvelopes('app', channel, undefined, 100, 300);
    expect(read).toMatchObject({ complete: true, lastGiven: triggered });
    expect(read.envelopes).toEqual([
      { kept: { serial: plain, event: 'e', data: 'plain', publishedAt: expect.any(Number) }, exceptSocketId: undefined },
      { kept: { serial: said, event: 'e', data: 'said', publishedAt: expect.any(Number), userId: 'u1' }, exceptSocketId: '123.456' },
      { kept: { serial: triggered, event: 'e', data: 'triggered', publishedAt: expect.any(Number) }, exceptSocketId: '789.012' },
    ]);
    expect((await history.readEnvelopes('app', channel, plain, 100, 300)).envelopes.map((e) => e.exceptSocketId)).toEqual(['123.456', '789.012']);
    // An event without one is stored as every event was before the except socket was kept.
    const [[, fields]] = await redis.xrange(`${prefix}hist:s:app:${channel}`, '-', '+', 'COUNT', 1);
    expect(fields.filter((_, i) => i % 2 === 0)).toEqual(['e', 'd', 't', 'b']);

    const forClients = await history.read('app', channel, undefined, 100, 300);
    expect(forClients.events).toEqual(read.envelopes.map((e) => e.kept));
    expect(JSON.stringify(forClients)).not.toMatch(/123\.456|789\.012/);
  });

  it('keeps the last maxEvents; since before the first kept is complete only right before it', async () => {
    const { history } = store();
    const bounds = { ...BOUNDS, maxEvents: 3 };
    const serials: string[] = [];
    for (let i = 0; i < 6; i++) serials.push(await append(history, 'history-short', `d${i}`, bounds));
    const kept = await history.read('app', 'history-short', undefined, 100, 300);
    expect(kept.events.map((e) => e.serial)).toEqual(serials.slice(3));
    expect((await history.read('app', 'history-short', serials[2], 100, 300)).complete).toBe(true);
    expect((await history.read('app', 'history-short', serials[1], 100, 300)).complete).toBe(false);
  });

  it('bounds the app by maxBytes across channels, oldest first, counting exactly what is kept', async () => {
    const { history, redis, prefix } = store();
    // 'history-b-N' (11) + 'e' (1) + 8 bytes of data: 20 bytes each, 100 bytes = five events.
    const bounds = { ...BOUNDS, maxBytes: 100 };
    for (let i = 0; i < 4; i++) await append(history, 'history-b-1', `data000${i}`, bounds);
    for (let i = 0; i < 3; i++) await append(history, 'history-b-2', `data000${i}`, bounds);
    expect((await history.read('app', 'history-b-1', undefined, 100, 300)).events.map((e) => e.data)).toEqual(['data0002', 'data0003']);
    expect((await history.read('app', 'history-b-2', undefined, 100, 300)).events).toHaveLength(3);
    expect(await redis.get(`${prefix}hist:b:app`)).toBe('100');
    // Too large to keep: not kept, and the channel's older events go (what is kept stays unbroken).
    await append(history, 'history-b-1', 'x'.repeat(200), bounds);
    expect((await history.read('app', 'history-b-1', undefined, 100, 300)).events).toEqual([]);
    expect(await redis.get(`${prefix}hist:b:app`)).toBe('60');
  });

  it('expires events after ttlSeconds; the channel stays known, so its last serial still recovers; the prune drops them', async () => {
    const { history, redis, prefix } = store();
    const bounds = { ...BOUNDS, ttlSeconds: 1 };
    const first = await append(history, 'history-ttl', 'a', bounds);
    const last = await append(history, 'history-ttl', 'b', bounds);
    await until(async () => (await history.read('app', 'history-ttl', undefined, 100, 1)).events.length === 0, 'the events to expire', 5_000);
    expect(await history.read('app', 'history-ttl', last, 100, 1)).toMatchObject({ events: [], complete: true });
    expect((await history.read('app', 'history-ttl', first, 100, 1)).complete).toBe(false);
    expect(await redis.get(`${prefix}hist:b:app`)).toBe('0');
    expect(await redis.exists(`${prefix}hist:s:app:history-ttl`)).toBe(0);

    await append(history, 'history-pruned', 'c', bounds);
    await until(async () => {
      await history.prune([{ appId: 'app', ttlSeconds: 1 }]);
      return (await redis.exists(`${prefix}hist:s:app:history-pruned`)) === 0;
    }, 'the prune to drop the expired event', 5_000);
    expect(await redis.get(`${prefix}hist:b:app`)).toBe('0');
    expect(await redis.zcard(`${prefix}hist:o:app`)).toBe(0);
  });

  it('starts a later generation once the channel record is lost: serials never go backwards, a lost history is told', async () => {
    const { history, redis, prefix } = store();
    const before = await append(history, 'history-gen', 'a');
    await redis.del(`${prefix}hist:m:app:history-gen`);
    const after = await append(history, 'history-gen', 'b');
    expect(after > before).toBe(true);
    expect(sequence(after)).toBe(1);
    // What it still keeps carries on: nothing after `before` is missing.
    expect((await history.read('app', 'history-gen', before, 100, 300)).events.map((e) => e.data)).toEqual(['b']);
    // Everything lost (Redis restarted empty, which takes longer than the millisecond the last
    // generation may have run ahead of Redis' clock): a client's last serial no longer reaches back.
    const generation = Number(after.split('-')[0]);
    await until(async () => {
      const [seconds, micros] = await redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) > generation;
    }, "Redis' clock to pass the last generation");
    await redis.del(`${prefix}hist:m:app:history-gen`, `${prefix}hist:s:app:history-gen`);
    const fresh = await append(history, 'history-gen', 'c');
    expect(fresh > after).toBe(true);
    const read = await history.read('app', 'history-gen', after, 100, 300);
    expect(read.events.map((e) => e.serial)).toEqual([fresh]);
    expect(read.complete).toBe(false);
  });

  it('forgets everything an app kept, and only that app', async () => {
    const { history, redis, prefix } = store();
    for (let i = 0; i < 3; i++) await append(history, `history-${i}`, 'x', BOUNDS, 'gone');
    await append(history, 'history-0', 'y', BOUNDS, 'stays');
    await history.forget('gone');
    expect(await redis.keys(`${prefix}hist:*gone*`)).toEqual([]);
    expect((await history.read('stays', 'history-0', undefined, 100, 300)).events.map((e) => e.data)).toEqual(['y']);
  });
});
