/**
 * Opens a shard's LMDB environment with settings under which an awaited write is durable:
 * a resolved write promise means the transaction is committed and synced to disk.
 * lmdb-js turns overlappingSync on by default on Linux, where a write promise resolves before
 * the flush; with it off, mdb_txn_commit syncs inside the commit (checked with strace).
 * Do not turn on useWritemap: the push store's childTransaction needs it off.
 */
import { open, type RootDatabase } from 'lmdb';

export function openShardDatabase(path: string): RootDatabase {
  return open({
    path,
    // Values are msgpackr-encoded (lmdb-js default); areas choose their own key encodings.
    compression: false,
    // Named databases: push (4), webhooks, publishes, reports, with room to grow.
    maxDbs: 64,
    // Commit promises resolve only after the data is on disk.
    overlappingSync: false,
    noSync: false,
    mapSize: 2 * 1024 ** 3,
  });
}
