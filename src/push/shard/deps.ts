/** What each push sub-area of a shard gets (built once per shard by push/shard-handlers.ts). */
import type { ShardContext } from '../../shards/context.js';
import type { WebhookEmitter } from '../../webhooks/emitter.js';
import type { PushDeviceStore } from '../store/device-store.js';
import { instanceOfNamespace, type PushNamespaces } from '../store/namespaces.js';
import type { PublishStore } from './publishes/publish-store.js';
import type { PostgresPublishStore } from '../store/postgres/postgres-publish-store.js';

export interface PushAreaDeps {
  ctx: ShardContext;
  /** The shard's devices: its LMDB environment, or the cluster's PostgreSQL (push/store/). */
  store: PushDeviceStore;
  /** The shard's publish records: written by the publish area, read by reporting (known publishes, pruning). */
  publishes: PublishStore;
  /**
   * A cluster with `cluster.postgresUrl`: the publish records every node shares (publishes,
   * partitions, usage, delivery reports). Then `publishes` holds nothing.
   */
  shared?: PostgresPublishStore;
  webhooks: WebhookEmitter;
  /** Where each instance's records are kept now (requests arrive with their instance id replaced by it). */
  namespaces?: PushNamespaces;
  /**
   * Called with a namespace being retired, before the retirement is recorded: an area stops
   * what it runs for it (publishes), so nothing is written to it once it is purged.
   */
  onRetire?: (listener: (namespace: string) => Promise<void>) => void;
}

/** Whether `namespace` is its instance's current one (a retired one is a deleted instance's). */
export function isCurrentNamespace(deps: Pick<PushAreaDeps, 'namespaces'>, namespace: string): boolean {
  return !deps.namespaces || deps.namespaces.current(instanceOfNamespace(namespace)) === namespace;
}
