/**
 * Opens a shard's LMDB environment with settings under which an awaited write is durable:
 * a resolved write promise means the transaction is committed and synced to disk.
 */
import { open, type RootDatabase } from 'lmdb';

export function openShardDatabase(path: string): RootDatabase {
  return open({
    path,
    // Keys are strings or arrays (ordered-binary); values use msgpackr structured clone.
    compression: false,
    // Commit promises resolve only after the data is on disk.
    overlappingSync: false,
    noSync: false,
    mapSize: 2 * 1024 ** 3,
  });
}
