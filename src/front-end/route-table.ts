/**
 * The route table of a front end (the main thread's with one front-end thread, each thread's
 * with several): every HTTP route of Herald, by path prefix and the module that defines it.
 *   /  /ready  /health  /debug/shards/*          http/system-routes.ts
 *   /metrics (unless on its own listener)        http/metrics-routes.ts      control plane
 *   /apps/:appId/...  (channel API C1-C6)        channels/http-api/routes.ts
 *   /device_api /customer_api /user_api          push/http/devices/routes.ts
 *   /publish_api  (P1, P2)                       push/http/publishes/routes.ts
 *   /reporting_api, publish statistics           push/http/reports/routes.ts
 *   /admin/v1/...  (with an admin block)         admin/routes.ts             control plane
 *   anything else: 404                           notFoundRoutes below (added by the caller, last)
 * WebSocket upgrades (/app/<key>; any other path closes with 4005): channels/ws/endpoint.ts.
 * The control plane's routes are the main thread's own; a front-end thread relays them there.
 */
import type { Route } from '../http/router.js';
import { errorReply, type Reply, type RequestContext } from '../http/uws-http.js';
import { systemRoutes } from '../http/system-routes.js';
import { CORS_ANY_ORIGIN } from '../http/cors.js';
import { HeraldError } from '../errors.js';
import type { ServerContext } from '../server-context.js';
import type { MessageCharger } from '../channels/adapter/channel-adapter.js';
import { channelApiRoutes } from '../channels/http-api/routes.js';
import type { RateCounter } from '../channels/rate-limits/rate-counter.js';
import { deviceApiRoutes } from '../push/http/devices/routes.js';
import { publishApiRoutes } from '../push/http/publishes/routes.js';
import { reportingApiRoutes } from '../push/http/reports/routes.js';

/** `rateCounter`: where the channel API's per-app rate limits count (default: this thread, in memory). */
export function routeTable(ctx: ServerContext, quota: MessageCharger, controlPlane: readonly Route[], rateCounter?: RateCounter): Route[] {
  return [...systemRoutes(ctx), ...controlPlane, ...channelApiRoutes(ctx, quota, rateCounter), ...deviceApiRoutes(ctx), ...publishApiRoutes(ctx), ...reportingApiRoutes(ctx)];
}

/** First path segments of the push APIs (Beams): their 404s use the push error body. */
const PUSH_PREFIXES = ['device_api', 'publish_api', 'reporting_api', 'customer_api', 'user_api'];

/**
 * The catch-all 404 for every method and path no route serves (registered last; uWS prefers
 * any more specific pattern). Paths under a push API prefix answer in the push error shape,
 * every other one in the channel API's; both with `Access-Control-Allow-Origin: *` like the
 * APIs themselves, so a browser page sees the error instead of a CORS failure.
 */
export function notFoundRoutes(): Route[] {
  const notFound = (rc: RequestContext): Reply => {
    const first = rc.path.split('/')[1] ?? '';
    const err = new HeraldError('ROUTE_NOT_FOUND', `No route for ${rc.method.toUpperCase()} ${rc.path}`);
    return errorReply(err, PUSH_PREFIXES.includes(first) ? 'push' : 'channel', rc.path);
  };
  return [{ method: 'any', pattern: '/*', handler: notFound, options: { errorStyle: 'channel', bodyLimit: 0, extraHeaders: CORS_ANY_ORIGIN } }];
}

