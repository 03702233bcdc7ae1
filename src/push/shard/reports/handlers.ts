/**
 * Shard side of push reporting: records R1/R2 reports on the shard of their device, answers
 * per-publish counts, emits the user webhooks (acknowledgement, open) and removes the reports
 * of publishes the shard no longer keeps.
 *
 * Reports carry no credentials (the SDKs send none), so a report counts only when this shard
 * knows both its device (registered in the instance) and its publish (every shard stores
 * every publish of the instance when it is accepted, until the publish retention sweeps it).
 * That bounds what a stranger can write to one record per (real publish, real device, kind).
 */
import { describeError, log } from '../../../log.js';
import type { ShardArea } from '../../../shards/context.js';
import type { PushAreaDeps } from '../deps.js';
import type { PushInstanceWebhookKind } from '../../../webhooks/emitter.js';
import { ReportStore } from './report-store.js';
import { removeReportsOfGonePublishes } from './prune.js';
import type { DeliveryReport, ReportKind, ReportShardApi } from '../../messages/reports.js';
import type { PostgresPublishStore } from '../../store/postgres/postgres-publish-store.js';
import { shardForKey } from '../../../shards/hash.js';
import { instanceOfNamespace } from '../../store/namespaces.js';

/** How often a shard removes the reports of publishes it no longer keeps (ms). */
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
/** First prune after start-up (ms): not at once, so start-up stays quick. */
const FIRST_PRUNE_DELAY_MS = 60 * 1000;
/** Publishes remembered as known, so a burst of reports for one publish reads its record once. */
const KNOWN_PUBLISH_CACHE = 1024;

const WEBHOOK_KIND: Record<ReportKind, PushInstanceWebhookKind> = {
  delivery: 'v1.UserNotificationAcknowledgement',
  open: 'v1.UserNotificationOpen',
};

/** The reporting handlers of one shard, over its LMDB environment; close() stops the background prune. */
export function createReportArea(deps: PushAreaDeps): ShardArea<ReportShardApi> {
  const { ctx, store: devices, publishes, webhooks, shared } = deps;
  if (shared) return createSharedReportArea(deps, shared);
  const reports = new ReportStore(ctx.root);
  /** publishId → instanceId of publishes seen on this shard, oldest first. Positive answers only. */
  const knownPublishes = new Map<string, string>();

  function publishInstance(publishId: string): string | undefined {
    const cached = knownPublishes.get(publishId);
    if (cached !== undefined) return cached;
    const instanceId = publishes.progress(publishId)?.instanceId;
    if (instanceId === undefined) return undefined;
    knownPublishes.set(publishId, instanceId);
    if (knownPublishes.size > KNOWN_PUBLISH_CACHE) knownPublishes.delete(knownPublishes.keys().next().value!);
    return instanceId;
  }

  let closing = false;
  let pruning: Promise<void> | undefined;
  const prune = (): void => {
    if (pruning) return;
    pruning = removeReportsOfGonePublishes(reports, publishes, () => closing, (publishId) => knownPublishes.delete(publishId))
      .then(() => undefined)
      .catch((err: unknown) => log.error('report pruning failed', { shard: ctx.shardIndex, error: describeError(err) }))
      .finally(() => {
        pruning = undefined;
      });
  };
  let interval: NodeJS.Timeout | undefined;
  const first = setTimeout(() => {
    prune();
    interval = setInterval(prune, PRUNE_INTERVAL_MS);
  }, FIRST_PRUNE_DELAY_MS);

  function emitUserWebhook(report: DeliveryReport): void {
    webhooks.pushEvent({
      instanceId: instanceOfNamespace(report.instanceId),
      kind: WEBHOOK_KIND[report.kind],
      payload: { instance_id: instanceOfNamespace(report.instanceId), publish_id: report.publishId, user_id: report.userId },
    });
  }

  return {
    handlers: {
      'report.record': async ({ report }) => {
        const device = await devices.get(report.instanceId, report.deviceId);
        if (!device) return { outcome: 'unknown-device' };
        if (publishInstance(report.publishId) !== report.instanceId) return { outcome: 'unknown-publish' };
        // Duplicates (SDK retries are common) are answered from a read: no write, no webhook.
        if (reports.has(report.instanceId, report.publishId, report.kind, report.deviceId)) return { outcome: 'duplicate' };
        // A webhook names a user only when the device belongs to that user, so a report cannot
        // make Herald vouch for someone else's user id. It is queued in the same turn as the
        // record's write is issued, and the outbox write commits no later (LMDB commits in
        // order): a recorded report always has its webhook, even across a crash. At least
        // once: two copies of one report racing here may both queue it.
        if (report.userId !== undefined && report.userId === device.userId) emitUserWebhook(report);
        return { outcome: await reports.record(report) };
      },

      'report.counts': ({ instanceId, publishId }) => reports.countsFor(instanceId, publishId),
    },
    close: async () => {
      closing = true;
      clearTimeout(first);
      if (interval) clearInterval(interval);
      await pruning;
    },
  };
}

/**
 * Reporting in a cluster with `cluster.postgresUrl`: reports live in PostgreSQL
 * (`herald_push_reports`, deleted with their publish by its retention), so any node records
 * and counts them. The counts of a publish are answered by its home shard (shardForKey of the
 * id) only, since every shard would read the same rows and the main thread sums the shards.
 */
function createSharedReportArea(deps: PushAreaDeps, shared: PostgresPublishStore): ShardArea<ReportShardApi> {
  const { ctx, store: devices, webhooks } = deps;
  /** publishId → instanceId of publishes seen, oldest first. Positive answers only. */
  const knownPublishes = new Map<string, string>();
  async function publishInstance(publishId: string): Promise<string | undefined> {
    const cached = knownPublishes.get(publishId);
    if (cached !== undefined) return cached;
    const instanceId = await shared.instanceOf(publishId);
    if (instanceId === undefined) return undefined;
    knownPublishes.set(publishId, instanceId);
    if (knownPublishes.size > KNOWN_PUBLISH_CACHE) knownPublishes.delete(knownPublishes.keys().next().value!);
    return instanceId;
  }
  return {
    handlers: {
      'report.record': async ({ report }) => {
        const device = await devices.get(report.instanceId, report.deviceId);
        if (!device) return { outcome: 'unknown-device' };
        if ((await publishInstance(report.publishId)) !== report.instanceId) return { outcome: 'unknown-publish' };
        // The webhook is queued inside the report's transaction: a recorded report has its webhook (at least once).
        const names = report.userId !== undefined && report.userId === device.userId;
        return {
          outcome: await shared.recordReport(report, () => {
            if (names) {
              webhooks.pushEvent({
                instanceId: instanceOfNamespace(report.instanceId),
                kind: WEBHOOK_KIND[report.kind],
                payload: { instance_id: instanceOfNamespace(report.instanceId), publish_id: report.publishId, user_id: report.userId },
              });
            }
          }),
        };
      },
      'report.counts': async ({ instanceId, publishId }) =>
        shardForKey(publishId, ctx.shardCount) === ctx.shardIndex ? shared.reportCounts(instanceId, publishId) : { delivered: 0, opened: 0 },
    },
  };
}
