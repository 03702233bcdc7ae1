/**
 * The publish area of one shard, as both implementations answer it: one node's
 * (handlers.ts, every shard runs its own part of each publish over its LMDB) and a cluster's
 * (cluster-handlers.ts, partitions claimed from PostgreSQL by any node's shard). Which one a
 * shard runs is picked once, in push/shard-handlers.ts, by its publish record store.
 */
import type { HeraldConfig } from '../../../config/schema.js';
import type { ShardArea } from '../../../shards/context.js';
import type { PublishJob, PublishShardApi, PublishShardStats } from '../../messages/publishes.js';

export interface PublishArea {
  /**
   * `publish.start`: resolves once the publish is durably stored where this shard stores it (or
   * it is not this shard's to store); the fan-out starts after the answer. Throws
   * PUBLISH_BACKLOG_FULL past `maxPendingBytesPerInstance` (nothing stored) and
   * SHARD_UNAVAILABLE while closing.
   */
  start(job: PublishJob): Promise<{ stored: true }>;
  /**
   * `publish.cancel` (not every shard stored the publish): stops its runs here and marks it
   * cancelled, never resumed nor reported; `cancelled` says whether this shard had it stored.
   */
  cancel(publishId: string): Promise<{ cancelled: boolean }>;
  /** `publish.stats`: the parts this shard answers for (live while they run), when the publish is the instance's. */
  stats(instanceId: string, publishId: string): { parts: PublishShardStats[]; partCount: number } | Promise<{ parts: PublishShardStats[]; partCount: number }>;
  /** `publish.usage`: the instance's notifications this month that this shard answers for, those not yet checkpointed included. */
  usage(instanceId: string): { month: string; notifications: number } | Promise<{ month: string; notifications: number }>;
  /** Gateway settings (and the bounds a node keeps) changed. */
  reload(config: Readonly<HeraldConfig>): void;
  /** Stops the runs at a checkpoint; resolves once what they wrote is durable and the stores are released. */
  close(): Promise<void>;
}

/** The shard area answering the publish requests with `area`. */
export function publishShardArea(area: PublishArea): ShardArea<PublishShardApi> {
  return {
    handlers: {
      'publish.start': ({ job }) => area.start(job),
      'publish.cancel': ({ publishId }) => area.cancel(publishId),
      'publish.stats': ({ instanceId, publishId }) => area.stats(instanceId, publishId),
      'publish.usage': ({ instanceId }) => area.usage(instanceId),
    },
    reload: (config) => area.reload(config),
    close: () => area.close(),
  };
}
