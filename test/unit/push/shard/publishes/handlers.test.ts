/**
 * The push area of one shard (createPushArea) over a real LMDB environment and the real
 * gateway clients against the fake gateways, with a recording webhook emitter (the outbox is
 * another area): STARTED only for a stored publish, and `publish.cancel` stopping a publish
 * for good (no FINISHED, not resumed after a restart).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { configSchema, type HeraldConfig } from '../../../../../src/config/schema.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import { createPushArea } from '../../../../../src/push/shard-handlers.js';
import { LmdbDevices } from '../../../../../src/push/shard/devices/lmdb-devices.js';
import type { ShardArea, ShardContext } from '../../../../../src/shards/context.js';
import type { PushShardApi } from '../../../../../src/push/messages/index.js';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import type { PushWebhookEvent, WebhookEmitter } from '../../../../../src/webhooks/emitter.js';
import { startFakeGateways, type FakeGateways } from '../../../../helpers/fake-gateways.js';
import { flushedBy, until } from '../../../../helpers/wait.js';

const INSTANCE = '0b6f7c3a-1d2e-4f5a-9b8c-7d6e5f4a3b2c';
const BUNDLE = 'com.herald.cancel';

/** Records each push event with whether its publish's job was already stored when it was queued. */
class RecordingEmitter implements WebhookEmitter {
  readonly push: (PushWebhookEvent & { jobStored: boolean })[] = [];
  publishes: LmdbPublishStore | undefined;
  channelEvent(): void {}
  pushEvent(e: PushWebhookEvent): void {
    const publishId = String(e.payload['publishId'] ?? '');
    this.push.push({ ...e, jobStored: this.publishes?.job(publishId) !== undefined });
  }
}

let fakes: FakeGateways;
let dir: string;
let roots: RootDatabase[];
let areas: ShardArea<PushShardApi>[];

beforeAll(async () => {
  fakes = await startFakeGateways();
});
afterAll(async () => {
  await fakes.stop();
});
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-push-area-'));
  roots = [];
  areas = [];
  fakes.resetBehaviour();
  fakes.setDelay(0);
});
afterEach(async () => {
  fakes.setDelay(0);
  for (const area of areas) await area.close?.();
  for (const root of roots) await root.close();
  rmSync(dir, { recursive: true, force: true });
});

function config(): Readonly<HeraldConfig> {
  const parsed = configSchema.parse({
    dataDir: dir,
    push: [fakes.instanceConfig({ instanceId: INSTANCE, secretKey: 's' })],
    pushDelivery: { concurrency: 1, retryBaseDelayMs: 5 },
  });
  return { ...parsed, shards: 1, frontEndThreads: 1 };
}

/** Opens the shard's environment (again, after a "restart") and builds its push area. */
function openArea(emitter: RecordingEmitter): { area: ShardArea<PushShardApi>; devices: LmdbDevices; publishes: LmdbPublishStore } {
  const root = openShardDatabase(join(dir, 'shard-0'));
  roots.push(root);
  const ctx: ShardContext = { shardIndex: 0, shardCount: 1, dataDir: dir, config: config(), installSecret: '00'.repeat(32), root, testHooks: false, onServing: (run) => run() };
  const area = createPushArea(ctx, emitter);
  areas.push(area);
  emitter.publishes = new LmdbPublishStore(root);
  return { area, devices: new LmdbDevices(root), publishes: emitter.publishes };
}

async function closeArea(area: ShardArea<PushShardApi>, root: RootDatabase): Promise<void> {
  areas.splice(areas.indexOf(area), 1);
  roots.splice(roots.indexOf(root), 1);
  await area.close?.();
  await root.close();
}

let seq = 0;
function job(interest: string): PublishJob {
  return {
    publishId: `pubid-area-${++seq}`, instanceId: INSTANCE, kind: 'interests', targets: [interest],
    payloads: { apns: { aps: { alert: 'hi' } } }, webhookUrl: 'http://127.0.0.1:1/hook', acceptedAt: Date.now(),
  };
}

const apnsToken = (n: number) => n.toString(16).padStart(64, '0');
const sentFor = (publishId: string) =>
  fakes.apns.received.filter((r) => (r.payload as { data?: { pusher?: { publishId?: string } } }).data?.pusher?.publishId === publishId).length;
const finishedOf = (emitter: RecordingEmitter, publishId: string) => emitter.push.filter((e) => e.kind === 'publish.FINISHED' && e.payload['publishId'] === publishId);

/** The one device of the marker publishes, on the same gateway as the others. */
async function registerMarkerDevice(devices: LmdbDevices): Promise<void> {
  await devices.register({ instanceId: INSTANCE, deviceId: 'marker', platform: 'apns', token: apnsToken(9999), bundleIdentifier: BUNDLE });
  await devices.addInterest(INSTANCE, 'marker', 'marker');
}

/**
 * For "nothing more is sent": publishes to the marker device and waits for its FINISHED. Its send
 * queues behind any send an earlier publish still makes (one shard-wide limiter, first come first
 * served), and its FINISHED behind any coordination queued before it.
 */
async function marker(area: ShardArea<PushShardApi>, emitter: RecordingEmitter): Promise<void> {
  const m = job('marker');
  await flushedBy(() => area.handlers['publish.start']({ job: m }), () => finishedOf(emitter, m.publishId).length > 0 && sentFor(m.publishId) === 1, `the marker publish ${m.publishId}`);
}


describe('push area of a shard', () => {
  it('queues STARTED only once the publish is stored', async () => {
    const emitter = new RecordingEmitter();
    const { area } = openArea(emitter);
    const j = job('nobody');
    expect(await area.handlers['publish.start']({ job: j })).toEqual({ stored: true });
    await until(() => emitter.push.some((e) => e.kind === 'publish.FINISHED'), 'FINISHED');
    const started = emitter.push.find((e) => e.kind === 'publish.STARTED');
    expect(started).toMatchObject({ jobStored: true, payload: { publishId: j.publishId, status: 'STARTED' } });
  });

  it('publish.cancel stops a running publish for good: no FINISHED, not resumed after a restart', async () => {
    const emitter = new RecordingEmitter();
    const { area, devices, publishes } = openArea(emitter);
    await registerMarkerDevice(devices);
    const total = 20;
    for (let i = 0; i < total; i++) {
      await devices.register({ instanceId: INSTANCE, deviceId: `c-${i}`, platform: 'apns', token: apnsToken(7000 + i), bundleIdentifier: BUNDLE });
      await devices.addInterest(INSTANCE, `c-${i}`, 'cancel-me');
    }
    fakes.setDelay(100); // concurrency 1: one send per 100 ms, so the run takes 2 s
    const j = job('cancel-me');
    await area.handlers['publish.start']({ job: j });
    await until(() => sentFor(j.publishId) >= 2, 'the first sends');

    expect(await area.handlers['publish.cancel']({ publishId: j.publishId })).toEqual({ cancelled: true });
    const sentAtCancel = sentFor(j.publishId);
    await marker(area, emitter);
    expect(sentFor(j.publishId)).toBe(sentAtCancel);
    expect(sentAtCancel).toBeLessThan(total);
    expect(publishes.progress(j.publishId)).toMatchObject({ state: 'finished', cancelled: true, reported: true });
    expect(publishes.openPublishIds()).not.toContain(j.publishId);
    expect(publishes.openCoordinatorIds()).not.toContain(j.publishId);
    expect(publishes.job(j.publishId)).toBeUndefined();

    // A restart resumes nothing and finalizes nothing.
    fakes.setDelay(0);
    await closeArea(area, roots[0]!);
    const restarted = openArea(emitter);
    // A resumed run would start with the area, before the marker's.
    await marker(restarted.area, emitter);
    expect(sentFor(j.publishId)).toBe(sentAtCancel);
    expect(finishedOf(emitter, j.publishId)).toEqual([]);
    expect(await restarted.area.handlers['publish.cancel']({ publishId: j.publishId })).toEqual({ cancelled: true });
  });

  it('publish.cancel arriving while the start is still being stored keeps the publish from running', async () => {
    const emitter = new RecordingEmitter();
    const { area, devices, publishes } = openArea(emitter);
    await devices.register({ instanceId: INSTANCE, deviceId: 'quick', platform: 'apns', token: apnsToken(7100), bundleIdentifier: BUNDLE });
    await devices.addInterest(INSTANCE, 'quick', 'race');
    await registerMarkerDevice(devices);
    const j = job('race');
    const start = area.handlers['publish.start']({ job: j });
    const cancel = area.handlers['publish.cancel']({ publishId: j.publishId });
    expect(await start).toEqual({ stored: true });
    expect(await cancel).toEqual({ cancelled: true });
    await marker(area, emitter);
    expect(sentFor(j.publishId)).toBe(0);
    expect(publishes.progress(j.publishId)).toMatchObject({ cancelled: true });
    // A start repeated after the cancel (a retried broadcast) does not bring it back.
    await area.handlers['publish.start']({ job: j });
    await marker(area, emitter);
    expect(sentFor(j.publishId)).toBe(0);
    expect(finishedOf(emitter, j.publishId)).toEqual([]);
  });
});
