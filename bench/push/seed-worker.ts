/**
 * Worker-thread entry of the seeder (bench/push/seed.ts): fills ONE shard's LMDB environment
 * with that shard's devices of the dataset, through the same code Herald's device API runs
 * (checkGatewayToken, deviceIdFor with the data dir's installation secret, deviceShardFor,
 * DeviceStore.register and DeviceStore.replaceInterests), so the stored bytes are exactly what
 * Herald would have written.
 *
 * Speed: each DeviceStore write method is its own child transaction; called inside an outer
 * `transactionSync` (lmdb-js then runs the child transaction synchronously, nested in the
 * outer one), thousands of devices share one synced commit instead of one fsync each.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { deviceIdFor } from '../../src/push/http/devices/device-id.js';
import { checkGatewayToken } from '../../src/push/http/devices/gateway-token.js';
import { DeviceStore, openShardStore } from '../../src/push/shard/devices/device-store.js';
import { deviceShardFor } from '../../src/shards/hash.js';
import { benchDevice, BENCH_INSTANCE, type BenchDevice } from './dataset.js';

/** What the seeder gives each worker. */
export interface SeedWorkerData {
  shardPath: string;
  shardIndex: number;
  shardCount: number;
  devices: number;
  installSecret: string;
  /** Devices per outer transaction (one synced commit each). */
  batchSize: number;
}

/** Messages a seed worker posts. */
export type SeedWorkerMessage =
  | { type: 'progress'; shardIndex: number; written: number; of: number }
  | { type: 'done'; shardIndex: number; written: number; devices: number; subscriptions: number };

const data = workerData as SeedWorkerData;
const root = openShardStore(data.shardPath);
const store = new DeviceStore(root);
const instanceId = BENCH_INSTANCE.instanceId;

interface Pending {
  id: string;
  device: BenchDevice;
}

function writeBatch(batch: readonly Pending[]): void {
  root.transactionSync(() => {
    for (const { id, device } of batch) {
      // Synchronous here (nested in transactionSync); a thrown error aborts the whole batch.
      void store.register(instanceId, id, device.platform, device.token, device.bundleIdentifier, device.metadata);
      void store.replaceInterests(instanceId, id, device.interests);
    }
  });
}

const mine: Pending[] = [];
for (let i = 0; i < data.devices; i++) {
  const device = benchDevice(i);
  const checked = checkGatewayToken(device.platform, device.token);
  if (!checked.ok) throw new Error(`dataset token ${i} is not accepted by Herald: ${checked.reason}`);
  device.token = checked.token;
  const id = deviceIdFor(data.installSecret, instanceId, device.platform, device.token);
  if (deviceShardFor(id, data.shardCount) === data.shardIndex) mine.push({ id, device });
}
// In id order every database is appended to, so pages are filled and each commit touches few.
mine.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
let written = 0;
for (let start = 0; start < mine.length; start += data.batchSize) {
  const batch = mine.slice(start, start + data.batchSize);
  writeBatch(batch);
  written += batch.length;
  parentPort!.postMessage({ type: 'progress', shardIndex: data.shardIndex, written, of: mine.length } satisfies SeedWorkerMessage);
}
const counts = store.counts(instanceId);
await root.flushed;
await root.close();
parentPort!.postMessage({
  type: 'done',
  shardIndex: data.shardIndex,
  written,
  devices: counts.devices,
  subscriptions: counts.subscriptions,
} satisfies SeedWorkerMessage);
