import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { openShardDatabase } from '../../../../../src/shards/storage.js';
import { LmdbPublishStore } from '../../../../../src/push/shard/publishes/lmdb-publish-store.js';
import { initialProgress } from '../../../../../src/push/store/publish-record-store.js';
import type { PublishJob } from '../../../../../src/push/messages/publishes.js';
import { ReportStore } from '../../../../../src/push/shard/reports/report-store.js';
import { removeReportsOfGonePublishes } from '../../../../../src/push/shard/reports/prune.js';

const A = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const B = '0f5e4d3c-2b1a-4987-8654-3210fedcba98';

let dir: string | undefined;
let root: RootDatabase | undefined;

afterEach(async () => {
  await root?.close();
  root = undefined;
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

function stores(): { reports: ReportStore; publishes: LmdbPublishStore } {
  dir = mkdtempSync(join(tmpdir(), 'herald-report-prune-'));
  root = openShardDatabase(join(dir, 'shard-0'));
  return { reports: new ReportStore(root), publishes: new LmdbPublishStore(root) };
}

async function storePublish(publishes: LmdbPublishStore, instanceId: string, publishId: string, finishedAt: number): Promise<void> {
  const job: PublishJob = { publishId, instanceId, kind: 'interests', targets: ['news'], payloads: { fcm: {} }, acceptedAt: finishedAt - 10 };
  const progress = initialProgress(job);
  await publishes.create(job, progress, false);
  await publishes.saveProgress({ ...progress, state: 'finished', startedAt: finishedAt - 5, finishedAt, updatedAt: finishedAt });
}

function delivery(instanceId: string, publishId: string, deviceId: string) {
  return { instanceId, publishId, deviceId, kind: 'delivery' as const, timestampSecs: 1 };
}

describe('removeReportsOfGonePublishes', () => {
  it('removes the reports of publishes the shard no longer keeps, and only those', async () => {
    const { reports, publishes } = stores();
    await storePublish(publishes, A, 'pubid-old', 1_000);
    await storePublish(publishes, A, 'pubid-new', 5_000);
    await reports.record(delivery(A, 'pubid-old', 'd1'));
    await reports.record(delivery(A, 'pubid-new', 'd1'));
    // Counts under another instance than the publish's: not that instance's publish.
    await reports.record(delivery(B, 'pubid-new', 'd2'));

    const removedIds: string[] = [];
    expect(await removeReportsOfGonePublishes(reports, publishes, undefined, (id) => removedIds.push(id))).toBe(1);
    expect(removedIds).toEqual(['pubid-new']);
    expect(reports.countsFor(A, 'pubid-old').delivered).toBe(1);
    expect(reports.countsFor(A, 'pubid-new').delivered).toBe(1);
    expect(reports.countsFor(B, 'pubid-new').delivered).toBe(0);

    // The publish retention sweeps the old publish: its reports go on the next run.
    expect((await publishes.sweep(2_000)).publishes).toBe(1);
    expect(await removeReportsOfGonePublishes(reports, publishes)).toBe(1);
    expect(reports.countsFor(A, 'pubid-old').delivered).toBe(0);
    expect(reports.has(A, 'pubid-old', 'delivery', 'd1')).toBe(false);
    expect(reports.countsFor(A, 'pubid-new').delivered).toBe(1);
    expect(await removeReportsOfGonePublishes(reports, publishes)).toBe(0);
  });

  it('stops when asked to', async () => {
    const { reports, publishes } = stores();
    await reports.record(delivery(A, 'pubid-gone', 'd1'));
    expect(await removeReportsOfGonePublishes(reports, publishes, () => true)).toBe(0);
    expect(reports.countsFor(A, 'pubid-gone').delivered).toBe(1);
  });
});
