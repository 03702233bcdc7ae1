/**
 * PublishRun over a real LmdbDevices and LmdbPublishStore (temp LMDB) and the real gateway clients
 * against the fake gateways: audience, payloads, dead tokens, retries, counts, and a stop in
 * the middle followed by a resume from the stored checkpoint.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { configSchema, type PushInstanceConfig } from '../../../../../src/config/schema.js';
import { GatewayRegistry } from '../../../../../src/push/shard/publishes/gateway-registry.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import { PublishRun, type PublishRunDeps } from '../../../../../src/push/shard/publishes/publish-run.js';
import { initialProgress } from '../../../../../src/push/store/publish-record-store.js';
import { SendLimiter } from '../../../../../src/push/shard/publishes/send-limiter.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { LmdbDevices } from '../../../../../src/push/shard/devices/lmdb-devices.js';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import { startFakeGateways, type FakeGateways } from '../../../../helpers/fake-gateways.js';
import { until } from '../../../../helpers/wait.js';

const INSTANCE = '0b6f7c3a-1d2e-4f5a-9b8c-7d6e5f4a3b2c';
const BUNDLE = 'com.herald.test';

let fakes: FakeGateways;
let instance: PushInstanceConfig;
let dir: string;
let root: RootDatabase;
let devices: LmdbDevices;
let publishes: LmdbPublishStore;
let registries: GatewayRegistry[];
let jobSeq = 0;

beforeAll(async () => {
  fakes = await startFakeGateways();
  const config = configSchema.parse({ push: [fakes.instanceConfig({ instanceId: INSTANCE, secretKey: 's' })] });
  instance = config.push[0]!;
});

afterAll(async () => {
  await fakes.stop();
});

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-publish-run-'));
  root = openShardDatabase(join(dir, 'shard-0'));
  devices = new LmdbDevices(root);
  publishes = new LmdbPublishStore(root);
  registries = [];
  fakes.resetBehaviour();
  fakes.setDelay(0);
});

afterEach(async () => {
  await Promise.all(registries.map((r) => r.close()));
  await root.close();
  rmSync(dir, { recursive: true, force: true });
});

function deps(overrides: Partial<PublishRunDeps> = {}): PublishRunDeps {
  const delivery = configSchema.parse({}).pushDelivery;
  const gateways = new GatewayRegistry([instance], { ...delivery, retryBaseDelayMs: 5, retryMaxDelayMs: 2000 });
  registries.push(gateways);
  return { shardIndex: 0, devices, publishes, gateways, limiter: new SendLimiter(16), checkpointEvery: 1000, windowSize: 64, ...overrides };
}

function job(kind: PublishJob['kind'], targets: string[], payloads: PublishJob['payloads']): PublishJob {
  return { publishId: `pubid-test-${++jobSeq}`, instanceId: INSTANCE, kind, targets, payloads, acceptedAt: Date.now() };
}

async function startJob(j: PublishJob, d: PublishRunDeps): Promise<{ run: PublishRun; result: Promise<'finished' | 'stopped' | 'lost'> }> {
  const record = initialProgress(j);
  await publishes.create(j, record, false);
  const run = new PublishRun(j, record, d);
  return { run, result: run.run() };
}

const apnsToken = (n: number) => n.toString(16).padStart(64, '0');

const PAYLOADS = {
  apns: { aps: { alert: { title: 'Hi', body: 'apns' } } },
  fcm: { notification: { title: 'Hi', body: 'fcm' }, data: { orderId: 7 } },
  web: { notification: { title: 'Hi', body: 'web', deep_link: 'https://herald.test/x' } },
};

describe('PublishRun', () => {
  it('reaches every subscribed device once with its platform payload and data.pusher', async () => {
    const sub = fakes.web.createSubscription();
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-1', platform: 'apns', token: apnsToken(1), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'and-1', platform: 'fcm', token: 'fcm-token-1' });
    await devices.register({ instanceId: INSTANCE, deviceId: 'web-1', platform: 'web', token: sub.token });
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-other', platform: 'apns', token: apnsToken(2), bundleIdentifier: BUNDLE });
    await devices.replaceInterests(INSTANCE, 'ios-1', ['a', 'b', 'c']);
    await devices.replaceInterests(INSTANCE, 'and-1', ['b']);
    await devices.replaceInterests(INSTANCE, 'web-1', ['c']);
    await devices.replaceInterests(INSTANCE, 'ios-other', ['z']);
    const before = { apns: fakes.apns.delivered.length, fcm: fakes.fcm.delivered.length, web: fakes.web.delivered.length };

    const j = job('interests', ['c', 'a', 'b'], PAYLOADS);
    const { result } = await startJob(j, deps());
    expect(await result).toBe('finished');

    const apns = fakes.apns.delivered.slice(before.apns);
    const fcm = fakes.fcm.delivered.slice(before.fcm);
    const web = fakes.web.delivered.slice(before.web);
    expect(apns.map((r) => r.token)).toEqual([apnsToken(1)]);
    expect(apns[0]!.topic).toBe(BUNDLE);
    expect(apns[0]!.payload).toEqual({
      aps: PAYLOADS.apns.aps,
      data: { pusher: { instanceId: INSTANCE, publishId: j.publishId, hasDisplayableContent: true, hasData: false } },
    });
    expect(fcm.map((r) => r.token)).toEqual(['fcm-token-1']);
    expect(fcm[0]!.message['data']).toEqual({
      orderId: '7',
      pusher: JSON.stringify({ instanceId: INSTANCE, publishId: j.publishId, hasDisplayableContent: true, hasData: true }),
    });
    expect(web.map((r) => r.token)).toEqual([sub.token]);
    expect(JSON.parse(web[0]!.plaintext!)).toEqual({
      notification: PAYLOADS.web.notification,
      data: { pusher: { instanceId: INSTANCE, publishId: j.publishId, hasDisplayableContent: true, hasData: false } },
    });

    const stored = publishes.progress(j.publishId)!;
    expect(stored).toMatchObject({ state: 'finished', recipients: 3 });
    expect(stored.gateways).toEqual({
      apns: { recipients: 1, sent: 1, failed: 0, removed: 0 },
      fcm: { recipients: 1, sent: 1, failed: 0, removed: 0 },
      web: { recipients: 1, sent: 1, failed: 0, removed: 0 },
    });
    expect(stored.startedAt).not.toBeNull();
    expect(stored.finishedAt).not.toBeNull();
  });

  it('skips devices of platforms the publish has no payload for', async () => {
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-1', platform: 'apns', token: apnsToken(3), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'and-1', platform: 'fcm', token: 'fcm-token-skip' });
    await devices.addInterest(INSTANCE, 'ios-1', 'only');
    await devices.addInterest(INSTANCE, 'and-1', 'only');
    const fcmBefore = fakes.fcm.received.length;
    const j = job('interests', ['only'], { apns: PAYLOADS.apns });
    const { result } = await startJob(j, deps());
    expect(await result).toBe('finished');
    expect(fakes.fcm.received.length).toBe(fcmBefore);
    expect(publishes.progress(j.publishId)).toMatchObject({ recipients: 1, gateways: { apns: { sent: 1 }, fcm: { recipients: 0 } } });
  });

  it('deletes devices whose token is dead and retries 429/5xx', async () => {
    // Dead-token answers delete devices only once each client has had an accepted send (dead-token-guard.ts).
    const shared = deps();
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-live', platform: 'apns', token: apnsToken(40), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'and-live', platform: 'fcm', token: 'fcm-live' });
    await devices.register({ instanceId: INSTANCE, deviceId: 'web-live', platform: 'web', token: fakes.web.createSubscription().token });
    for (const id of ['ios-live', 'and-live', 'web-live']) await devices.addInterest(INSTANCE, id, 'warm-up');
    expect(await (await startJob(job('interests', ['warm-up'], PAYLOADS), shared)).result).toBe('finished');

    const deadWeb = fakes.web.createSubscription();
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-dead', platform: 'apns', token: apnsToken(4), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'and-dead', platform: 'fcm', token: 'fcm-dead' });
    await devices.register({ instanceId: INSTANCE, deviceId: 'web-dead', platform: 'web', token: deadWeb.token });
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-retry', platform: 'apns', token: apnsToken(5), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'and-retry', platform: 'fcm', token: 'fcm-retry' });
    for (const id of ['ios-dead', 'and-dead', 'web-dead', 'ios-retry', 'and-retry']) await devices.addInterest(INSTANCE, id, 'news');
    fakes.apns.deadTokens.add(apnsToken(4));
    fakes.fcm.deadTokens.add('fcm-dead');
    fakes.web.deadTokens.add(deadWeb.token);
    fakes.apns.failNext(apnsToken(5), 1, 503, { retryAfterSeconds: 0 });
    fakes.fcm.failNext('fcm-retry', 1, 429);

    const j = job('interests', ['news'], PAYLOADS);
    const { result } = await startJob(j, shared);
    expect(await result).toBe('finished');

    for (const id of ['ios-dead', 'and-dead', 'web-dead']) expect(devices.get(INSTANCE, id)).toBeUndefined();
    expect(devices.get(INSTANCE, 'ios-retry')).toBeDefined();
    expect(fakes.apns.received.filter((r) => r.token === apnsToken(5)).map((r) => r.status)).toEqual([503, 200]);
    expect(fakes.fcm.received.filter((r) => r.token === 'fcm-retry').map((r) => r.status)).toEqual([429, 200]);
    expect(publishes.progress(j.publishId)!.gateways).toEqual({
      apns: { recipients: 2, sent: 1, failed: 1, removed: 1, errors: { Unregistered: 1 } },
      fcm: { recipients: 2, sent: 1, failed: 1, removed: 1, errors: { UNREGISTERED: 1 } },
      web: { recipients: 1, sent: 0, failed: 1, removed: 1, errors: { 'HTTP 410': 1 } },
    });
  });

  it('records the per-user outcome of a user publish', async () => {
    await devices.register({ instanceId: INSTANCE, deviceId: 'u1-phone', platform: 'fcm', token: 'fcm-u1' });
    await devices.register({ instanceId: INSTANCE, deviceId: 'u2-phone', platform: 'apns', token: apnsToken(6), bundleIdentifier: BUNDLE });
    await devices.register({ instanceId: INSTANCE, deviceId: 'u3-web', platform: 'web', token: fakes.web.createSubscription().token });
    await devices.setUser(INSTANCE, 'u1-phone', 'alice');
    await devices.setUser(INSTANCE, 'u2-phone', 'bob');
    await devices.setUser(INSTANCE, 'u3-web', 'carol');
    fakes.apns.failNext(apnsToken(6), 1, 400, { reason: 'PayloadTooLarge' });

    const j = job('users', ['bob', 'alice', 'dave', 'carol'], { apns: PAYLOADS.apns, fcm: PAYLOADS.fcm });
    const { result } = await startJob(j, deps());
    expect(await result).toBe('finished');
    // Bits over the sorted targets (alice, bob, carol, dave); the ids themselves are not in the part.
    const users = publishes.progress(j.publishId)!.users!;
    expect(Object.keys(users).sort()).toEqual(['deliveredToGateway', 'withDevices']);
    expect([...users.withDevices]).toEqual([0b0011]);
    expect([...users.deliveredToGateway]).toEqual([0b0001]);
  });

  it('keeps the devices a fresh client calls dead (no accepted send yet): failed, not removed', async () => {
    await devices.register({ instanceId: INSTANCE, deviceId: 'ios-suspect', platform: 'apns', token: apnsToken(41), bundleIdentifier: BUNDLE });
    await devices.addInterest(INSTANCE, 'ios-suspect', 'suspect');
    fakes.apns.failNext(apnsToken(41), 1, 400, { reason: 'BadDeviceToken' });
    const j = job('interests', ['suspect'], { apns: PAYLOADS.apns });
    expect(await (await startJob(j, deps())).result).toBe('finished');
    expect(devices.get(INSTANCE, 'ios-suspect')).toBeDefined();
    const apns = publishes.progress(j.publishId)!.gateways.apns;
    expect(apns).toMatchObject({ recipients: 1, sent: 0, failed: 1, removed: 0 });
    expect(Object.keys(apns.errors!)).toHaveLength(1);
    expect(Object.keys(apns.errors!)[0]).toMatch(/^BadDeviceToken \(device kept: /);
  });

  it('keeps no user ids in memory for an interest publish, only for a user publish', async () => {
    for (let i = 0; i < 20; i++) {
      await devices.register({ instanceId: INSTANCE, deviceId: `fan-${i}`, platform: 'fcm', token: `fcm-fan-${i}` });
      await devices.addInterest(INSTANCE, `fan-${i}`, 'fans');
      await devices.setUser(INSTANCE, `fan-${i}`, `user-${i}`);
    }
    const interests = new PublishRun(job('interests', ['fans'], { fcm: PAYLOADS.fcm }), initialProgress(job('interests', ['fans'], { fcm: PAYLOADS.fcm })), deps());
    expect(await interests.run()).toBe('finished');
    expect(interests.report().recipients).toBe(20);
    for (const tally of [interests['live'], interests['committed']]) {
      expect(tally.usersWithDevices.length).toBe(0);
      expect(tally.usersDelivered.length).toBe(0);
    }

    const usersJob = job('users', ['user-1', 'user-2'], { fcm: PAYLOADS.fcm });
    const users = new PublishRun(usersJob, initialProgress(usersJob), deps());
    expect(await users.run()).toBe('finished');
    expect(users['committed'].usersDelivered).toEqual(Uint8Array.of(0b11));
  });

  it('lets the event loop in while the scan skips devices already reached under an earlier interest', async () => {
    // 1024 devices in five interests: the walks of `b` to `e` skip 4096 devices in all. No payload
    // for their platform, so no send either: the loop yields only every 256 devices handled, and
    // on the scan's progress steps (one per 256 skipped).
    const count = 1024;
    await Promise.all(Array.from({ length: count }, async (_, i) => {
      const id = `multi-${String(i).padStart(4, '0')}`;
      await devices.register({ instanceId: INSTANCE, deviceId: id, platform: 'apns', token: apnsToken(5000 + i), bundleIdentifier: BUNDLE });
      await devices.replaceInterests(INSTANCE, id, ['a', 'b', 'c', 'd', 'e']);
    }));
    let ticks = 0;
    let ticking = true;
    const tick = (): void => {
      ticks++;
      if (ticking) setImmediate(tick);
    };
    // `now` is read when the run starts and when its scan is exhausted (checkpoints off until then).
    const ticksAtNow: number[] = [];
    const j = job('interests', ['a', 'b', 'c', 'd', 'e'], { web: PAYLOADS.web });
    const run = new PublishRun(j, initialProgress(j), deps({ checkpointEvery: 1e9, now: () => (ticksAtNow.push(ticks), Date.now()) }));
    setImmediate(tick);
    try {
      expect(await run.run()).toBe('finished');
    } finally {
      ticking = false;
    }
    const duringScan = ticksAtNow[1]! - ticksAtNow[0]!;
    // 4 turns for the devices handled, 16 for the skipped ones.
    expect(duringScan).toBeGreaterThanOrEqual(((count / 256) * 5) * 0.75);
  });

  it('stops at a checkpoint and resumes after it: every device reached, counts exact', async () => {
    const total = 40;
    for (let i = 0; i < total; i++) {
      const id = `dev-${String(i).padStart(2, '0')}`;
      await devices.register({ instanceId: INSTANCE, deviceId: id, platform: 'apns', token: apnsToken(1000 + i), bundleIdentifier: BUNDLE });
      await devices.addInterest(INSTANCE, id, 'big');
    }
    fakes.setDelay(40);
    const before = fakes.apns.delivered.length;
    const j = job('interests', ['big'], { apns: PAYLOADS.apns });
    const first = deps({ limiter: new SendLimiter(4), checkpointEvery: 3, windowSize: 8 });
    const { run, result } = await startJob(j, first);
    await until(() => fakes.apns.delivered.length - before >= 12, 'twelve sends');
    run.stop();
    first.limiter.close();
    run.cutSends();
    await first.gateways.close();
    expect(await result).toBe('stopped');

    const stored = publishes.progress(j.publishId)!;
    expect(stored.state).toBe('sending');
    expect(stored.position).not.toBeNull();
    expect(stored.recipients).toBeGreaterThan(0);
    expect(stored.recipients).toBeLessThan(total);

    fakes.setDelay(0);
    const resumed = new PublishRun(j, stored, deps());
    expect(await resumed.run()).toBe('finished');

    const tokens = fakes.apns.delivered.slice(before).map((r) => r.token);
    const distinct = new Set(tokens);
    expect(distinct.size).toBe(total);
    // Sent twice: at most the devices between the checkpoint and the stop (window of 8).
    expect(tokens.length - total).toBeLessThanOrEqual(8);
    expect(publishes.progress(j.publishId)).toMatchObject({ state: 'finished', recipients: total, gateways: { apns: { recipients: total, sent: total } } });
    expect(publishes.usageNow(INSTANCE, new Date().toISOString().slice(0, 7))).toBe(total);
  });
});
