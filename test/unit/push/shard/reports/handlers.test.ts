/**
 * The reporting handlers of one shard (createReportArea) over a real LMDB environment, with a
 * recording webhook emitter standing in for the outbox area: the user webhook is queued in the
 * same turn as the report's write is issued (so a recorded report always has its webhook, even
 * across a crash), never for a duplicate, and only for the device's own user.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../../../../src/config/schema.js';
import { initialProgress } from '../../../../../src/push/store/publish-record-store.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { createReportArea } from '../../../../../src/push/shard/reports/handlers.js';
import { ReportStore } from '../../../../../src/push/shard/reports/report-store.js';
import type { DeliveryReport, ReportShardApi } from '../../../../../src/push/messages/reports.js';
import { LmdbDeviceStore } from '../../../../../src/push/store/lmdb-device-store.js';
import type { ShardArea } from '../../../../../src/shards/context.js';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import type { PushWebhookEvent, WebhookEmitter } from '../../../../../src/webhooks/emitter.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const PUBLISH = 'pubid-report-area';

class RecordingEmitter implements WebhookEmitter {
  readonly push: PushWebhookEvent[] = [];
  /** Called as each event is queued. */
  onPush: (e: PushWebhookEvent) => void = () => undefined;
  channelEvent(): void {}
  pushEvent(e: PushWebhookEvent): void {
    this.onPush(e);
    this.push.push(e);
  }
}

let dir: string;
let root: RootDatabase;
let area: ShardArea<ReportShardApi>;
let emitter: RecordingEmitter;
let devices: LmdbDeviceStore;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'herald-report-area-'));
  root = openShardDatabase(join(dir, 'shard-0'));
  devices = new LmdbDeviceStore(root);
  const publishes = new LmdbPublishStore(root);
  emitter = new RecordingEmitter();
  const config = { ...configSchema.parse({ dataDir: dir, push: [{ instanceId: INSTANCE, secretKey: 'push-secret' }] }), shards: 1, frontEndThreads: 1 };
  area = createReportArea({
    ctx: { shardIndex: 0, shardCount: 1, dataDir: dir, config, installSecret: '00'.repeat(32), root, testHooks: false, onServing: (run) => run() },
    store: devices,
    publishes,
    webhooks: emitter,
  }, publishes);
  const job: PublishJob = { publishId: PUBLISH, instanceId: INSTANCE, kind: 'interests', targets: ['news'], payloads: { fcm: {} }, acceptedAt: Date.now() };
  await publishes.create(job, initialProgress(job), false);
  await devices.register({ instanceId: INSTANCE, deviceId: 'fcm-alice', platform: 'fcm', token: 'token-alice' });
  await devices.setUser(INSTANCE, 'fcm-alice', 'alice');
});

afterEach(async () => {
  await area.close?.();
  await root.close();
  rmSync(dir, { recursive: true, force: true });
});

function report(overrides: Partial<DeliveryReport> = {}): DeliveryReport {
  return { instanceId: INSTANCE, publishId: PUBLISH, deviceId: 'fcm-alice', kind: 'delivery', timestampSecs: 1_700_000_000, userId: 'alice', ...overrides };
}

describe('report.record', () => {
  it('queues the user webhook before the record write commits', async () => {
    // The webhook is queued before the report is recorded, so it cannot be lost to a crash after the record commits.
    const recorded = new ReportStore(root);
    const recordedAtQueue: boolean[] = [];
    emitter.onPush = (e) => recordedAtQueue.push(recorded.has(INSTANCE, PUBLISH, e.kind === 'v1.UserNotificationOpen' ? 'open' : 'delivery', 'fcm-alice'));
    const pending = area.handlers['report.record']({ report: report() });
    expect(await pending).toEqual({ outcome: 'recorded' });
    expect(recordedAtQueue).toEqual([false]);
    expect(emitter.push).toEqual([{
      instanceId: INSTANCE,
      kind: 'v1.UserNotificationAcknowledgement',
      payload: { instance_id: INSTANCE, publish_id: PUBLISH, user_id: 'alice' },
    }]);

    // A duplicate is answered from a read: no second webhook.
    expect(await area.handlers['report.record']({ report: report() })).toEqual({ outcome: 'duplicate' });
    expect(emitter.push).toHaveLength(1);

    expect(await area.handlers['report.record']({ report: report({ kind: 'open' }) })).toEqual({ outcome: 'recorded' });
    expect(emitter.push.map((e) => e.kind)).toEqual(['v1.UserNotificationAcknowledgement', 'v1.UserNotificationOpen']);
    expect(recordedAtQueue).toEqual([false, false]);
  });

  it('names no user it cannot vouch for, and ignores unknown devices and publishes', async () => {
    expect(await area.handlers['report.record']({ report: report({ userId: 'mallory' }) })).toEqual({ outcome: 'recorded' });
    await devices.register({ instanceId: INSTANCE, deviceId: 'fcm-nobody', platform: 'fcm', token: 'token-nobody' });
    expect(await area.handlers['report.record']({ report: report({ deviceId: 'fcm-nobody' }) })).toEqual({ outcome: 'recorded' });
    expect(await area.handlers['report.record']({ report: report({ deviceId: 'fcm-unknown' }) })).toEqual({ outcome: 'unknown-device' });
    expect(await area.handlers['report.record']({ report: report({ kind: 'open', publishId: 'pubid-unknown' }) })).toEqual({ outcome: 'unknown-publish' });
    expect(emitter.push).toEqual([]);
  });
});
