/**
 * The push fan-out read path (src/push/shard/devices/lmdb-devices.ts `LmdbDevices.scanInterests`):
 * walking an interest's devices in a shard's LMDB store. Seeds a temp store first (100k
 * devices; 10k with --quick): every device has interest `all` and one of ten `group-<k>`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbDevices, openShardStore } from '../../../../src/push/shard/devices/lmdb-devices.js';
import type { MicroSuite } from '../../../micro-suite.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const GROUPS = 10;
/** Writes issued before awaiting them: lmdb-js commits them in a few batched transactions. */
const SEED_CHUNK = 5_000;

function count(iterable: Iterable<unknown>): number {
  let n = 0;
  for (const _ of iterable) n++;
  return n;
}

export const suite: MicroSuite = {
  source: 'src/push/shard/devices/lmdb-devices.ts',
  // A full scan of 100k devices takes ~0.4 s: 8 samples are enough.
  minIterations: 8,
  async setup(bench, { quick }) {
    const devices = quick ? 10_000 : 100_000;
    const dir = mkdtempSync(join(tmpdir(), 'herald-bench-store-'));
    const root = openShardStore(dir);
    const store = new LmdbDevices(root);
    const seedStart = performance.now();
    for (let start = 0; start < devices; start += SEED_CHUNK) {
      const writes: Promise<unknown>[] = [];
      for (let i = start; i < Math.min(devices, start + SEED_CHUNK); i++) {
        const id = `fcm-${i.toString(16).padStart(8, '0')}`;
        writes.push(store.register({ instanceId: INSTANCE, deviceId: id, platform: 'fcm', token: `token-${i}-${'t'.repeat(140)}`, metadata: { sdkVersion: '2.0.0', androidVersion: '14' } }));
        writes.push(store.replaceInterests(INSTANCE, id, ['all', `group-${i % GROUPS}`]));
      }
      await Promise.all(writes);
    }
    const seededIn = performance.now() - seedStart;
    const perGroup = count(store.scanInterests(INSTANCE, ['group-3']));
    if (perGroup !== devices / GROUPS) throw new Error(`seeded store has ${perGroup} devices in group-3, expected ${devices / GROUPS}`);
    process.stdout.write(`  (seeded ${devices} devices in ${(seededIn / 1000).toFixed(1)} s)\n`);
    bench.add(`scanInterests 1 interest → ${devices / GROUPS} devices`, () => {
      count(store.scanInterests(INSTANCE, ['group-3']));
    });
    bench.add(`scanInterests 1 interest → ${devices} devices`, () => {
      count(store.scanInterests(INSTANCE, ['all']));
    });
    bench.add(`scanInterests 2 overlapping → ${devices} devices (de-duplicated)`, () => {
      count(store.scanInterests(INSTANCE, ['all', 'group-3']));
    });
    return {
      teardown: async () => {
        await root.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
};
