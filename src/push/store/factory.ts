/**
 * Which push stores a shard uses (devices, publish records, namespaces): PostgreSQL when the
 * cluster has `cluster.postgresUrl` (every node shares it), else the shard's own LMDB environment.
 */
import type { ShardContext } from '../../shards/context.js';
import type { PushDeviceStore } from './device-store.js';
import { LmdbDeviceStore } from './lmdb-device-store.js';
import { LmdbNamespaces } from './lmdb-namespaces.js';
import type { PushNamespaces } from './namespaces.js';
import { PostgresNamespaces } from './postgres/postgres-namespaces.js';
import { LmdbPublishStore } from '../shard/publishes/lmdb-publish-store.js';
import { PostgresDeviceStore } from './postgres/postgres-device-store.js';
import { leaseOwner, PostgresPublishStore } from './postgres/postgres-publish-store.js';

/**
 * The shard's publish records: the cluster's PostgreSQL with `cluster.postgresUrl` (every node
 * shares them), else the shard's own LMDB environment (push/shard/publishes/lmdb-publish-store.ts).
 */
export function createPublishRecordStore(ctx: ShardContext): LmdbPublishStore | PostgresPublishStore {
  const cluster = ctx.config.cluster;
  if (!cluster?.postgresUrl) return new LmdbPublishStore(ctx.root);
  return new PostgresPublishStore({
    url: cluster.postgresUrl,
    owner: leaseOwner(cluster.nodeId, ctx.shardIndex),
    leaseMs: cluster.publishLeaseMs,
    shardIndex: ctx.shardIndex,
    timeouts: cluster.postgresTimeouts,
  });
}

/**
 * The device store a cluster shard's publish fan-out scans partitions through: the cluster's
 * PostgreSQL over every device (not this shard's scope), since any shard of any node may claim
 * any partition. A cluster with `cluster.postgresUrl` only. Two connections: its scans and
 * dead-token deletes.
 */
export function createFanOutDeviceStore(ctx: ShardContext): PushDeviceStore {
  const cluster = ctx.config.cluster!;
  return new PostgresDeviceStore({ url: cluster.postgresUrl!, shardIndex: 0, shardCount: 1, poolSize: 2, timeouts: cluster.postgresTimeouts });
}

export function createDeviceStore(ctx: ShardContext): PushDeviceStore {
  const cluster = ctx.config.cluster;
  if (cluster?.postgresUrl) {
    return new PostgresDeviceStore({ url: cluster.postgresUrl, shardIndex: ctx.shardIndex, shardCount: ctx.shardCount, timeouts: cluster.postgresTimeouts });
  }
  return new LmdbDeviceStore(ctx.root);
}

/** The namespaces of instances (store/namespaces.ts), kept where the publish records are (an LMDB retirement purges them). */
export function createNamespaces(ctx: ShardContext, publishes: LmdbPublishStore | PostgresPublishStore): PushNamespaces {
  if (publishes.kind === 'lmdb') return new LmdbNamespaces(ctx.root, publishes);
  // A PostgreSQL publish store: the cluster has `cluster.postgresUrl`.
  const cluster = ctx.config.cluster!;
  return new PostgresNamespaces({ url: cluster.postgresUrl!, shardIndex: ctx.shardIndex, timeouts: cluster.postgresTimeouts });
}
