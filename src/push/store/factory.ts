/**
 * Which push device store a shard uses: PostgreSQL when the cluster has `cluster.postgresUrl`
 * (every node shares it), else the shard's own LMDB environment.
 */
import type { ShardContext } from '../../shards/context.js';
import type { PushDeviceStore } from './device-store.js';
import { LmdbDeviceStore } from './lmdb-device-store.js';
import { PostgresDeviceStore } from './postgres/postgres-device-store.js';

export function createDeviceStore(ctx: ShardContext): PushDeviceStore {
  const url = ctx.config.cluster?.postgresUrl;
  if (url) return new PostgresDeviceStore({ url, shardIndex: ctx.shardIndex, shardCount: ctx.shardCount });
  return new LmdbDeviceStore(ctx.root);
}
