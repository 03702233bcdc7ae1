/**
 * Channel HTTP API routes (C1-C6). Every route authenticates the signed query (401), refuses
 * a disabled app (403), then runs its handler. Answers carry `Access-Control-Allow-Origin: *`
 * and each path answers an OPTIONS preflight, so a browser page can call the API: the
 * signature, not a cookie, is the credential.
 */
import type { ServerContext } from '../../server-context.js';
import type { Method, Route } from '../../http/router.js';
import type { Handler, Reply, RequestContext, RouteOptions } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import { CORS_ANY_ORIGIN, preflightReply } from '../../http/cors.js';
import { parseQueryPairs } from './params.js';
import { authenticateRequest } from './signature.js';
import { MessageQuota } from '../quota.js';
import type { ChannelAdapter, MessageCharger } from '../adapter/channel-adapter.js';
import type { ChannelApiRequest } from './request.js';
import { triggerBatch, triggerEvent } from './events.js';
import { channelInfo, listChannels, presenceUsers } from './channels.js';
import { terminateUserConnections } from './users.js';
import { channelHistory } from './history.js';
import { AppRateLimits } from '../rate-limits/app-rate-limits.js';
import { ListingGate } from './listing-gate.js';
import { LocalRateCounter } from '../rate-limits/local-rate-counter.js';
import type { RateCounter } from '../rate-limits/rate-counter.js';

/** Headers a preflight allows when the browser does not list the ones it wants. */
const DEFAULT_ALLOWED_HEADERS = 'content-type, x-pusher-library';

type ApiHandler = (req: ChannelApiRequest) => Reply | Promise<Reply>;

/**
 * Wraps a handler with authentication, the disabled-app check and the app's
 * maxHttpRequestsPerSecond (429, counted only for signed requests). Exported for the
 * benchmarks, which drive the same path without a socket.
 */
export function signedHandler(ctx: Pick<ServerContext, 'appsByKey'>, handler: ApiHandler, limits?: Pick<AppRateLimits, 'httpRequest'>): Handler {
  return (rc: RequestContext) => {
    const query = parseQueryPairs(rc.query);
    const app = authenticateRequest({ method: rc.method, path: rc.path, query, body: rc.body, appId: rc.params.appId ?? '' }, ctx.appsByKey);
    if (!app.enabled) throw new HeraldError('APP_DISABLED', `Application ${app.id} is disabled; enable it (enabled: true in apps[] of the config file for an app defined there; the admin API or the dashboard's Apps page for one created there)`);
    const counted = limits?.httpRequest(app);
    const req = { app, query, body: rc.body, params: rc.params };
    return counted instanceof Promise ? counted.then(() => handler(req)) : handler(req);
  };
}

/** Answers a CORS preflight: 204 allowing GET/POST from any origin with the requested headers. */
function preflight(rc: RequestContext): Reply {
  const requested = rc.headers['access-control-request-headers'];
  const allowHeaders = requested && /^[A-Za-z0-9\-_, ]{1,512}$/.test(requested) ? requested : DEFAULT_ALLOWED_HEADERS;
  return preflightReply('GET, POST, OPTIONS', allowHeaders);
}

/**
 * The daily message quota: counted across nodes in a cluster; on one node in `local` when given
 * (the quota every front-end thread of the process shares), else in this thread's memory.
 */
export function messageQuotaOf(channels: ChannelAdapter, local?: MessageCharger): MessageCharger {
  return channels.cluster?.messageQuota ?? local ?? new MessageQuota();
}

/**
 * The C1-C6 routes plus an OPTIONS preflight per path; `quota` from messageQuotaOf. The rate
 * limits are counted across nodes in a cluster; on one node in `rateCounter` when given (the
 * process' shared counter), else in this thread's memory.
 */
export function channelApiRoutes(ctx: Pick<ServerContext, 'config' | 'appsByKey' | 'channels' | 'debug'>, quota: MessageCharger, rateCounter?: RateCounter): Route[] {
  const cluster = ctx.channels.cluster;
  const limits = new AppRateLimits(cluster?.rateCounter ?? rateCounter ?? new LocalRateCounter());
  const listings = new ListingGate();
  // The API reads no request header (the signature is in the query): none is copied.
  const read: RouteOptions = { errorStyle: 'channel', bodyLimit: 0, extraHeaders: CORS_ANY_ORIGIN, headers: [] };
  const write: RouteOptions = { ...read, bodyLimit: ctx.config.maxRequestBodyBytes, bodyTooLarge: 'BODY_TOO_LARGE' };
  const preflightOptions: RouteOptions = { ...read, headers: ['access-control-request-headers'] };
  const api: [Method, string, RouteOptions, ApiHandler][] = [
    ['post', '/apps/:appId/events', write, (r) => triggerEvent(ctx.channels, quota, r, ctx.debug, limits)],
    ['post', '/apps/:appId/batch_events', write, (r) => triggerBatch(ctx.channels, quota, r, ctx.debug, limits)],
    ['get', '/apps/:appId/channels', read, (r) => listChannels(ctx.channels, r, listings)],
    ['get', '/apps/:appId/channels/:channelName', read, (r) => channelInfo(ctx.channels, r)],
    ['get', '/apps/:appId/channels/:channelName/users', read, (r) => presenceUsers(ctx.channels, r)],
    ['get', '/apps/:appId/channels/:channelName/history', read, (r) => channelHistory(ctx.channels, r)],
    ['post', '/apps/:appId/users/:userId/terminate_connections', write, (r) => terminateUserConnections(ctx.channels, r)],
  ];
  const routes: Route[] = api.map(([method, pattern, options, handler]) => ({ method, pattern, options, handler: signedHandler(ctx, handler, limits) }));
  for (const pattern of new Set(api.map(([, p]) => p))) {
    routes.push({ method: 'options', pattern, options: preflightOptions, handler: preflight });
  }
  return routes;
}
