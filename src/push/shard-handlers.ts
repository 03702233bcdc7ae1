/**
 * Shard side of the push area: devices (records, interests, users), publish fan-out and
 * delivery reports. One device store per shard (its LMDB environment, or the cluster's
 * PostgreSQL: push/store/factory.ts) and one PublishStore over the shard's LMDB environment,
 * shared by the three sub-areas.
 */
import { mergeHandlers, type ShardArea, type ShardContext } from '../shards/context.js';
import type { PushShardApi } from './messages/index.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';
import { createDeviceStore, createFanOutDeviceStore, createSharedPublishStore } from './store/factory.js';
import { createClusterPublishArea } from './shard/publishes/partitions.js';
import { PublishStore } from './shard/publishes/publish-store.js';
import { createDeviceArea } from './shard/devices/handlers.js';
import { createPublishArea } from './shard/publishes/handlers.js';
import { createReportArea } from './shard/reports/handlers.js';
import type { PushAreaDeps } from './shard/deps.js';

/** Requests that add records; refused while the disk is full (deletes and reads go on). */
const STORAGE_WRITES: readonly (keyof PushShardApi & string)[] = [
  'device.register',
  'device.setMetadata',
  'device.setToken',
  'device.setUser',
  'device.replaceInterests',
  'device.addInterest',
  'publish.start',
  'report.record',
];

/** Builds the push area of one shard (its stores opened once, then its three sub-areas). */
export function createPushArea(ctx: ShardContext, webhooks: WebhookEmitter): ShardArea<PushShardApi> {
  const shared = createSharedPublishStore(ctx);
  const deps: PushAreaDeps = { ctx, store: createDeviceStore(ctx), publishes: new PublishStore(ctx.root), webhooks, ...(shared ? { shared } : {}) };
  const fanOut = shared ? createFanOutDeviceStore(ctx) : undefined;
  const publishArea = shared && fanOut ? createClusterPublishArea(deps, shared, fanOut) : createPublishArea(deps);
  const areas = [createDeviceArea(deps), publishArea, createReportArea(deps)];
  return {
    handlers: mergeHandlers(areas.map((a) => a.handlers)) as unknown as ShardArea<PushShardApi>['handlers'],
    storageWrites: STORAGE_WRITES,
    reload: (config) => {
      for (const area of areas) area.reload?.(config);
    },
    // Apps changed at run time concern no push area; push instances changed: as a reload.
    tenantsChanged: (change, config) => {
      if ((change.push?.length ?? 0) === 0 && (change.removedPush?.length ?? 0) === 0) return;
      for (const area of areas) area.reload?.(config);
    },
    close: async () => {
      for (const area of areas) await area.close?.();
      await deps.store.close();
      await fanOut?.close();
    },
  };
}
