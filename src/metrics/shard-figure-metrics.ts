/**
 * The series read from the shards at scrape time, one round trip per scrape shared by all
 * (HeraldMetrics.shardFigures): push notification outcomes, publish records, purges and
 * resends; outbound refusals; webhook delivery; storage. Summed over the shards, except
 * storage, which is per shard. When the shards do not answer in time, the series read 0 (or
 * keep only their zero series).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { WebhookStatsReport } from '../webhooks/client.js';
import type { ShardMetrics } from '../shards/shard-metrics.js';
import { NON_PUBLIC_REASONS } from '../net/outbound-guard.js';

/** What one scrape asked of the shards; null when a shard did not answer in time. */
export interface ShardFigures {
  webhooks: WebhookStatsReport['total'];
  metrics: ShardMetrics[];
}

/** Push gateways, each exported at 0 per configured instance before its first notification. */
const GATEWAYS = ['apns', 'fcm', 'web'] as const;

/** A shard figure summed over the shards; 0 without figures. */
function summed(f: ShardFigures | null, pick: (m: ShardMetrics) => number | undefined): number {
  return f ? f.metrics.reduce((sum, m) => sum + (pick(m) ?? 0), 0) : 0;
}

/** A gauge set at each scrape to `value` of the shard figures (0 without them). */
function figureGauge(registry: Registry, figures: () => Promise<ShardFigures | null>, name: string, help: string, value: (f: ShardFigures | null) => number): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    async collect() {
      this.set(value(await figures()));
    },
  });
}

/** A counter read at each scrape as `value` of the shard figures (0 without them): the shards count, this node sums. */
function figureCounter(registry: Registry, figures: () => Promise<ShardFigures | null>, name: string, help: string, value: (f: ShardFigures | null) => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    async collect() {
      this.reset();
      this.inc(value(await figures()));
    },
  });
}

/**
 * Registers the series read from the shards in `registry`: `figures` answers the scrape's shard
 * figures, `instanceIds` the configured push instances (their series exist at 0).
 */
export function registerShardFigureMetrics(registry: Registry, figures: () => Promise<ShardFigures | null>, instanceIds: () => Set<string>): void {
  registerPushFigures(registry, figures, instanceIds);
  registerOutboundFigures(registry, figures);
  registerWebhookFigures(registry, figures);
  registerStorageFigures(registry, figures);
}

/** Push: notification outcomes per instance, gateway and reason; publish records kept; purges pending; resends. */
function registerPushFigures(registry: Registry, figures: () => Promise<ShardFigures | null>, instanceIds: () => Set<string>): void {
  new Counter({
    name: 'herald_push_notifications_total',
    help: 'Push notifications handled by the gateways, by result (sent, failed, removed) and failure reason',
    labelNames: ['instance_id', 'gateway', 'result', 'reason'],
    registers: [registry],
    async collect() {
      this.reset();
      // Sent at 0 per configured instance and gateway: a fresh node shows a rate of 0, not "no data".
      const ids = instanceIds();
      for (const instanceId of ids) for (const gateway of GATEWAYS) this.inc({ instance_id: instanceId, gateway, result: 'sent', reason: '' }, 0);
      const f = await figures();
      if (!f) return;
      for (const shard of f.metrics) {
        for (const n of shard.notifications) {
          if (ids.has(n.instanceId)) this.inc({ instance_id: n.instanceId, gateway: n.gateway, result: n.result, reason: n.reason }, n.count);
        }
      }
    },
  });
  figureGauge(
    registry,
    figures,
    'herald_push_publish_records_bytes',
    'Bytes the records of finished publishes hold on this node (counted against pushDelivery.retentionBytes; the oldest go first past it)',
    (f) => summed(f, (m) => m.publishRecordBytes),
  );
  figureGauge(
    registry,
    figures,
    'herald_push_purges_pending',
    'Deleted push instances whose records (devices, interests, users, publishes, reports) are still being removed in the background, summed over the shards that purge them',
    (f) => summed(f, (m) => m.pushPurgesPending),
  );
  figureCounter(
    registry,
    figures,
    'herald_push_publish_resends_total',
    'Notifications this node sent again because the partition holding them was reclaimed from a node whose lease expired (cluster), before their outcome was checkpointed',
    (f) => summed(f, (m) => m.publishResends),
  );
}

/** Connections not made because their address is not public, by client and reason. */
function registerOutboundFigures(registry: Registry, figures: () => Promise<ShardFigures | null>): void {
  new Counter({
    name: 'herald_outbound_refusals_total',
    help: 'Connections not made because the address is not public (web push endpoints, per-publish webhookUrls), by client and reason',
    labelNames: ['client', 'reason'],
    registers: [registry],
    async collect() {
      this.reset();
      // Every client and reason at 0, so that rate() and alerts see the series before the first refusal.
      for (const client of ['web_push', 'webhook']) for (const reason of NON_PUBLIC_REASONS) this.inc({ client, reason }, 0);
      const f = await figures();
      if (!f) return;
      for (const shard of f.metrics) {
        for (const r of shard.outboundRefusals) this.inc({ client: r.client, reason: r.reason }, r.count);
      }
    },
  });
}

/** Webhook delivery: requests by result, events delivered, dead letters, events pending. */
function registerWebhookFigures(registry: Registry, figures: () => Promise<ShardFigures | null>): void {
  new Counter({
    name: 'herald_webhook_requests_total',
    help: 'Webhook requests made, by result (ok: answered 2xx; failed: non-2xx, timeout or network error)',
    labelNames: ['result'],
    registers: [registry],
    async collect() {
      this.reset();
      const f = await figures();
      this.inc({ result: 'ok' }, f ? f.webhooks.requests : 0);
      this.inc({ result: 'failed' }, f ? f.webhooks.failedAttempts : 0);
    },
  });
  figureCounter(
    registry,
    figures,
    'herald_webhook_events_delivered_total',
    'Webhook events delivered (their request answered 2xx)',
    (f) => (f ? f.webhooks.sent : 0),
  );
  figureCounter(
    registry,
    figures,
    'herald_webhook_dead_letters_total',
    'Webhook events given up on after their last failed attempt (or whose receiver left the config); kept in the dead letters',
    (f) => (f ? f.webhooks.deadLettered : 0),
  );
  figureGauge(
    registry,
    figures,
    'herald_webhook_pending',
    'Webhook events waiting to be delivered',
    (f) => (f ? f.webhooks.pending : 0),
  );
}

/** Storage, per shard and data dir: disk full now, full episodes, writes refused. */
function registerStorageFigures(registry: Registry, figures: () => Promise<ShardFigures | null>): void {
  const storage = (pick: (s: NonNullable<ShardMetrics['storage']>) => number) =>
    async function (this: Gauge | Counter): Promise<void> {
      this.reset();
      const f = await figures();
      f?.metrics.forEach((m, shard) => {
        if (m.storage) this.inc({ shard: String(shard), data_dir: m.storage.dataDir }, pick(m.storage));
      });
    };
  new Gauge({
    name: 'herald_storage_full',
    help: '1 while a shard refuses writes because the disk of its data dir is full (reads and deletes go on), else 0',
    labelNames: ['shard', 'data_dir'],
    registers: [registry],
    collect: storage((s) => (s.full ? 1 : 0)),
  });
  new Counter({
    name: 'herald_storage_full_episodes_total',
    help: 'Times a shard found the disk of its data dir full and began refusing writes',
    labelNames: ['shard', 'data_dir'],
    registers: [registry],
    collect: storage((s) => s.episodes),
  });
  new Counter({
    name: 'herald_storage_writes_refused_total',
    help: 'Writes refused (507 STORAGE_FULL) or background writes that failed because the disk of the data dir was full',
    labelNames: ['shard', 'data_dir'],
    registers: [registry],
    collect: storage((s) => s.refusedWrites),
  });
}
