/**
 * GET /metrics: the Prometheus text format (metrics/prometheus.ts); `?format=json` answers the
 * webhook counters as JSON, summed over the shards (per-shard figures alongside).
 * Unauthenticated like /health; it carries counts only, never URLs or secrets.
 */
import type { ServerContext } from '../server-context.js';
import type { HeraldMetrics } from '../metrics/prometheus.js';
import type { WebhookStats } from '../webhooks/shard-api.js';
import type { Route } from './router.js';

/** Sums every numeric field of the shards' webhook stats except the shard index. */
export function sumWebhookStats(perShard: readonly WebhookStats[]): Omit<WebhookStats, 'shard'> {
  const total = { sent: 0, requests: 0, failedAttempts: 0, deadLettered: 0, suppressed: 0, pending: 0, held: 0, inFlight: 0, receivers: 0, deadLetterStored: 0 };
  for (const s of perShard) {
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += s[k];
  }
  return total;
}

export function metricsRoutes(ctx: ServerContext, metrics: HeraldMetrics): Route[] {
  return [
    {
      method: 'get',
      pattern: '/metrics',
      options: { errorStyle: 'plain', bodyLimit: 0, headers: [] },
      servedWhileDraining: true,
      handler: async (rc) => {
        if (new URLSearchParams(rc.query).get('format') !== 'json') {
          return { status: 200, body: await metrics.render(), headers: { 'content-type': metrics.contentType } };
        }
        try {
          const shards = await ctx.shards.broadcast({ type: 'webhooks.stats' }, 2000);
          return { status: 200, body: { webhooks: { ...sumWebhookStats(shards), shards } } };
        } catch {
          return { status: 503, body: { error: 'a shard did not answer' } };
        }
      },
    },
  ];
}
