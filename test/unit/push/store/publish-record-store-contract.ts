/**
 * The contract every PublishRecordStore keeps (src/push/store/publish-record-store.ts), run
 * against the shard's LMDB store and the cluster's PostgreSQL store alike
 * (lmdb-publish-record-store.test.ts, postgres-publish-store.test.ts).
 */
import { describe, expect, it } from 'vitest';
import type { PublishJob } from '../../../../src/push/messages/publishes.js';
import { emptyGatewayCounts, userBitsOf, userIndexOf, userAttemptOutcome } from '../../../../src/push/publish-results.js';
import type { ProgressRecord, PublishRecordStore } from '../../../../src/push/store/publish-record-store.js';

const A = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const B = '2f0c8a51-3b6d-4e7f-8a9b-0c1d2e3f4a5b';

export interface PublishRecordFixture {
  store: PublishRecordStore;
  /** Stores a new publish and answers the record of the (one) part this store may checkpoint. */
  createPublish(job: PublishJob): Promise<ProgressRecord>;
  close(): Promise<void>;
}

let seq = 0;
function job(kind: PublishJob['kind'], targets: string[], instanceId = A): PublishJob {
  return { publishId: `pubid-contract-${process.pid}-${++seq}`, instanceId, kind, targets, payloads: { fcm: { notification: { title: 't' } } }, acceptedAt: 1_000 + seq };
}

function finished(record: ProgressRecord, finishedAt: number, sent: number): ProgressRecord {
  const gateways = emptyGatewayCounts();
  gateways.fcm = { recipients: sent, sent, failed: 0, removed: 0 };
  return { ...record, state: 'finished', startedAt: finishedAt - 1, finishedAt, updatedAt: finishedAt, recipients: sent, gateways, position: { listIndex: 0, afterDeviceId: 'z' } };
}

export function publishRecordStoreContract(name: string, open: () => Promise<PublishRecordFixture>): void {
  describe(`PublishRecordStore contract: ${name}`, () => {
    it('answers a checkpoint in the statistics of the instance only, and knows the publish', async () => {
      const f = await open();
      try {
        const j = job('interests', ['news']);
        const record = await f.createPublish(j);
        expect(await f.store.instanceOf(j.publishId)).toBe(A);
        expect(await f.store.instanceOf('pubid-unknown')).toBeUndefined();
        const running: ProgressRecord = { ...record, state: 'sending', startedAt: 5, recipients: 3, gateways: { ...emptyGatewayCounts(), fcm: { recipients: 3, sent: 2, failed: 1, removed: 0, errors: { UNREGISTERED: 1 } } } };
        await f.store.saveProgress(running);
        const parts = await f.store.statsParts(A, j.publishId);
        expect(parts).toHaveLength(1);
        expect(parts[0]).toMatchObject({ publishId: j.publishId, instanceId: A, state: 'sending', startedAt: 5, recipients: 3, gateways: { fcm: { sent: 2, failed: 1, errors: { UNREGISTERED: 1 } } } });
        expect(await f.store.statsParts(B, j.publishId)).toEqual([]);
        expect(await f.store.statsParts(A, 'pubid-unknown')).toEqual([]);
      } finally {
        await f.close();
      }
    });

    it('adds the usage of a checkpoint with it, per instance and month', async () => {
      const f = await open();
      try {
        const j = job('interests', ['news']);
        const record = await f.createPublish(j);
        await f.store.saveProgress({ ...record, state: 'sending', recipients: 10 }, { instanceId: A, month: '2026-11', notifications: 10 });
        await f.store.saveProgress({ ...record, state: 'sending', recipients: 25 }, { instanceId: A, month: '2026-11', notifications: 15 });
        await f.store.saveProgress({ ...record, state: 'sending', recipients: 26 }, { instanceId: A, month: '2026-12', notifications: 1 });
        expect(await f.store.usage(A, '2026-11')).toBe(25);
        expect(await f.store.usage(A, '2026-12')).toBe(1);
        expect(await f.store.usage(B, '2026-11')).toBe(0);
      } finally {
        await f.close();
      }
    });

    it('keeps a user publish\'s outcome as bits, the targets travelling with the statistics once', async () => {
      const f = await open();
      try {
        const targets = ['carol', 'alice', 'bob', 'alice'];
        const j = job('users', targets);
        const record = await f.createPublish(j);
        const index = userIndexOf(targets);
        const users = { withDevices: userBitsOf(['alice', 'bob'], index), deliveredToGateway: userBitsOf(['alice'], index) };
        await f.store.saveProgress({ ...finished(record, 50, 2), users });
        const parts = await f.store.statsParts(A, j.publishId);
        expect(parts.filter((p) => p.users?.targets !== undefined)).toHaveLength(1);
        const withTargets = parts.find((p) => p.users?.targets !== undefined)!;
        expect(withTargets.users!.targets).toEqual(['alice', 'bob', 'carol']);
        expect(userAttemptOutcome(withTargets.users!.targets!, parts.map((p) => p.users ?? {}))).toEqual({
          users_delivered_to_gateway: ['alice'],
          users_gateway_failed: ['bob'],
          users_no_devices: ['carol'],
        });
      } finally {
        await f.close();
      }
    });

    it('sweeps the publishes finished before the cutoff and keeps the others', async () => {
      const f = await open();
      try {
        const old = job('interests', ['a']);
        const recent = job('interests', ['a']);
        const running = job('interests', ['a']);
        await f.store.saveProgress(finished(await f.createPublish(old), 100, 1));
        await f.store.saveProgress(finished(await f.createPublish(recent), 10_000, 1));
        await f.store.saveProgress({ ...(await f.createPublish(running)), state: 'sending' });
        const swept = await f.store.sweep(5_000);
        expect(swept.publishes).toBe(1);
        expect(await f.store.statsParts(A, old.publishId)).toEqual([]);
        expect(await f.store.instanceOf(old.publishId)).toBeUndefined();
        expect(await f.store.statsParts(A, recent.publishId)).toHaveLength(1);
        expect(await f.store.statsParts(A, running.publishId)).toHaveLength(1);
        expect((await f.store.sweep(5_000)).publishes).toBe(0);
      } finally {
        await f.close();
      }
    });
  });
}
