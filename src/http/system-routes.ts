/** GET /ready and GET /health. */
import type { ServerContext } from '../server-context.js';
import type { Route } from './router.js';

export function systemRoutes(ctx: ServerContext): Route[] {
  const options = { errorStyle: 'plain' as const, bodyLimit: 0 };
  return [
    {
      method: 'get',
      pattern: '/ready',
      options,
      handler: () =>
        ctx.state.ready && !ctx.state.draining
          ? { status: 200, body: { ready: true } }
          : { status: 503, body: { ready: false, draining: ctx.state.draining } },
    },
    {
      method: 'get',
      pattern: '/health',
      options,
      handler: async () => {
        try {
          const shards = await ctx.shards.broadcast({ type: 'core.ping' }, 2000);
          return { status: 200, body: { status: 'ok', shards: shards.map((s) => ({ shard: s.shardIndex, uptimeMs: s.uptimeMs })) } };
        } catch {
          return { status: 503, body: { status: 'degraded' } };
        }
      },
    },
  ];
}
