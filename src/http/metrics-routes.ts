/**
 * GET /metrics: the Prometheus text format (metrics/prometheus.ts); `?format=json` answers the
 * webhook counters as JSON, summed over the shards (per-shard figures alongside).
 * Unauthenticated like /health; it carries counts only, never URLs or secrets.
 */
import type { ServerContext } from '../server-context.js';
import type { HeraldMetrics } from '../metrics/prometheus.js';
import type { Route } from './router.js';

export function metricsRoutes(ctx: Pick<ServerContext, 'webhooks'>, metrics: HeraldMetrics): Route[] {
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
          const { total, shards } = await ctx.webhooks.stats(2000);
          return { status: 200, body: { webhooks: { ...total, shards } } };
        } catch {
          return { status: 503, body: { error: 'a shard did not answer' } };
        }
      },
    },
  ];
}
