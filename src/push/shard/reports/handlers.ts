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
import type { PublishRecordStore } from '../../store/publish-record-store.js';
import type { PushDeviceStore } from '../../store/device-store.js';
import type { LmdbPublishStore } from '../publishes/lmdb-publish-store.js';
import { shardForKey } from '../../../shards/hash.js';
import { instanceOfNamespace } from '../../store/namespaces.js';
import type { WebhookEmitter } from '../../../webhooks/emitter.js';

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

/**
 * Whether a report counts: its device is registered in the instance and its publish is the
 * instance's in the publish records (positive answers cached). Reports carry no credentials,
 * so this bounds what a stranger can write.
 */
class ReportCheck {
  /** publishId → instanceId of publishes seen, oldest first. */
  private readonly known = new Map<string, string>();

  constructor(
    private readonly devices: Pick<PushDeviceStore, 'get'>,
    private readonly publishes: Pick<PublishRecordStore, 'instanceOf'>,
  ) {}

  /** The outcome refusing the report, or whether its webhook may name its user (the device belongs to that user). */
  async check(report: DeliveryReport): Promise<{ refused: 'unknown-device' | 'unknown-publish' } | { namesUser: boolean }> {
    const device = await this.devices.get(report.instanceId, report.deviceId);
    if (!device) return { refused: 'unknown-device' };
    if ((await this.instanceOf(report.publishId)) !== report.instanceId) return { refused: 'unknown-publish' };
    return { namesUser: report.userId !== undefined && report.userId === device.userId };
  }

  /** The publish's records are gone. */
  forget(publishId: string): void {
    this.known.delete(publishId);
  }

  private async instanceOf(publishId: string): Promise<string | undefined> {
    const cached = this.known.get(publishId);
    if (cached !== undefined) return cached;
    const instanceId = await this.publishes.instanceOf(publishId);
    if (instanceId === undefined) return undefined;
    this.known.set(publishId, instanceId);
    if (this.known.size > KNOWN_PUBLISH_CACHE) this.known.delete(this.known.keys().next().value!);
    return instanceId;
  }
}

/** Queues the user webhook of a report (acknowledgement or open). */
function queueUserWebhook(webhooks: WebhookEmitter, report: DeliveryReport): void {
  webhooks.pushEvent({
    instanceId: instanceOfNamespace(report.instanceId),
    kind: WEBHOOK_KIND[report.kind],
    payload: { instance_id: instanceOfNamespace(report.instanceId), publish_id: report.publishId, user_id: report.userId },
  });
}

/** The reporting handlers of one shard over its LMDB environment; close() stops the background prune. */
export function createReportArea(deps: PushAreaDeps, publishes: LmdbPublishStore): ShardArea<ReportShardApi> {
  const { ctx, webhooks } = deps;
  const reports = new ReportStore(ctx.root);
  const reportCheck = new ReportCheck(deps.store, deps.publishes);

  let closing = false;
  let pruning: Promise<void> | undefined;
  const prune = (): void => {
    if (pruning) return;
    pruning = removeReportsOfGonePublishes(reports, publishes, () => closing, (publishId) => reportCheck.forget(publishId))
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

  return {
    handlers: {
      'report.record': async ({ report }) => {
        const checked = await reportCheck.check(report);
        if ('refused' in checked) return { outcome: checked.refused };
        // Duplicates (SDK retries are common) are answered from a read: no write, no webhook.
        if (reports.has(report.instanceId, report.publishId, report.kind, report.deviceId)) return { outcome: 'duplicate' };
        // A webhook names a user only when the device belongs to that user, so a report cannot
        // make Herald vouch for someone else's user id. It is queued in the same turn as the
        // record's write is issued, and the outbox write commits no later (LMDB commits in
        // order): a recorded report always has its webhook, even across a crash. At least
        // once: two copies of one report racing here may both queue it.
        if (checked.namesUser) queueUserWebhook(webhooks, report);
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
export function createClusterReportArea(deps: PushAreaDeps, publishes: PostgresPublishStore): ShardArea<ReportShardApi> {
  const { ctx, webhooks } = deps;
  const reportCheck = new ReportCheck(deps.store, deps.publishes);
  return {
    handlers: {
      'report.record': async ({ report }) => {
        const checked = await reportCheck.check(report);
        if ('refused' in checked) return { outcome: checked.refused };
        // The webhook is queued inside the report's transaction: a recorded report has its webhook (at least once).
        return {
          outcome: await publishes.recordReport(report, () => {
            if (checked.namesUser) queueUserWebhook(webhooks, report);
          }),
        };
      },
      'report.counts': async ({ instanceId, publishId }) =>
        shardForKey(publishId, ctx.shardCount) === ctx.shardIndex ? publishes.reportCounts(instanceId, publishId) : { delivered: 0, opened: 0 },
    },
  };
}
