/**
 * Worker-thread entry of the seeder (bench/push/seed.ts): fills ONE shard's LMDB environment
 * with that shard's devices of the dataset, with the ids and tokens Herald's device API would
 * give them (checkGatewayToken, deviceIdFor with the data dir's installation secret,
 * deviceShardFor) and the stored bytes of LmdbDevices.register + replaceInterests, written
 * through the bench's bulk path (seed-bulk.ts: same encoders, no per-device child transactions).
 *
 * Speed: thousands of devices per outer `transactionSync`, one synced commit each, written in
 * device-id order so every database is appended to.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { deviceIdFor } from '../../src/push/http/devices/device-id.js';
import { checkGatewayToken } from '../../src/push/http/devices/gateway-token.js';
import { LmdbDevices, openShardStore } from '../../src/push/shard/devices/lmdb-devices.js';
import { deviceShardFor } from '../../src/shards/hash.js';
import { BulkDeviceWriter, type NewDevice } from './seed-bulk.js';
import { benchDevice, BENCH_INSTANCE } from './dataset.js';

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
const writer = new BulkDeviceWriter(root);
const store = new LmdbDevices(root);
const instanceId = BENCH_INSTANCE.instanceId;

const mine: NewDevice[] = [];
for (let i = 0; i < data.devices; i++) {
  const device = benchDevice(i);
  const checked = checkGatewayToken(device.platform, device.token);
  if (!checked.ok) throw new Error(`dataset token ${i} is not accepted by Herald: ${checked.reason}`);
  const id = deviceIdFor(data.installSecret, instanceId, device.platform, checked.token);
  if (deviceShardFor(id, data.shardCount) === data.shardIndex) mine.push({ ...device, id, token: checked.token });
}
// In id order every database is appended to, so pages are filled and each commit touches few.
mine.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
let written = 0;
for (let start = 0; start < mine.length; start += data.batchSize) {
  const batch = mine.slice(start, start + data.batchSize);
  writer.writeNew(instanceId, batch);
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
