/**
 * Shard side of the push area: devices (records, interests, users), publish fan-out and
 * delivery reports. One DeviceStore and one PublishStore per shard over the shard's LMDB
 * environment, shared by the three sub-areas.
 */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { PushShardApi } from './shard-api.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';
import { DeviceStore } from './store/device-store.js';
import { PublishStore } from './publish/publish-store.js';
import { createDeviceArea } from './devices/shard-handlers.js';
import { createPublishArea } from './publish/shard-handlers.js';
import { createReportArea } from './reporting/shard-handlers.js';

/** What each push sub-area gets. */
export interface PushAreaDeps {
  ctx: ShardContext;
  store: DeviceStore;
  /** The shard's publish records: written by the publish area, read by reporting (known publishes, pruning). */
  publishes: PublishStore;
  webhooks: WebhookEmitter;
}

/** Builds the push area of one shard (its stores opened once, then its three sub-areas). */
export function createPushArea(ctx: ShardContext, webhooks: WebhookEmitter): ShardArea<PushShardApi> {
  const deps: PushAreaDeps = { ctx, store: new DeviceStore(ctx.root), publishes: new PublishStore(ctx.root), webhooks };
  const areas = [createDeviceArea(deps), createPublishArea(deps), createReportArea(deps)];
  return {
    handlers: Object.assign({}, ...areas.map((a) => a.handlers)) as ShardArea<PushShardApi>['handlers'],
    reload: (config) => {
      for (const area of areas) area.reload?.(config);
    },
    close: async () => {
      for (const area of areas) await area.close?.();
    },
  };
}
