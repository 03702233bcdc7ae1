/**
 * GET / (200 `OK`, the liveness check soketi answers, for health checks moved from it), GET
 * /ready and GET /health (all three answered while draining); with HERALD_TEST_HOOKS=1 only, the
 * test routes POST /debug/shards/:shard/crash and /stall (never registered otherwise).
 */
import { HeraldError } from '../errors.js';
import type { ServerContext } from '../server-context.js';
import type { Route } from './router.js';
import type { RequestContext } from './uws-http.js';

export function systemRoutes(ctx: Pick<ServerContext, 'state' | 'core' | 'config'>): Route[] {
  const options = { errorStyle: 'plain' as const, bodyLimit: 0 };
  const testRoutes: Route[] = process.env.HERALD_TEST_HOOKS === '1' ? [crashRoute(ctx), stallRoute(ctx)] : [];
  return [
    ...testRoutes,
    {
      method: 'get',
      pattern: '/',
      options,
      servedWhileDraining: true,
      handler: () => ({ status: 200, body: 'OK', headers: { 'content-type': 'text/plain; charset=utf-8' } }),
    },
    {
      method: 'get',
      pattern: '/ready',
      options,
      servedWhileDraining: true,
      handler: () =>
        ctx.state.ready && !ctx.state.draining
          ? { status: 200, body: { ready: true } }
          : { status: 503, body: { ready: false, draining: ctx.state.draining } },
    },
    {
      method: 'get',
      pattern: '/health',
      options,
      servedWhileDraining: true,
      handler: async () => {
        try {
          const shards = await ctx.core.broadcast({ type: 'core.ping' }, 2000);
          return { status: 200, body: { status: 'ok', shards: shards.map((s) => ({ shard: s.shardIndex, uptimeMs: s.uptimeMs })) } };
        } catch {
          return { status: 503, body: { status: 'degraded' } };
        }
      },
    },
  ];
}

/**
 * Test hook: makes shard `:shard` crash (`core.crash`). `?stall_ms=` blocks the worker that long
 * first, so requests sent meanwhile pile up on the dying worker. The answer is the crash as
 * a client sees it: 500 SHARD_UNAVAILABLE, as soon as the worker is gone.
 */
function crashRoute(ctx: Pick<ServerContext, 'core'>): Route {
  return {
    method: 'post',
    pattern: '/debug/shards/:shard/crash',
    options: { errorStyle: 'plain', bodyLimit: 0 },
    handler: async (req) => {
      const { shard, stallMs } = testHookParams(ctx, req);
      await ctx.core.request(shard, { type: 'core.crash', stallMs });
      return { status: 200, body: { crashed: false } };
    },
  };
}

/**
 * Test hook: blocks shard `:shard`'s thread for `?stall_ms=` (`core.stall`), as a stalled shard
 * would, then lets it go on; answers once the shard is free again. Requests sent to the shard
 * meanwhile wait in its queue, in order.
 */
function stallRoute(ctx: Pick<ServerContext, 'core' | 'config'>): Route {
  return {
    method: 'post',
    pattern: '/debug/shards/:shard/stall',
    options: { errorStyle: 'plain', bodyLimit: 0 },
    handler: async (req) => {
      const { shard, stallMs } = testHookParams(ctx, req);
      const res = await ctx.core.request(shard, { type: 'core.stall', stallMs }, stallMs + ctx.config.shardRequestTimeoutMs);
      return { status: 200, body: res };
    },
  };
}

function testHookParams(ctx: Pick<ServerContext, 'core'>, req: RequestContext): { shard: number; stallMs: number } {
  const shard = Number(req.params.shard);
  if (!Number.isInteger(shard) || shard < 0 || shard >= ctx.core.shardCount) {
    throw new HeraldError('INVALID_PARAMETERS', `shard must be an integer in [0, ${ctx.core.shardCount})`);
  }
  const stallMs = Number(new URLSearchParams(req.query).get('stall_ms') ?? 0);
  if (!Number.isFinite(stallMs) || stallMs < 0 || stallMs > 10_000) throw new HeraldError('INVALID_PARAMETERS', 'stall_ms must be in [0, 10000]');
  return { shard, stallMs };
}
