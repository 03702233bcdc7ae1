/**
 * Shard side of the push area: devices (records, interests, users), publish fan-out and
 * delivery reports. One device store and one publish record store per shard (its LMDB
 * environment, or the cluster's PostgreSQL: push/store/factory.ts), shared by the three
 * sub-areas; which publish and report areas run is picked here once, by the publish store.
 *
 * Every request reaches the sub-areas with its instance id replaced by the instance's current
 * namespace (push/store/namespaces.ts), so everything they store is keyed by it: a deleted
 * instance's records are out of sight of a new instance with the same id at once, and purged
 * in the background (push/shard/purge.ts).
 */
import { mergeHandlers, type AnyHandler, type ShardArea, type ShardContext } from '../shards/context.js';
import type { PushShardApi } from './messages/index.js';
import type { PublishShardApi, PublishShardStats } from './messages/publishes.js';
import type { ReportShardApi } from './messages/reports.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';
import { createDeviceStore, createFanOutDeviceStore, createNamespaces, createPublishRecordStore } from './store/factory.js';
import { instanceOfNamespace, type PushNamespaces } from './store/namespaces.js';
import { NamespacePurge } from './shard/purge.js';
import { createClusterPublishArea } from './shard/publishes/cluster-handlers.js';
import { createDeviceArea } from './shard/devices/handlers.js';
import { createPublishArea } from './shard/publishes/handlers.js';
import { createClusterReportArea, createReportArea } from './shard/reports/handlers.js';
import type { PushDeviceStore } from './store/device-store.js';
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
  const publishes = createPublishRecordStore(ctx);
  /** A cluster's PostgreSQL: every node reads and writes the same records. */
  const shared = publishes.kind === 'postgres';
  const namespaces = createNamespaces(ctx, publishes);
  const retireListeners: ((namespace: string) => Promise<void>)[] = [];
  const deps: PushAreaDeps = {
    ctx,
    store: createDeviceStore(ctx),
    publishes,
    webhooks,
    namespaces,
    onRetire: (listener) => retireListeners.push(listener),
  };
  const deviceArea = createDeviceArea(deps);
  let fanOut: PushDeviceStore | undefined;
  let publishArea: ShardArea<PublishShardApi>;
  let reportArea: ShardArea<ReportShardApi>;
  if (publishes.kind === 'postgres') {
    fanOut = createFanOutDeviceStore(ctx);
    publishArea = createClusterPublishArea(deps, publishes, fanOut);
    reportArea = createClusterReportArea(deps, publishes);
  } else {
    publishArea = createPublishArea(deps, publishes);
    reportArea = createReportArea(deps, publishes);
  }
  const areas = [deviceArea, publishArea, reportArea];
  // In a cluster the nodes share the records: one shard per node purges (the nodes share the work).
  const purge = !shared || ctx.shardIndex === 0 ? new NamespacePurge(namespaces, ctx.shardIndex) : undefined;
  purge?.wake();
  const reloadAreas = (config: Parameters<NonNullable<ShardArea<unknown>['reload']>>[0]): void => {
    for (const area of areas) area.reload?.(config);
  };
  /** Namespaces being read again after another node's change; requests wait for them. */
  let refreshing: Promise<unknown> | undefined;

  const handlers = withNamespaces(mergeHandlers(areas.map((a) => a.handlers)), namespaces, () => refreshing);
  handlers['push.retire'] = async (req: unknown) => {
    const { instanceId, next } = req as { instanceId: string; next: string };
    await namespaces.ready();
    const retired = namespaces.current(instanceId);
    for (const listener of retireListeners) await listener(retired);
    await namespaces.retire(instanceId, next);
    purge?.wake();
    return { retired: true };
  };
  return {
    handlers: handlers as unknown as ShardArea<PushShardApi>['handlers'],
    storageWrites: STORAGE_WRITES,
    reload: reloadAreas,
    // Apps changed at run time concern no push area; push instances changed: their namespaces
    // read again (another node may have retired one), then as a reload.
    tenantsChanged: (change, config) => {
      const named = [...(change.push ?? []).map((p) => p.instanceId), ...(change.removedPush ?? [])];
      if (named.length === 0) return;
      if (shared) {
        const reading = Promise.all(named.map((id) => namespaces.refresh(id))).catch(() => undefined);
        refreshing = reading;
        void reading.then(() => {
          if (refreshing === reading) refreshing = undefined;
        });
      }
      reloadAreas(config);
    },
    close: async () => {
      await purge?.close();
      for (const area of areas) await area.close?.();
      await deps.store.close();
      await fanOut?.close();
      await namespaces.close();
    },
  };
}

/**
 * The handlers with each request's instance id (`instanceId`, `job.instanceId`,
 * `report.instanceId`) replaced by the instance's current namespace, once the namespaces are
 * read; what an answer names (publish statistics) is given back the instance id.
 */
function withNamespaces(handlers: Record<string, AnyHandler>, namespaces: PushNamespaces, refreshing: () => Promise<unknown> | undefined): Record<string, AnyHandler> {
  let ready = false;
  const wrapped = Object.create(null) as Record<string, AnyHandler>;
  for (const [type, handler] of Object.entries(handlers)) {
    const run = (req: unknown): unknown => {
      const answer = handler(inNamespace(req, namespaces));
      return type === 'publish.stats' ? Promise.resolve(answer).then(withInstanceIds) : answer;
    };
    wrapped[type] = (req) => {
      const waiting = refreshing();
      if (ready && !waiting) return run(req);
      return Promise.all([namespaces.ready(), waiting]).then(() => {
        ready = true;
        return run(req);
      });
    };
  }
  return wrapped;
}

function inNamespace(req: unknown, namespaces: PushNamespaces): unknown {
  const r = req as { instanceId?: unknown; job?: { instanceId?: unknown }; report?: { instanceId?: unknown } };
  if (typeof r.instanceId === 'string') return { ...r, instanceId: namespaces.current(r.instanceId) };
  if (typeof r.job?.instanceId === 'string') return { ...r, job: { ...r.job, instanceId: namespaces.current(r.job.instanceId) } };
  if (typeof r.report?.instanceId === 'string') return { ...r, report: { ...r.report, instanceId: namespaces.current(r.report.instanceId) } };
  return req;
}

function withInstanceIds(answer: unknown): unknown {
  const a = answer as { parts: PublishShardStats[]; partCount: number };
  return { ...a, parts: a.parts.map((p) => ({ ...p, instanceId: instanceOfNamespace(p.instanceId) })) };
}
