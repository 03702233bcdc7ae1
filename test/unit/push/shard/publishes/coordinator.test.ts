/**
 * PublishCoordinator between two shards (two LMDB environments, an in-memory bus standing in
 * for the BroadcastChannel): STARTED once, FINISHED with counts summed over shards,
 * v1.PublishToUsersAttempt, re-posting until acknowledged, and finalizing after a restart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PublishCoordinator, type PublishBus, type PublishBusMessage } from '../../../../../src/push/shard/publishes/coordinator.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import type { ShardReport } from '../../../../../src/push/store/publish-record-store.js';
import { initialProgress } from '../../../../../src/push/store/publish-record-store.js';
import { emptyGatewayCounts, userBitsOf, userIndexOf } from '../../../../../src/push/publish-results.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { shardForKey } from '../../../../../src/shards/hash.js';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import type { PushWebhookEvent, WebhookEmitter } from '../../../../../src/webhooks/emitter.js';
import { flushedBy, until } from '../../../../helpers/wait.js';

/** Buses that deliver each post to every other member on a later turn; a deaf member hears nothing. */
class Hub {
  readonly members = new Set<{ handler?: (m: PublishBusMessage) => void; deaf: boolean }>();
  bus(): PublishBus & { deaf: boolean } {
    const member: { handler?: (m: PublishBusMessage) => void; deaf: boolean } = { deaf: false };
    this.members.add(member);
    return {
      get deaf() {
        return member.deaf;
      },
      set deaf(value: boolean) {
        member.deaf = value;
      },
      post: (message) => {
        for (const other of this.members) {
          if (other !== member && !other.deaf) setImmediate(() => other.handler?.(structuredClone(message)));
        }
      },
      onMessage: (handler) => {
        member.handler = handler;
      },
      close: () => {
        this.members.delete(member);
      },
    };
  }
}

class RecordingEmitter implements WebhookEmitter {
  readonly push: PushWebhookEvent[] = [];
  channelEvent(): void {}
  pushEvent(e: PushWebhookEvent): void {
    this.push.push(e);
  }
}

const INSTANCE = '0b6f7c3a-1d2e-4f5a-9b8c-7d6e5f4a3b2c';
let dir: string;
let roots: RootDatabase[];
let coordinators: PublishCoordinator[];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'herald-coordinator-'));
  roots = [];
  coordinators = [];
});

afterEach(async () => {
  for (const c of coordinators) await c.close();
  for (const r of roots) await r.close();
  rmSync(dir, { recursive: true, force: true });
});

function openStore(shard: number): LmdbPublishStore {
  const root = openShardDatabase(join(dir, `shard-${shard}`));
  roots.push(root);
  return new LmdbPublishStore(root);
}

/** A publish id that shard `coordinator` coordinates (of 2). */
function publishIdFor(coordinator: number, prefix = 'pubid-coord'): string {
  for (let i = 0; ; i++) {
    const id = `${prefix}-${i}`;
    if (shardForKey(id, 2) === coordinator) return id;
  }
}

/** A part's user outcome as stored: bits over the sorted targets. */
function outcome(targets: string[], withDevices: string[], deliveredToGateway: string[]): NonNullable<ShardReport['users']> {
  const index = userIndexOf(targets);
  return { withDevices: userBitsOf(withDevices, index), deliveredToGateway: userBitsOf(deliveredToGateway, index) };
}

function report(publishId: string, shard: number, sent: number, users?: ShardReport['users']): ShardReport {
  const gateways = emptyGatewayCounts();
  gateways.fcm = { recipients: sent + 1, sent, failed: 1, removed: 1 };
  return { publishId, shard, recipients: sent + 1, gateways, startedAt: 1, finishedAt: 2, ...(users ? { users } : {}) };
}


describe('PublishCoordinator', () => {
  it('sends STARTED once and FINISHED and PublishToUsersAttempt with every shard counted', async () => {
    const hub = new Hub();
    const stores = [openStore(0), openStore(1)];
    const emitters = [new RecordingEmitter(), new RecordingEmitter()];
    const c = [0, 1].map((shard) => new PublishCoordinator({ shardIndex: shard, shardCount: 2, publishes: stores[shard]!, webhooks: emitters[shard]!, bus: hub.bus() }));
    coordinators.push(...c);
    const id = publishIdFor(0);
    const job: PublishJob = {
      publishId: id, instanceId: INSTANCE, kind: 'users', targets: ['amy', 'ben', 'cy'], payloads: { fcm: {} }, webhookUrl: 'http://127.0.0.1:1/hook', acceptedAt: 1,
    };
    expect(c[0]!.coordinates(id)).toBe(true);
    c[0]!.started(job);
    await stores[0]!.create(job, initialProgress(job), true);
    await stores[1]!.create(job, initialProgress(job), false);

    // Shard 1 finishes first; its report is stored by shard 0 and acknowledged.
    await stores[1]!.saveProgress({ ...initialProgress(job), state: 'finished', finishedAt: 2 });
    c[1]!.partFinished(report(id, 1, 2, outcome(job.targets, ['amy', 'ben'], ['amy'])));
    await until(() => stores[1]!.progress(id)!.reported, 'stores[1]!.progress(id)!.reported', 5000);
    expect(stores[1]!.openPublishIds()).toEqual([]);
    expect(emitters[0]!.push.map((e) => e.kind)).toEqual(['publish.STARTED']);

    await stores[0]!.saveProgress({ ...initialProgress(job), state: 'finished', finishedAt: 2 });
    c[0]!.partFinished(report(id, 0, 3, outcome(job.targets, ['ben'], ['ben'])));
    await until(() => emitters[0]!.push.length === 3, 'emitters[0]!.push.length === 3', 5000);

    expect(emitters[0]!.push).toEqual([
      {
        instanceId: INSTANCE, kind: 'publish.STARTED', url: job.webhookUrl,
        payload: { publishId: id, status: 'STARTED', results: { fcm: { recipients: 0, sent: 0, failed: 0, removed: 0 } } },
      },
      {
        instanceId: INSTANCE, kind: 'publish.FINISHED', url: job.webhookUrl,
        payload: { publishId: id, status: 'FINISHED', results: { fcm: { recipients: 7, sent: 5, failed: 2, removed: 2 } } },
      },
      {
        instanceId: INSTANCE, kind: 'v1.PublishToUsersAttempt',
        payload: { instance_id: INSTANCE, publish_id: id, users_delivered_to_gateway: ['amy', 'ben'], users_no_devices: ['cy'], users_gateway_failed: [] },
      },
    ]);
    expect(emitters[1]!.push).toEqual([]);
    await until(() => stores[0]!.coordinator(id)?.finalized === true, 'stores[0]!.coordinator(id)?.finalized === true', 5000);
    expect(stores[0]!.openCoordinatorIds()).toEqual([]);
    // Both roles are done: the job body is dropped, the counts stay.
    expect(stores[0]!.job(id)).toBeUndefined();
    expect(stores[0]!.progress(id)).toBeDefined();

    // A late duplicate report changes nothing: the marker, another publish's report posted after
    // it, is stored by the coordinator's queue (one at a time) once the duplicate was handled.
    c[1]!.partFinished(report(id, 1, 2, outcome(job.targets, ['amy', 'ben'], ['amy'])));
    const marker = publishIdFor(0, 'pubid-marker');
    await flushedBy(() => c[1]!.partFinished(report(marker, 1, 1)), () => stores[0]!.coordinator(marker)?.parts[1] !== undefined, 'the marker report stored by the coordinator', 5000);
    expect(emitters[0]!.push).toHaveLength(3);
  });

  it('re-posts a report the coordinator missed, and finalizes a complete record after a restart', async () => {
    const hub = new Hub();
    const stores = [openStore(0), openStore(1)];
    const emitter = new RecordingEmitter();
    const busC = hub.bus();
    const c0 = new PublishCoordinator({ shardIndex: 0, shardCount: 2, publishes: stores[0]!, webhooks: emitter, bus: busC });
    const c1 = new PublishCoordinator({ shardIndex: 1, shardCount: 2, publishes: stores[1]!, webhooks: new RecordingEmitter(), bus: hub.bus() });
    coordinators.push(c0, c1);
    const id = publishIdFor(0);
    const job: PublishJob = { publishId: id, instanceId: INSTANCE, kind: 'interests', targets: ['x'], payloads: { fcm: {} }, webhookUrl: 'http://127.0.0.1:1/h', acceptedAt: 1 };
    await stores[0]!.create(job, initialProgress(job), true);
    await stores[1]!.create(job, initialProgress(job), false);

    // A member that hears the bus like the coordinator, after it (the hub delivers in member order).
    const heard: PublishBusMessage[] = [];
    hub.bus().onMessage((m) => heard.push(m));

    busC.deaf = true; // the coordinator is not listening yet
    c1.partFinished(report(id, 1, 1));
    // The report went out on the bus (the listener heard it); anything the coordinator took from
    // it would be queued before a marker put on the coordinator's queue now.
    await until(() => heard.some((m) => m.type === 'finished' && m.report.publishId === id), 'the report on the bus', 5000);
    const marker = publishIdFor(0, 'pubid-marker');
    await flushedBy(() => c0.partFinished(report(marker, 0, 1)), () => stores[0]!.coordinator(marker)?.parts[0] !== undefined, "the marker through the coordinator's queue", 5000);
    expect(stores[0]!.coordinator(id)!.parts[1]).toBeUndefined();
    busC.deaf = false;
    await until(() => stores[0]!.coordinator(id)!.parts[1] !== undefined, 'stores[0]!.coordinator(id)!.parts[1] !== undefined', 5000);
    await until(() => stores[1]!.progress(id)!.reported, 'stores[1]!.progress(id)!.reported', 5000);

    // Shard 0 stores its own report, then the process dies before FINISHED is queued.
    await stores[0]!.saveReport(report(id, 0, 4));
    expect(emitter.push).toEqual([]);
    await c0.close();
    coordinators.splice(coordinators.indexOf(c0), 1);

    const restartedEmitter = new RecordingEmitter();
    const restarted = new PublishCoordinator({ shardIndex: 0, shardCount: 2, publishes: stores[0]!, webhooks: restartedEmitter, bus: hub.bus() });
    coordinators.push(restarted);
    restarted.resume([]);
    await until(() => restartedEmitter.push.length === 1, 'restartedEmitter.push.length === 1', 5000);
    expect(restartedEmitter.push[0]).toMatchObject({ kind: 'publish.FINISHED', payload: { status: 'FINISHED', results: { fcm: { recipients: 7, sent: 5 } } } });
    await until(() => stores[0]!.coordinator(id)!.finalized, 'stores[0]!.coordinator(id)!.finalized', 5000);
  });
});
