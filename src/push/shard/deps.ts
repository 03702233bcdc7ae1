/** What each push sub-area of a shard gets (built once per shard by push/shard-handlers.ts). */
import type { ShardContext } from '../../shards/context.js';
import type { WebhookEmitter } from '../../webhooks/emitter.js';
import type { PushDeviceStore } from '../store/device-store.js';
import { instanceOfNamespace, type PushNamespaces } from '../store/namespaces.js';
import type { PublishRecordStore } from '../store/publish-record-store.js';

export interface PushAreaDeps {
  ctx: ShardContext;
  /** The shard's devices: its LMDB environment, or the cluster's PostgreSQL (push/store/). */
  store: PushDeviceStore;
  /**
   * The shard's publish records: its LMDB environment, or the cluster's PostgreSQL
   * (push/store/factory.ts). What only one of them does (an LMDB coordinator's records, a
   * cluster's partition leases) reaches the area written for it, picked once in
   * push/shard-handlers.ts.
   */
  publishes: PublishRecordStore;
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
