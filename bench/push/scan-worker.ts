/**
 * Worker-thread entry of the recipient-set timing (bench/push/scan.ts): opens ONE shard's
 * LMDB environment the way a Herald shard does and, on each request, walks an audience with
 * LmdbDevices.scanInterestSteps, the generator a publish's fan-out pulls its devices from.
 *
 * Mode `index` walks only the interest index (device ids, no device records): not something
 * Herald does, but the floor under the scan, read with the store's key layout (keys.ts)
 * from the same named database.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { LmdbDevices, openShardStore } from '../../src/push/shard/devices/lmdb-devices.js';
import { lastKeyPart, prefixRange } from '../../src/push/keys.js';
import { BENCH_INSTANCE } from './dataset.js';

/** What the scan timer gives each worker. */
export interface ScanWorkerData {
  shardPath: string;
  shardIndex: number;
}

/** How to walk: Herald's scanInterestSteps (reported as `scanInterests`), or the interest index alone (one interest). */
export type ScanMode = 'scanInterests' | 'index';

/** main → worker: walk the devices of any of `interests` once. */
export interface ScanRequest {
  interests: string[];
  mode: ScanMode;
}

/** worker → main: `ready` once the environment is open; one `scanned` per request. */
export type ScanWorkerMessage =
  | { type: 'ready'; shardIndex: number }
  | { type: 'scanned'; shardIndex: number; devices: number; tokenBytes: number; ms: number };

const data = workerData as ScanWorkerData;
const root = openShardStore(data.shardPath);
const store = new LmdbDevices(root);
// The interest index as LmdbDevices opens it (same name and encodings).
const interestIndex = root.openDB<Uint8Array, Uint8Array>('push/interests', { keyEncoding: 'binary', encoding: 'binary' });

function walk(request: ScanRequest): { devices: number; tokenBytes: number } {
  let devices = 0;
  let tokenBytes = 0;
  if (request.mode === 'index') {
    if (request.interests.length !== 1) throw new Error('index mode walks one interest');
    for (const key of interestIndex.getKeys(prefixRange([BENCH_INSTANCE.instanceId, request.interests[0]!]))) {
      devices++;
      tokenBytes += lastKeyPart(key).length;
    }
    return { devices, tokenBytes };
  }
  // The step scan a publish's fan-out pulls (scanInterests wraps it to drop the progress steps).
  for (const { device } of store.scanInterestSteps(BENCH_INSTANCE.instanceId, request.interests)) {
    if (device === null) continue;
    devices++;
    tokenBytes += device.token.length; // use what the fan-out uses, so nothing is optimised away
  }
  return { devices, tokenBytes };
}

parentPort!.on('message', (request: ScanRequest | 'close') => {
  if (request === 'close') {
    void root.close().then(() => parentPort!.close());
    return;
  }
  const started = performance.now();
  const { devices, tokenBytes } = walk(request);
  const ms = performance.now() - started;
  parentPort!.postMessage({ type: 'scanned', shardIndex: data.shardIndex, devices, tokenBytes, ms } satisfies ScanWorkerMessage);
});
parentPort!.postMessage({ type: 'ready', shardIndex: data.shardIndex } satisfies ScanWorkerMessage);
