/**
 * A scan given a partition (a cluster publish's) answers for the devices whose id hash falls
 * in it, whichever shard asks: the partitions of a publish together reach each device once,
 * resumes stay exact. Against both device stores.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { inScanPartition, type PushDeviceStore, type ScanPartition, type ScanSteps } from '../../../../src/push/store/device-store.js';
import { LmdbDeviceStore } from '../../../../src/push/store/lmdb-device-store.js';
import { PostgresDeviceStore } from '../../../../src/push/store/postgres/postgres-device-store.js';
import { openShardDatabase } from '../../../../src/shards/storage.js';
import { filePostgresServer } from '../../../helpers/file-postgres.js';

const I = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const postgres = filePostgresServer();

async function drain(scan: ScanSteps, stopAfter = Infinity): Promise<{ ids: string[]; last: { listIndex: number; afterDeviceId: string | null } | undefined }> {
  const ids: string[] = [];
  let last;
  for (;;) {
    const step = await scan.next();
    if (step.done) break;
    last = step.value.position;
    if (step.value.device) ids.push(step.value.device.id);
    if (ids.length >= stopAfter) {
      scan.return(undefined);
      break;
    }
  }
  return { ids, last };
}

async function checkPartitions(store: PushDeviceStore): Promise<void> {
  const ids = Array.from({ length: 300 }, (_, k) => `dev-${String(k).padStart(3, '0')}`);
  for (const [k, id] of ids.entries()) {
    await store.register({ instanceId: I, deviceId: id, platform: 'fcm', token: `tok-${k}` });
    await store.replaceInterests(I, id, k % 2 === 0 ? ['a', 'b'] : ['b']);
    await store.setUser(I, id, `user-${k % 7}`);
  }
  const count = 4;
  const reached: string[] = [];
  for (let index = 0; index < count; index++) {
    const partition: ScanPartition = { index, count };
    // Half a partition, then resumed from its position: nothing skipped, nothing twice.
    const first = await drain(store.scanInterestSteps(I, ['a', 'b'], undefined, partition), 20);
    const rest = await drain(store.scanInterestSteps(I, ['a', 'b'], first.last, partition));
    const mine = [...first.ids, ...rest.ids];
    expect(mine.every((id) => inScanPartition(id, partition))).toBe(true);
    reached.push(...mine);
    const users = await drain(store.scanUserSteps(I, Array.from({ length: 7 }, (_, u) => `user-${u}`), undefined, partition));
    expect(users.ids.sort()).toEqual([...mine].sort());
    const named = await drain(store.scanDeviceSteps(I, ids, undefined, partition));
    expect(named.ids.sort()).toEqual([...mine].sort());
  }
  expect(reached.sort()).toEqual(ids);
}

describe('scans narrowed to a partition', () => {
  it('lmdb: the partitions together reach each device once, resumable', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-scan-partition-'));
    const root = openShardDatabase(join(dir, 'shard-0'));
    try {
      await checkPartitions(new LmdbDeviceStore(root));
    } finally {
      await root.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('postgres: the partitions together reach each device once, whichever shard scans', async () => {
    const url = await postgres().createDatabase(`scan_partition_${process.pid}`);
    // Shard 1 of 3 scans: the partition, not its shard, decides.
    const store = new PostgresDeviceStore({ url, shardIndex: 1, shardCount: 3 });
    try {
      await checkPartitions(store);
    } finally {
      await store.close();
    }
  });
});
