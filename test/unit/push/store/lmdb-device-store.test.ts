/** The push device store contract against the LMDB shard store: one LMDB environment per shard, in a temp dir. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LmdbDeviceStore } from '../../../../src/push/store/lmdb-device-store.js';
import { openShardDatabase } from '../../../../src/shards/storage.js';
import { deviceStoreContract } from './device-store-contract.js';

deviceStoreContract('lmdb (one environment per shard)', async (shardCount) => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-device-contract-'));
  const roots = Array.from({ length: shardCount }, (_, i) => openShardDatabase(join(dir, `shard-${i}`)));
  return {
    stores: roots.map((root) => new LmdbDeviceStore(root)),
    close: async () => {
      for (const root of roots) await root.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
