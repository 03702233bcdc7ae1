/**
 * The tenants admin API (docs/admin-api.md): apps and push instances created, read, changed,
 * rotated and deleted at run time. Validation is the config schema's; the registry
 * (src/tenants/tenant-registry.ts) stores and applies each change. Secrets go out masked (the
 * password of a webhook URL too) except in the answers of a create and of a rotation, which
 * show the new one once.
 */
import { HeraldError } from '../errors.js';
import type { AppConfig, PushInstanceConfig } from '../config/schema.js';
import type { Route } from '../http/router.js';
import type { Handler, RequestContext, RouteOptions } from '../http/uws-http.js';
import { parseJsonObject } from '../push/http/common.js';
import { appCounters } from '../metrics/node-counters.js';
import { MAX_GRACE_SECONDS, type TenantRegistry } from '../tenants/tenant-registry.js';
import type { TenantKind } from '../tenants/tenant-record.js';
import { maskSecret } from './mask-secret.js';
import type { ReadonlyIdOrderedMap } from '../tenants/id-ordered-map.js';
import type { ServerContext } from '../server-context.js';
import { redactUrl } from '../webhooks/http-sender.js';

/** Entries per page of a list unless `limit` says otherwise; and the most a page holds. */
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;
const BODY_LIMIT = 64 * 1024;

/** An app as the API shows it: every `apps[]` field, the secret masked, where it comes from, its rate-limit refusals. */
function appView(tenants: TenantRegistry, app: AppConfig, connections: number) {
  const { previousSecret: _p, previousUntilMs, ...fields } = app as AppConfig & { previousSecret?: string; previousUntilMs?: number };
  return {
    ...fields,
    // Effective: requireUserAuthentication turns sign-in on by itself.
    userAuthentication: app.userAuthentication || app.requireUserAuthentication,
    secret: maskSecret(app.secret),
    webhooks: app.webhooks.map((w) => ({ ...w, url: redactUrl(w.url) })),
    source: tenants.source('app', app.id),
    ...(previousUntilMs !== undefined && previousUntilMs > Date.now() && { previousSecretValidUntil: new Date(previousUntilMs).toISOString() }),
    connections,
    rateLimited: Object.fromEntries(appCounters(app.id).rateLimited),
  };
}

function pushView(tenants: TenantRegistry, instance: PushInstanceConfig) {
  const { previousSecret: _p, previousUntilMs, ...fields } = instance as PushInstanceConfig & { previousSecret?: string; previousUntilMs?: number };
  const masked = (c: { privateKey: string } | null) => (c ? { ...c, privateKey: maskSecret(c.privateKey) } : null);
  return {
    ...fields,
    secretKey: maskSecret(instance.secretKey),
    apns: masked(instance.apns),
    fcm: masked(instance.fcm),
    web: instance.web ? { ...instance.web, vapidPrivateKey: maskSecret(instance.web.vapidPrivateKey) } : null,
    webhooks: instance.webhooks.map((w) => ({ ...w, url: redactUrl(w.url), secret: maskSecret(w.secret) })),
    source: tenants.source('push', instance.instanceId),
    ...(previousUntilMs !== undefined && previousUntilMs > Date.now() && { previousSecretValidUntil: new Date(previousUntilMs).toISOString() }),
  };
}

/** `?limit`, `?cursor`, `?filter` of a list. */
export function pageQuery(rc: RequestContext): { limit: number; cursor?: string; filter?: string } {
  const params = new URLSearchParams(rc.query);
  const limitText = params.get('limit');
  const limit = limitText === null ? DEFAULT_PAGE : Number(limitText);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE) throw new HeraldError('INVALID_PARAMETERS', `limit must be an integer from 1 to ${MAX_PAGE}`);
  const cursor = params.get('cursor') ?? undefined;
  const filter = params.get('filter') ?? undefined;
  return { limit, ...(cursor && { cursor }), ...(filter && { filter }) };
}

function graceSeconds(rc: RequestContext): number {
  const body = rc.body.byteLength === 0 ? {} : parseJsonObject(rc.body);
  const grace = body.graceSeconds ?? 0;
  if (typeof grace !== 'number' || !Number.isInteger(grace) || grace < 0 || grace > MAX_GRACE_SECONDS) {
    throw new HeraldError('ADMIN_INVALID_TENANT', `graceSeconds must be an integer from 0 to ${MAX_GRACE_SECONDS}`);
  }
  return grace;
}

/**
 * One page of a list in id order, after `cursor` (the last id of the previous page), of the
 * entries one of whose `searched` fields contains `filter` (case-insensitive).
 */
function pageOf<T>(entries: ReadonlyIdOrderedMap<T>, searched: (e: T) => string[], opts: { limit: number; cursor?: string; filter?: string }): { items: T[]; nextCursor: string | null } {
  const filter = opts.filter?.toLowerCase();
  return entries.pageAfter(opts.cursor, opts.limit, filter ? (e) => searched(e).some((field) => field.toLowerCase().includes(filter)) : undefined);
}

/** What the tenant routes need of the admin API's dependencies. */
export interface TenantRouteDeps {
  ctx: Pick<ServerContext, 'appsById' | 'pushInstances'>;
  /** Live WebSocket connections of this node, of one app. */
  connectionCount(appId?: string): number;
}

export function tenantRoutes(deps: TenantRouteDeps, tenants: TenantRegistry, authenticated: (handler: Handler) => Handler): Route[] {
  const { ctx } = deps;
  const read: RouteOptions = { errorStyle: 'channel', bodyLimit: 0, headers: ['authorization', 'x-forwarded-for'] };
  const write: RouteOptions = { errorStyle: 'channel', bodyLimit: BODY_LIMIT, headers: ['authorization', 'x-forwarded-for', 'content-length'] };
  const app = (rc: RequestContext): AppConfig => {
    const found = ctx.appsById.get(rc.params.appId ?? '');
    if (!found) throw new HeraldError('ADMIN_NOT_FOUND', `No app with id ${(rc.params.appId ?? '').slice(0, 200)}`);
    return found;
  };
  const instance = (rc: RequestContext): PushInstanceConfig => {
    const found = ctx.pushInstances.get(rc.params.instanceId ?? '');
    if (!found) throw new HeraldError('ADMIN_NOT_FOUND', `No push instance with id ${(rc.params.instanceId ?? '').slice(0, 200)}`);
    return found;
  };
  const rotate = async (kind: TenantKind, id: string, rc: RequestContext) => {
    const grace = graceSeconds(rc);
    const secret = await tenants.rotateSecret(kind, id, grace);
    const validUntil = grace > 0 ? new Date(Date.now() + grace * 1000).toISOString() : null;
    return { status: 200, body: kind === 'app' ? { secret, previousSecretValidUntil: validUntil } : { secretKey: secret, previousSecretValidUntil: validUntil } };
  };
  const api: [Route['method'], string, RouteOptions, Handler][] = [
    ['get', '/admin/v1/apps', read, (rc) => {
      const { items, nextCursor } = pageOf(ctx.appsById, (a) => [a.id, a.key], pageQuery(rc));
      return { status: 200, body: { apps: items.map((a) => appView(tenants, a, deps.connectionCount(a.id))), nextCursor } };
    }],
    ['post', '/admin/v1/apps', write, async (rc) => {
      const created = await tenants.createApp(parseJsonObject(rc.body));
      // The one answer that shows the secret.
      return { status: 201, body: { ...appView(tenants, created, 0), secret: created.secret } };
    }],
    ['patch', '/admin/v1/apps/:appId', write, async (rc) => {
      const changed = await tenants.updateApp(app(rc).id, parseJsonObject(rc.body));
      return { status: 200, body: appView(tenants, changed, deps.connectionCount(changed.id)) };
    }],
    ['del', '/admin/v1/apps/:appId', read, async (rc) => {
      await tenants.remove('app', app(rc).id);
      return { status: 204 };
    }],
    ['post', '/admin/v1/apps/:appId/rotate-secret', write, (rc) => rotate('app', app(rc).id, rc)],
    ['get', '/admin/v1/push', read, (rc) => {
      const { items, nextCursor } = pageOf(ctx.pushInstances, (p) => [p.instanceId], pageQuery(rc));
      return { status: 200, body: { push: items.map((p) => pushView(tenants, p)), nextCursor } };
    }],
    ['post', '/admin/v1/push', write, async (rc) => {
      const created = await tenants.createPush(parseJsonObject(rc.body));
      return { status: 201, body: { ...pushView(tenants, created), secretKey: created.secretKey } };
    }],
    ['patch', '/admin/v1/push/:instanceId', write, async (rc) => ({ status: 200, body: pushView(tenants, await tenants.updatePush(instance(rc).instanceId, parseJsonObject(rc.body))) })],
    ['del', '/admin/v1/push/:instanceId', read, async (rc) => {
      await tenants.remove('push', instance(rc).instanceId);
      return { status: 204 };
    }],
    ['post', '/admin/v1/push/:instanceId/rotate-secret', write, (rc) => rotate('push', instance(rc).instanceId, rc)],
  ];
  return api.map(([method, pattern, options, handler]) => ({ method, pattern, options, handler: authenticated(handler) }));
}

/** The `settings` of GET /admin/v1/apps/<appId> and /push/<instanceId>: every field, secrets masked. */
export const tenantViews = { app: appView, push: pushView };
