/**
 * The admin API, `/admin/v1/…` (docs/admin-api.md): JSON for the dashboard, every route behind
 * `Authorization: Bearer <admin token>`. Registered only when `admin.token` is set; without it
 * these paths fall to the catch-all 404. Secrets go out masked, except from the two `secret`
 * routes the page calls when the user asks to copy one.
 */
import { HeraldError } from '../errors.js';
import type { AppConfig, PushInstanceConfig } from '../config/schema.js';
import type { Route } from '../http/router.js';
import { errorReply, type Handler, type Reply, type RequestContext, type RouteOptions } from '../http/uws-http.js';
import type { ServerContext } from '../server-context.js';
import { publishEvent, validateEvent } from '../channels/http-api/events.js';
import { isPresenceChannel } from '../channels/names.js';
import type { ClusterOverview } from '../cluster/cluster.js';
import { parseJsonObject } from '../push/http/common.js';
import { PLATFORMS, type Platform } from '../push/platform.js';
import type { GatewayCounts, PublishJob } from '../push/messages/publishes.js';
import { newPublishJob, validatePublishRequest } from '../push/http/publishes/request-schema.js';
import { isDeviceIdOf } from '../push/http/devices/device-id.js';
import type { ClientAddressOf } from '../net/client-address.js';
import { SignInRateLimited, type AdminAuth } from './auth.js';
import type { DebugHub } from './debug-hub.js';
import type { TenantRegistry } from '../tenants/tenant-registry.js';
import { tenantRoutes, tenantViews } from './tenant-routes.js';
import { maskSecret } from './mask-secret.js';
import { channelView } from './channel-view.js';

export { maskSecret };

/** Channels listed per app view (the page filters them); beyond it `channelsTruncated`. */
export const MAX_LISTED_CHANNELS = 200;
/** Recent publishes whose state the push view asks the shards for. */
const PUBLISHES_WITH_STATE = 10;
/** How long a device count by platform is reused, ms (it reads every device record). */
const DEVICE_COUNT_TTL_MS = 10_000;
/** How long the overview waits for each shard's figures, ms (a busy shard shows as down or unknown). */
const OVERVIEW_TIMEOUT_MS = 2000;
/** Apps (and push instances) per overview page unless `limit` (`pushLimit`) says otherwise, and the most a page holds. */
export const OVERVIEW_PAGE = 50;
export const OVERVIEW_MAX_PAGE = 200;
/** Largest admin request body, bytes. */
const BODY_LIMIT = 64 * 1024;

/** What the admin API uses of the server: registries and the per-area clients, never the shard pool. */
export type AdminContext = Pick<
  ServerContext,
  'appsById' | 'pushInstances' | 'state' | 'debug' | 'core' | 'channels' | 'devices' | 'publishes' | 'reports' | 'webhooks'
>;

export interface AdminDeps {
  ctx: AdminContext;
  hub: DebugHub;
  auth: AdminAuth;
  /** The client's address as the sign-in limit counts it (`trustedProxies`: net/client-address.ts). */
  clientAddressOf: ClientAddressOf;
  /** Live WebSocket connections of this node, of one app or all. */
  connectionCount(appId?: string): number;
  /**
   * Live WebSocket connections on each front-end thread, by thread index (`frontEndThreads`);
   * absent, the node has one thread holding all of `connectionCount()`.
   */
  threadConnections?: () => number[];
  /** When the server started, ms since the epoch. */
  startedAt: number;
  /** The cluster as this node sees it; absent on a single node (the overview says null). */
  cluster?: () => Promise<ClusterOverview>;
  /** Apps and push instances at run time (the tenants routes, tenant-routes.ts). */
  tenants?: TenantRegistry;
}

/** Answers a handler's failure in the channel error shape; a 429 carries Retry-After. */
export function adminErrorReply(err: unknown, path: string): Reply {
  const reply = errorReply(err, 'channel', path);
  if (err instanceof SignInRateLimited) reply.headers = { 'retry-after': String(err.retryAfterSeconds) };
  return reply;
}

/** Wraps a handler with the token check; the auth errors are answered here (Retry-After). */
export function authenticated(deps: Pick<AdminDeps, 'auth' | 'clientAddressOf'>, handler: Handler): Handler {
  return async (rc: RequestContext): Promise<Reply> => {
    try {
      deps.auth.check(rc.headers.authorization, deps.clientAddressOf(rc.remoteAddress, rc.headers['x-forwarded-for'] ?? ''));
      return await handler(rc);
    } catch (err) {
      return adminErrorReply(err, rc.path);
    }
  };
}

function appSummary(deps: AdminDeps, app: AppConfig) {
  return {
    id: app.id,
    key: app.key,
    secret: maskSecret(app.secret),
    enabled: app.enabled,
    clientEvents: app.clientEvents,
    // Effective: requireUserAuthentication turns sign-in on by itself.
    userAuthentication: app.userAuthentication || app.requireUserAuthentication,
    webhooks: app.webhooks.length,
    connections: deps.connectionCount(app.id),
    watched: deps.hub.watching(app.id),
  };
}

function instanceSummary(instance: PushInstanceConfig) {
  return {
    instanceId: instance.instanceId,
    secretKey: maskSecret(instance.secretKey),
    gateways: PLATFORMS.filter((p) => instance[p] !== null),
    webhooks: instance.webhooks.length,
  };
}

function requireApp(ctx: Pick<ServerContext, 'appsById'>, appId: string | undefined): AppConfig {
  const app = appId === undefined ? undefined : ctx.appsById.get(appId);
  if (!app) throw new HeraldError('ADMIN_NOT_FOUND', `No app with id ${String(appId).slice(0, 200)}`);
  return app;
}

function requirePush(ctx: Pick<ServerContext, 'pushInstances'>, instanceId: string | undefined): PushInstanceConfig {
  const instance = instanceId === undefined ? undefined : ctx.pushInstances.get(instanceId);
  if (!instance) throw new HeraldError('ADMIN_NOT_FOUND', `No push instance with id ${String(instanceId).slice(0, 200)}`);
  return instance;
}

function stringField(body: Record<string, unknown>, name: string, max: number): string {
  const value = body[name];
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new HeraldError('INVALID_PARAMETERS', `${name} must be a string of 1 to ${max} characters`);
  }
  return value;
}

/** An overview page's size: `name` from 1 to OVERVIEW_MAX_PAGE, OVERVIEW_PAGE when absent. */
function overviewLimit(params: URLSearchParams, name: string): number {
  const text = params.get(name);
  const limit = text === null ? OVERVIEW_PAGE : Number(text);
  if (!Number.isInteger(limit) || limit < 1 || limit > OVERVIEW_MAX_PAGE) throw new HeraldError('INVALID_PARAMETERS', `${name} must be an integer from 1 to ${OVERVIEW_MAX_PAGE}`);
  return limit;
}

/** The threads serving the port and the connections each holds, index = thread. */
function frontEndFigures(deps: Pick<AdminDeps, 'connectionCount' | 'threadConnections'>): { threads: number; connections: number[] } {
  const connections = deps.threadConnections ? deps.threadConnections() : [deps.connectionCount()];
  return { threads: connections.length, connections };
}

/**
 * GET /admin/v1/overview: this node, its shards and front-end threads, webhooks, push usage, and one page of the apps
 * and of the push instances in id order (`limit` and `cursor`; `pushLimit` and `pushCursor`),
 * with their totals. Nothing here walks every app: the node's figures are counts kept as they
 * change, the per-app figures are those of the page.
 */
async function overview(deps: AdminDeps, rc: RequestContext): Promise<Reply> {
  const { ctx } = deps;
  const params = new URLSearchParams(rc.query);
  const appPage = ctx.appsById.pageAfter(params.get('cursor') || undefined, overviewLimit(params, 'limit'));
  const pushPage = ctx.pushInstances.pageAfter(params.get('pushCursor') || undefined, overviewLimit(params, 'pushLimit'));
  const apps = appPage.items;
  // The month's notifications are summed over every push instance (a request each): this part
  // costs with the push instances, never with the apps.
  const instances = [...ctx.pushInstances.values()];
  const [pings, webhooks, channelCounts, usage, cluster] = await Promise.all([
    Promise.all(Array.from({ length: ctx.core.shardCount }, (_, shard) =>
      ctx.core.request(shard, { type: 'core.ping' }, OVERVIEW_TIMEOUT_MS).then(
        (p) => ({ shard, up: true, uptimeMs: p.uptimeMs }),
        () => ({ shard, up: false, uptimeMs: 0 }),
      ),
    )),
    ctx.webhooks.stats(OVERVIEW_TIMEOUT_MS).then((report) => report.total, () => null),
    ctx.channels.occupiedChannelCounts(apps.map((a) => a.id)).catch(() => null),
    Promise.all(instances.map((p) => ctx.publishes.usage(p.instanceId, OVERVIEW_TIMEOUT_MS).then((u) => u.notifications, () => null))),
    deps.cluster ? deps.cluster() : null,
  ]);
  const now = Date.now();
  const usageOf = new Map(instances.map((p, i) => [p.instanceId, usage[i]]));
  return {
    status: 200,
    body: {
      node: {
        startedAt: new Date(deps.startedAt).toISOString(),
        uptimeSeconds: Math.floor((now - deps.startedAt) / 1000),
        connections: deps.connectionCount(),
        messages: deps.hub.messages,
        connectionsOpened: deps.hub.connectionsOpened,
        occupiedChannels: channelCounts?.total ?? null,
        shards: pings.map((p) => ({ ...p, queueDepth: ctx.core.inFlightCount(p.shard) })),
      },
      frontEnd: frontEndFigures(deps),
      // null on a single node.
      cluster,
      webhooks,
      push: { notificationsThisMonth: usage.reduce<number>((n, u) => n + (u ?? 0), 0) },
      apps: apps.map((a, i) => ({ ...appSummary(deps, a), occupiedChannels: channelCounts?.byApp[i] ?? null })),
      appsTotal: ctx.appsById.size,
      appsNextCursor: appPage.nextCursor,
      pushInstances: pushPage.items.map((p) => ({ ...instanceSummary(p), notificationsThisMonth: usageOf.get(p.instanceId) ?? null })),
      pushInstancesTotal: ctx.pushInstances.size,
      pushInstancesNextCursor: pushPage.nextCursor,
    },
  };
}

/** GET /admin/v1/apps/:appId: the app, its connections and occupied channels with their counts. */
async function appView(deps: AdminDeps, rc: RequestContext): Promise<Reply> {
  const { ctx } = deps;
  const app = requireApp(ctx, rc.params.appId);
  const listed = await ctx.channels.listChannels(app.id, undefined, true);
  const shown = listed.slice(0, MAX_LISTED_CHANNELS);
  const channels = await Promise.all(
    shown.map(async ({ channel: name, userCount }) => {
      if (isPresenceChannel(name)) return { name, userCount: userCount ?? 0 };
      const info = await ctx.channels.channelInfo(app.id, name, { subscriptionCount: true }).catch(() => null);
      return { name, subscriptionCount: info?.subscriptionCount ?? null };
    }),
  );
  return {
    status: 200,
    body: {
      app: appSummary(deps, app),
      ...(deps.tenants && { settings: tenantViews.app(deps.tenants, app, deps.connectionCount(app.id)) }),
      occupiedChannels: listed.length,
      channels,
      channelsTruncated: listed.length > shown.length,
    },
  };
}

/** POST /admin/v1/apps/:appId/events: the event creator, published as the HTTP API (C1) would. */
function sendEvent(deps: AdminDeps, rc: RequestContext): Reply {
  const { ctx } = deps;
  const app = requireApp(ctx, rc.params.appId);
  const body = parseJsonObject(rc.body);
  const channel = stringField(body, 'channel', 200);
  const name = stringField(body, 'event', 200);
  const data = typeof body.data === 'string' ? body.data : JSON.stringify(body.data ?? '');
  const event = validateEvent(app, { name, data, channels: [channel] }, 'channel');
  publishEvent(ctx.channels, app, event);
  ctx.debug.apiEvent(app.id, event.channels, event.name, event.data);
  return { status: 200, body: {} };
}

interface DeviceCountCache {
  at: number;
  counts: Promise<Record<Platform, number>>;
}

function deviceCounter(deps: AdminDeps): (instanceId: string) => Promise<Record<Platform, number>> {
  const cache = new Map<string, DeviceCountCache>();
  return (instanceId) => {
    const now = Date.now();
    const hit = cache.get(instanceId);
    if (hit && now - hit.at < DEVICE_COUNT_TTL_MS) return hit.counts;
    const counts = deps.ctx.devices.platformCounts(instanceId);
    cache.set(instanceId, { at: now, counts });
    counts.catch(() => cache.delete(instanceId));
    return counts;
  };
}

/** One recent publish with its state, per-gateway counts and reports (as the statistics endpoint sums them). */
async function publishWithState(deps: AdminDeps, instanceId: string, recent: { publishId: string; kind: string; targets: string[]; acceptedAt: number }) {
  const [merged, { delivered, opened }] = await Promise.all([
    deps.ctx.publishes.stats(instanceId, recent.publishId),
    deps.ctx.reports.counts(instanceId, recent.publishId),
  ]);
  const gateways: Partial<Record<Platform, GatewayCounts>> = {};
  if (merged) for (const p of PLATFORMS) if (merged.gateways[p].recipients > 0) gateways[p] = merged.gateways[p];
  return {
    publishId: recent.publishId,
    kind: recent.kind,
    targets: recent.targets,
    acceptedAt: new Date(recent.acceptedAt).toISOString(),
    state: merged?.state ?? 'unknown',
    recipients: merged?.recipients ?? 0,
    gateways,
    delivered,
    opened,
  };
}

/** GET /admin/v1/push/:instanceId: device counts by platform and the recent publishes with their state. */
async function pushView(deps: AdminDeps, rc: RequestContext, countDevices: (id: string) => Promise<Record<Platform, number>>): Promise<Reply> {
  const instance = requirePush(deps.ctx, rc.params.instanceId);
  const recent = deps.hub.recentPublishes(instance.instanceId).slice(0, PUBLISHES_WITH_STATE);
  const [devices, publishes] = await Promise.all([
    countDevices(instance.instanceId),
    Promise.all(recent.map((r) => publishWithState(deps, instance.instanceId, r))),
  ]);
  return {
    status: 200,
    body: {
      instance: instanceSummary(instance),
      ...(deps.tenants && { settings: tenantViews.push(deps.tenants, instance) }),
      devices: { ...devices, total: devices.apns + devices.fcm + devices.web },
      publishes,
    },
  };
}

/** A device id as Herald issues them (`<platform>-<32 hex>`), else 400 DEVICE_ID_INVALID. */
function deviceIdField(value: string): string {
  if (!PLATFORMS.some((platform) => isDeviceIdOf(value, platform))) {
    throw new HeraldError('DEVICE_ID_INVALID', `Device id ${JSON.stringify(value.slice(0, 100))} is not a valid device id (apns-, fcm- or web- and 32 hex digits)`);
  }
  return value;
}

/**
 * POST /admin/v1/push/:instanceId/publishes: a test notification (`title`, `body`) to one
 * `interest`, one `userId` or one `deviceId`, with a payload for every gateway the instance
 * has; the same validation and durable start as the publish API (P1/P2). A device id must name
 * a device of this instance (404 DEVICE_NOT_FOUND); its publish (kind `devices`) is sent by the
 * shard that owns the device.
 */
async function testNotification(deps: AdminDeps, rc: RequestContext): Promise<Reply> {
  const instance = requirePush(deps.ctx, rc.params.instanceId);
  const body = parseJsonObject(rc.body);
  const title = stringField(body, 'title', 200);
  const text = stringField(body, 'body', 1000);
  const given = (name: string) => (typeof body[name] === 'string' && body[name] !== '' ? body[name] : undefined);
  const interest = given('interest');
  const userId = given('userId');
  const deviceId = given('deviceId');
  if ([interest, userId, deviceId].filter((t) => t !== undefined).length !== 1) {
    throw new HeraldError('INVALID_PARAMETERS', 'Give exactly one of interest, userId or deviceId');
  }
  const notification = { title, body: text };
  const payloads: Record<string, unknown> = {
    apns: { aps: { alert: notification } },
    fcm: { notification },
    web: { notification },
  };
  let request: Pick<PublishJob, 'kind' | 'targets' | 'payloads'>;
  if (deviceId !== undefined) {
    const id = deviceIdField(deviceId);
    const { device } = await deps.ctx.devices.request({ type: 'device.get', instanceId: instance.instanceId, deviceId: id });
    if (!device) throw new HeraldError('DEVICE_NOT_FOUND', `No device ${id} in push instance ${instance.instanceId}`);
    // The payloads pass the publish schema as an interest publish would.
    request = { ...validatePublishRequest('interests', { interests: ['test'], ...payloads }), kind: 'devices', targets: [id] };
  } else {
    request = validatePublishRequest(
      interest !== undefined ? 'interests' : 'users',
      interest !== undefined ? { interests: [interest], ...payloads } : { users: [userId], ...payloads },
    );
  }
  const job = newPublishJob(instance.instanceId, request);
  await deps.ctx.publishes.start(job);
  deps.ctx.debug.publishAccepted(job);
  return { status: 200, body: { publishId: job.publishId } };
}

export function adminRoutes(deps: AdminDeps): Route[] {
  const { ctx } = deps;
  const read: RouteOptions = { errorStyle: 'channel', bodyLimit: 0, headers: ['authorization', 'x-forwarded-for'] };
  const write: RouteOptions = { errorStyle: 'channel', bodyLimit: BODY_LIMIT, headers: ['authorization', 'x-forwarded-for', 'content-length'] };
  const countDevices = deviceCounter(deps);
  const api: [Route['method'], string, RouteOptions, Handler][] = [
    ['get', '/admin/v1/session', read, () => ({ status: 200, body: { ok: true } })],
    ['get', '/admin/v1/overview', read, (rc) => overview(deps, rc)],
    ['get', '/admin/v1/apps/:appId', read, (rc) => appView(deps, rc)],
    ['get', '/admin/v1/apps/:appId/secret', read, (rc) => ({ status: 200, body: { secret: requireApp(ctx, rc.params.appId).secret } })],
    ['get', '/admin/v1/apps/:appId/channels/:channel', read, (rc) => channelView(ctx, requireApp(ctx, rc.params.appId), rc)],
    ['post', '/admin/v1/apps/:appId/events', write, (rc) => sendEvent(deps, rc)],
    ['get', '/admin/v1/push/:instanceId', read, (rc) => pushView(deps, rc, countDevices)],
    ['get', '/admin/v1/push/:instanceId/secret', read, (rc) => ({ status: 200, body: { secretKey: requirePush(ctx, rc.params.instanceId).secretKey } })],
    ['post', '/admin/v1/push/:instanceId/publishes', write, (rc) => testNotification(deps, rc)],
  ];
  const routes: Route[] = api.map(([method, pattern, options, handler]) => ({ method, pattern, options, handler: authenticated(deps, handler) }));
  if (deps.tenants) routes.push(...tenantRoutes(deps, deps.tenants, (handler) => authenticated(deps, handler)));
  // Any other path under /admin/v1 still needs the token first: probing for routes is a sign-in attempt.
  routes.push({
    method: 'any',
    pattern: '/admin/v1/*',
    options: read,
    handler: authenticated(deps, (rc) => {
      throw new HeraldError('ROUTE_NOT_FOUND', `No route for ${rc.method.toUpperCase()} ${rc.path}`);
    }),
  });
  return routes;
}
