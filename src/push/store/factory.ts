/**
 * Which push device store a shard uses: PostgreSQL when the cluster has `cluster.postgresUrl`
 * (every node shares it), else the shard's own LMDB environment.
 */
import type { ShardContext } from '../../shards/context.js';
import type { PushDeviceStore } from './device-store.js';
import { LmdbDeviceStore } from './lmdb-device-store.js';
import { LmdbNamespaces } from './lmdb-namespaces.js';
import type { PushNamespaces } from './namespaces.js';
import { PostgresNamespaces } from './postgres/postgres-namespaces.js';
import type { PublishStore } from '../shard/publishes/publish-store.js';
import { PostgresDeviceStore } from './postgres/postgres-device-store.js';
import { leaseOwner, PostgresPublishStore } from './postgres/postgres-publish-store.js';

/**
 * The publish records every node shares, in a cluster with `cluster.postgresUrl`; undefined on
 * one node (each shard keeps its parts in its LMDB, push/shard/publishes/publish-store.ts).
 */
export function createSharedPublishStore(ctx: ShardContext): PostgresPublishStore | undefined {
  const cluster = ctx.config.cluster;
  if (!cluster?.postgresUrl) return undefined;
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
 * any partition; undefined on one node. Two connections: its scans and dead-token deletes.
 */
export function createFanOutDeviceStore(ctx: ShardContext): PushDeviceStore | undefined {
  const cluster = ctx.config.cluster;
  if (!cluster?.postgresUrl) return undefined;
  return new PostgresDeviceStore({ url: cluster.postgresUrl, shardIndex: 0, shardCount: 1, poolSize: 2, timeouts: cluster.postgresTimeouts });
}

export function createDeviceStore(ctx: ShardContext): PushDeviceStore {
  const cluster = ctx.config.cluster;
  if (cluster?.postgresUrl) {
    return new PostgresDeviceStore({ url: cluster.postgresUrl, shardIndex: ctx.shardIndex, shardCount: ctx.shardCount, timeouts: cluster.postgresTimeouts });
  }
  return new LmdbDeviceStore(ctx.root);
}

/** The namespaces of instances (store/namespaces.ts), kept where the device store keeps its records. */
export function createNamespaces(ctx: ShardContext, publishes: PublishStore): PushNamespaces {
  const url = ctx.config.cluster?.postgresUrl;
  if (url) return new PostgresNamespaces({ url, shardIndex: ctx.shardIndex, timeouts: ctx.config.cluster?.postgresTimeouts });
  return new LmdbNamespaces(ctx.root, publishes);
}
