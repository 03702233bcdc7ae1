/** The publish record store contract against the shard's LMDB store (one shard, coordinating every publish). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { initialProgress } from '../../../../src/push/store/publish-record-store.js';
import { LmdbPublishStore } from '../../../../src/push/shard/publishes/lmdb-publish-store.js';
import { openShardDatabase } from '../../../../src/shards/storage.js';
import { publishRecordStoreContract } from './publish-record-store-contract.js';

publishRecordStoreContract('lmdb (a shard\'s own part)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-publish-contract-'));
  const root = openShardDatabase(join(dir, 'shard-0'));
  const store = new LmdbPublishStore(root);
  return {
    store,
    createPublish: async (job) => {
      const record = initialProgress(job);
      await store.create(job, record, true);
      return record;
    },
    close: async () => {
      await root.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
