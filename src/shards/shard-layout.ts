/**
 * An area's on-disk layout as `herald reshard` sees it (src/reshard.ts): the LMDB databases the
 * area keeps in each shard's environment, and how its records move to another shard count.
 * Each area declares its own next to its store (the database names are defined there once and
 * used by the store too); src/shard-layouts.ts lists them, as shard-worker.ts lists the areas.
 * The reshard itself knows no area: it reads the old environments, hands them to each layout,
 * writes what the layouts put, and checks the counts.
 */
import type { Key } from 'lmdb';
import { DataDirError } from './data-dir.js';

/** A reshard that cannot run (server running, publish in flight, unknown data); nothing was changed. */
export class ReshardError extends DataDirError {}

/**
 * How the reshard opens a database: as its store does, so that records are read and written
 * as they are. `bytes`: binary keys and values, copied as bytes; `binary-keys`: binary keys,
 * msgpack values; `default`: lmdb's default (ordered keys, msgpack values).
 */
export type DatabaseEncoding = 'bytes' | 'binary-keys' | 'default';

export interface DatabaseDeclaration {
  readonly name: string;
  readonly encoding: DatabaseEncoding;
  /**
   * Every record is written once under the new count (none merged, none added): the reshard
   * then checks that the new environments hold as many records as the old ones.
   */
  readonly oneForOne?: boolean;
}

/** One stored record as read from an old shard (binary keys and values already copied out). */
export interface StoredRecord {
  key: Key;
  value: unknown;
}

/** The old shards' environments, read only. */
export interface OldShards {
  readonly count: number;
  /** Every record of the database on old shard `shard`, in key order. */
  records(shard: number, name: string): Iterable<StoredRecord>;
}

/** The new shards' environments: what is put is committed in synced batches. */
export interface NewShards {
  readonly count: number;
  put(shard: number, name: string, key: Key, value: unknown): void;
}

export interface ShardLayout {
  readonly databases: readonly DatabaseDeclaration[];
  /** Throws a ReshardError when the area's records cannot move now; runs before anything is written. */
  check?(old: OldShards): void;
  /** Puts every record of the area's databases on its shard under the new count. */
  copy(old: OldShards, out: NewShards): void;
}

/** A database whose records each go, as they are, to the shard `shardOf` names under `shards`. */
export interface PlacedDatabase extends DatabaseDeclaration {
  shardOf(record: StoredRecord, shards: number): number;
}

/** A layout of databases whose records move one by one, each to its own shard (the common case). */
export function recordByRecord(databases: readonly PlacedDatabase[]): ShardLayout {
  return {
    databases: databases.map((d) => ({ ...d, oneForOne: true })),
    copy(old, out) {
      for (const db of databases) {
        for (let i = 0; i < old.count; i++) {
          for (const record of old.records(i, db.name)) out.put(db.shardOf(record, out.count), db.name, record.key, record.value);
        }
      }
    },
  };
}
