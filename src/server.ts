/**
 * Herald's composition root, on the main thread: builds the shard pool (its worker entry lists
 * the areas, shard-worker.ts), one main-thread client per area (the channel adapter; push
 * devices, publishes, reports; webhooks), the uWS front end (HTTP routes and the WebSocket
 * endpoint), and hands each route module only the clients and config it uses. This thread
 * stays an I/O loop: storage, gateway calls and per-device work happen on the shards.
 */
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { us_listen_socket } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from './config/schema.js';
import { loadUws, type UwsModule } from './http/uws-native.js';
import { registerRoutes, type Route } from './http/router.js';
import { LIBUS_LISTEN_DEFAULT, LIBUS_LISTEN_EXCLUSIVE_PORT, type ListenWithOptions } from './http/uws-listen.js';
import { inFlight, errorReply, type Reply, type RequestContext } from './http/uws-http.js';
import { systemRoutes } from './http/system-routes.js';
import { CORS_ANY_ORIGIN } from './http/cors.js';
import { metricsRoutes } from './http/metrics-routes.js';
import { MainApp } from './http/tls.js';
import { HeraldMetrics } from './metrics/prometheus.js';
import { heraldVersion } from './metrics/build-info.js';
import { planReload } from './config/reload.js';
import { missingPlatforms } from './config/key-material.js';
import { setLogLevel } from './log.js';
import { openDataDir } from './shards/data-dir.js';
import { ShardPool } from './shards/pool.js';
import { HeraldError, CLOSE_CODES } from './errors.js';
import { log } from './log.js';
import type { ServerContext, ServerState } from './server-context.js';
import type { HeraldShardApi } from './shard-api.js';
import type { ChannelAdapter, ClusterCapability, MessageCharger } from './channels/adapter/channel-adapter.js';
import { openChannelAdapter } from './channels/adapter/open-adapter.js';
import type { TopicFanout } from './http/topic-fanout.js';
import { Cluster } from './cluster/cluster.js';
import { randomNodeId } from './cluster/node-session.js';
import { describeRedis } from './cluster/connection.js';
import { hostname } from 'node:os';
import { registerWebSocket, type WebSocketEndpoint } from './channels/ws/endpoint.js';
import { SocketRegistry } from './channels/socket-registry.js';
import { SessionTopics } from './channels/http-fallback/topics.js';
import { createHttpFallback, type HttpFallback } from './channels/http-fallback/endpoint.js';
import { clusterSessionDirectory } from './channels/http-fallback/cluster-directory.js';
import { DevicesClient } from './push/clients/devices.js';
import { PublishesClient } from './push/clients/publishes.js';
import { ReportsClient } from './push/clients/reports.js';
import { WebhooksClient } from './webhooks/client.js';
import { channelApiRoutes, messageQuotaOf } from './channels/http-api/routes.js';
import { deviceApiRoutes } from './push/http/devices/routes.js';
import { publishApiRoutes } from './push/http/publishes/routes.js';
import { reportingApiRoutes } from './push/http/reports/routes.js';
import { DebugHub } from './admin/debug-hub.js';
import { createAdminEndpoints, type AdminEndpoints } from './admin/admin-endpoints.js';
import { RunningTenants } from './tenants/running-tenants.js';
import { TenantRegistry } from './tenants/tenant-registry.js';
import { retirePushInstance } from './push/clients/instances.js';
import { LmdbTenantStore } from './tenants/lmdb-tenant-store.js';
import { RedisTenantStore } from './tenants/redis-tenant-store.js';

export interface RunningHerald {
  readonly port: number;
  readonly host: string;
  /** True when the main port speaks HTTPS/WSS. */
  readonly secure: boolean;
  /** Port of the separate metrics listener, when `metrics` is configured. */
  readonly metricsPort: number | null;
  /**
   * Applies a re-read config (SIGHUP): see config/reload.ts. Throws ConfigError, with the
   * running config untouched, when the new one cannot be applied (bad certificate files).
   */
  reload(next: Readonly<HeraldConfig>): Promise<ReloadReport>;
  /** Graceful shutdown; resolves when storage is flushed and workers stopped. */
  stop(): Promise<void>;
}

export interface ReloadReport {
  /** Live settings that changed. */
  changed: string[];
  /** Settings that changed in the file but need a restart (running values kept). */
  restartNeeded: string[];
  /** Connections closed because their app was removed or disabled. */
  closedConnections: number;
}

export async function startHerald(config: Readonly<HeraldConfig>): Promise<RunningHerald> {
  setLogLevel(config.logLevel);
  requirePushStore(config);
  const { uws, build: uwsBuild } = loadUws();
  // Certificate files are checked before any worker starts: a bad one is a start-up error.
  const main = new MainApp(uws, config.tls);
  const dataDir = resolve(config.dataDir);
  // Locked for the life of the process (released by the OS when it ends, however it ends).
  const identity = openDataDir(dataDir, config.shards);
  const startedAt = Date.now();
  // Before the shards start: their workers greet it to learn which apps are watched.
  const debug = new DebugHub({ dataDir });
  const { shards, installSecret } = await startShards(config, dataDir, identity.installSecret);

  const state: ServerState = { ready: false, draining: false };
  const registry = new SocketRegistry();
  const running = new RunningTenants(config, {
    shards,
    config: () => ctx.config,
    configChanged: (next) => {
      ctx.config = next;
      shards.setWorkerConfig(next);
    },
  });
  // Topic delivery reaches HTTP fallback sessions too (channels/http-fallback/topics.ts).
  const topics = new SessionTopics(main);
  // With a `cluster` block, the cluster is this node's membership, shared by every area that keeps state in Redis.
  const { adapter, cluster } = await stopOnFailure(shards, undefined, () => createChannelAdapter(config, topics, shards, registry, () => ctx.config, running.appsById));
  const ctx: ServerContext = {
    config,
    appsById: running.appsById,
    appsByKey: running.appsByKey,
    pushInstances: running.pushInstances,
    installSecret,
    state,
    debug,
    core: shards,
    channels: adapter,
    devices: new DevicesClient(shards),
    publishes: new PublishesClient(shards),
    reports: new ReportsClient(shards),
    webhooks: new WebhooksClient(shards),
  };
  // What a cluster adds (null on a single node): shared tenants, fallback relay, overview, figures.
  const capability = adapter.cluster;
  const quota = messageQuotaOf(adapter);
  const tenants = tenantRegistry(ctx, shards, running, cluster, { capability, quota });
  await stopOnFailure(shards, adapter, () => startTenants(tenants, ctx, running, cluster));

  // The dashboard's subscription tap sits on the adapter, where subscriptions are recorded.
  ctx.channels.tapSubscriptions(debug);
  const ws = registerWebSocket({ config: ctx.config, state, appsByKey: ctx.appsByKey, registry, adapter: ctx.channels, debug });
  running.attach(ws);
  const token = config.admin.token;
  // In a cluster, requests of a session that reach another node are relayed to the session's node.
  const fallback = createHttpFallback({ config, appsByKey: ctx.appsByKey, endpoint: ws, topics, directory: cluster ? clusterSessionDirectory(cluster) : undefined });
  const admin =
    token === null
      ? undefined
      : createAdminEndpoints({ ctx, hub: debug, token, trustedProxies: config.trustedProxies, connectionCount: (appId) => ws.connectionCount(appId), startedAt, tenants, ...(cluster && capability && { cluster: () => cluster.overview(capability.figures) }) });
  const metrics = new HeraldMetrics({
    core: ctx.core,
    webhooks: ctx.webhooks,
    load: shards,
    connections: () => ws.connectionCounts(),
    configured: () => ({ apps: ctx.appsById.values(), instanceIds: ctx.pushInstances.keys() }),
    build: { version: heraldVersion(), uws: uwsBuild },
    ...(cluster && capability && { cluster: () => capability.figures, clusterNodes: async () => (await cluster.members().catch(() => null))?.nodes.length ?? null }),
  });

  // With a separate metrics listener, /metrics is served there only (it need not be public).
  let metricsApp: ReturnType<UwsModule['App']> | undefined;
  if (config.metrics) {
    metricsApp = uws.App();
    registerRoutes(metricsApp, [...metricsRoutes(ctx, metrics), ...notFoundRoutes()]);
  }
  const allRoutes = [...routeTable(ctx, quota, metrics, admin, config.metrics !== null), ...notFoundRoutes()];
  // On the app, and on each app a TLS certificate reload makes (see http/tls.ts).
  main.install((target) => {
    fallback.register(target);
    registerRoutes(target, allRoutes, { draining: () => state.draining });
    admin?.registerStream(target);
  }, ws.behavior);

  // With TLS the port is opened shareable (checked free first): a reload opens its new app beside it.
  const listenSocket = await stopOnFailure(shards, adapter, () => listen(main.app, config.host, config.port, config.reusePort, main.secure));
  const port = uws.us_socket_local_port(listenSocket);
  main.listening(config.host, port, listenSocket);
  let metricsSocket: us_listen_socket | undefined;
  if (metricsApp && config.metrics) {
    const { host: metricsHost, port: metricsPortWanted } = config.metrics;
    metricsSocket = await stopOnFailure(shards, adapter, () =>
      listen(metricsApp, metricsHost, metricsPortWanted, false).catch((err: unknown) => {
        uws.us_listen_socket_close(listenSocket);
        throw new ListenError(`metrics listener: ${(err as Error).message}`);
      }),
    );
  }
  const metricsPort = metricsSocket ? uws.us_socket_local_port(metricsSocket) : null;
  state.ready = true;
  log.info('herald listening', { host: config.host, port, tls: main.secure, metricsPort, shards: config.shards, dataDir, uws: uwsBuild, maxConnections: config.maxConnections ?? null });
  logMissingCredentials(config);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    if (metricsSocket) uws.us_listen_socket_close(metricsSocket);
    tenants.close();
    stopping ??= shutdown(main, ws, shards, state, config.shutdownTimeoutSeconds * 1000, admin, adapter, ctx.webhooks, fallback);
    return stopping;
  };
  const reload = async (file: Readonly<HeraldConfig>): Promise<ReloadReport> => applyReload(tenants.merge(file), { ctx, main, shards, running, forget: { capability, quota } });
  return { port, host: config.host, secure: main.secure, metricsPort, reload, stop };
}

/** Starts every shard worker (a broken one fails start-up, not the first request); resolves with the installation secret. */
async function startShards(config: Readonly<HeraldConfig>, dataDir: string, localSecret: string): Promise<{ shards: ShardPool<HeraldShardApi>; installSecret: string }> {
  const shards = new ShardPool<HeraldShardApi>({
    workerFile: SHARD_WORKER_FILE,
    shardCount: config.shards,
    dataDir,
    config,
    installSecret: localSecret,
    requestTimeoutMs: config.shardRequestTimeoutMs,
  });
  await shards.broadcast({ type: 'core.ping' }, 30_000);
  // Device ids derive from this secret: in a cluster, the one every node shares (PostgreSQL).
  const installSecret = config.cluster?.postgresUrl ? await pushStoreReady(shards, config.cluster.postgresUrl, localSecret) : localSecret;
  return { shards, installSecret };
}

/** Runs a start-up step; when it fails, what started before it stops (the adapter leaves, the shards close) and the error goes on. */
async function stopOnFailure<T>(shards: ShardPool<HeraldShardApi>, adapter: ChannelAdapter | undefined, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    await adapter?.close().catch(() => {});
    await shards.close(5000);
    throw err;
  }
}

/** Apps and push instances of the admin API join the config file's (which wins on conflict). */
function tenantRegistry(
  ctx: ServerContext,
  shards: ShardPool<HeraldShardApi>,
  running: RunningTenants,
  cluster: Cluster | null,
  forget: AppForgetting,
): TenantRegistry {
  const shared = cluster ? new RedisTenantStore(cluster) : null;
  return new TenantRegistry({
    store: shared ?? new LmdbTenantStore(shards),
    shared,
    running,
    config: () => ctx.config,
    effects: { appDeleted: (appId) => forgetRemovedApp(forget, appId) },
    pushAllowed: !ctx.config.cluster || Boolean(ctx.config.cluster.postgresUrl),
    retirePush: (instanceId) => retirePushInstance(shards, instanceId),
  });
}

/**
 * The route table: every HTTP route of Herald, by path prefix and the module that defines it.
 *   /  /ready  /health  /debug/shards/*          http/system-routes.ts
 *   /metrics (unless on its own listener)        http/metrics-routes.ts
 *   /apps/:appId/...  (channel API C1-C6)        channels/http-api/routes.ts
 *   /device_api /customer_api /user_api          push/http/devices/routes.ts
 *   /publish_api  (P1, P2)                       push/http/publishes/routes.ts
 *   /reporting_api, publish statistics           push/http/reports/routes.ts
 *   /admin/v1/...  (with an admin block)         admin/routes.ts
 *   anything else: 404                           notFoundRoutes below (added by the caller, last)
 * WebSocket upgrades (/app/<key>; any other path closes with 4005): channels/ws/endpoint.ts.
 */
function routeTable(ctx: ServerContext, quota: MessageCharger, metrics: HeraldMetrics, admin: AdminEndpoints | undefined, metricsListener: boolean): Route[] {
  return [
    ...systemRoutes(ctx),
    ...(metricsListener ? [] : metricsRoutes(ctx, metrics)),
    ...channelApiRoutes(ctx, quota),
    ...deviceApiRoutes(ctx),
    ...publishApiRoutes(ctx),
    ...reportingApiRoutes(ctx),
    ...(admin?.routes ?? []),
  ];
}

/**
 * Applies a re-read config (SIGHUP), merged with the stored tenants: see config/reload.ts.
 * Certificates first (bad files leave everything as it was), then the shards, then this thread.
 */
async function applyReload(
  merged: Readonly<HeraldConfig>,
  live: { ctx: ServerContext; main: MainApp; shards: ShardPool<HeraldShardApi>; running: RunningTenants; forget: AppForgetting },
): Promise<ReloadReport> {
  const { ctx, main, shards, running, forget } = live;
  const plan = planReload(ctx.config, merged);
  const { effective, tenants } = plan;
  if (effective.tls) main.reloadCertificates(effective.tls);
  // Push instances gone from the file: their records are retired (and purged) on every shard.
  const retired = await Promise.allSettled(tenants.removedPush.map((id) => retirePushInstance(shards, id)));
  for (const r of retired) {
    if (r.status === 'rejected') log.error('reload: the records of a removed push instance were not retired', { error: String(r.reason) });
  }
  // Only apps or push instances changed: the shards take the changed entries (core.tenants),
  // as for an admin API change; else each shard's runtime hands the whole config to every area.
  const onlyTenants = plan.changed.every((setting) => setting === 'apps' || setting === 'push');
  const reloaded = onlyTenants
    ? []
    : await Promise.allSettled(Array.from({ length: ctx.core.shardCount }, (_, i) => ctx.core.request(i, { type: 'core.reload', config: effective as HeraldConfig })));
  // The shards before this thread: a request this thread lets through for a new app must find
  // the app on its shard. A shard that misses it gets the config when it restarts.
  const { closed, taken } = running.apply(tenants, { config: effective, shardsUpToDate: !onlyTenants });
  const answers = [...reloaded, ...(await Promise.allSettled([taken]))];
  for (const a of answers) {
    if (a.status === 'rejected') log.error('reload: a shard did not take the new config', { error: String(a.reason) });
  }
  setLogLevel(effective.logLevel);
  await Promise.all(tenants.removedApps.map((id) => forgetRemovedApp(forget, id)));
  if (plan.changed.includes('push')) logMissingCredentials(effective);
  return { changed: plan.changed, restartNeeded: plan.restartNeeded, closedConnections: closed };
}

/** What a removed app leaves beside its shards' state: the cluster's records and the message quota's count. */
interface AppForgetting {
  capability: ClusterCapability | null;
  quota: MessageCharger;
}

/**
 * After an app's removal (its shards dropped its state, its sockets here are closed): its
 * message count of today goes (so an app created later with the same id has its whole quota)
 * and, in a cluster, its cached events and kept history events in Redis. A failure (Redis
 * away) is logged: the count expires after its day, the cached events after the app's
 * cacheTtlSeconds, the history keys within max(1 h, ttlSeconds) + ttlSeconds of the app's last event.
 */
async function forgetRemovedApp({ capability, quota }: AppForgetting, appId: string): Promise<void> {
  await Promise.resolve()
    .then(() => quota.forget(appId))
    .catch((err: unknown) => log.warn('app removed: its message count of today not dropped from Redis (it expires after its day)', { appId, error: String(err) }));
  await capability?.forgetApp(appId).catch((err: unknown) => log.warn('app removed: its cached and history events not dropped from Redis (they expire with their TTL)', { appId, error: String(err) }));
}

/**
 * Reads the stored tenants and runs with them: the maps and the running config get those the
 * config file does not shadow, the shards get them in `core.tenants` pages. In a cluster,
 * another node's change notice is applied from then on.
 */
async function startTenants(tenants: TenantRegistry, ctx: ServerContext, running: RunningTenants, cluster: Cluster | null): Promise<void> {
  const loaded = await tenants.load(ctx.config);
  const fileApps = new Set(ctx.config.apps.map((a) => a.id));
  const filePush = new Set(ctx.config.push.map((p) => p.instanceId));
  const apps = loaded.apps.filter((a) => !fileApps.has(a.id));
  const push = loaded.push.filter((p) => !filePush.has(p.instanceId));
  await running.apply({ apps, push }, { config: loaded }).taken;
  cluster?.onControl((message, origin) => {
    if (message.type === 'tenantChanged' && origin !== cluster.nodeId) tenants.changedElsewhere();
  });
  tenants.follow();
}

/** Says, per push instance, which platforms it has no credentials for (their devices fail). */
function logMissingCredentials(config: Readonly<HeraldConfig>): void {
  for (const instance of config.push) {
    const missing = missingPlatforms(instance);
    if (missing.length > 0) {
      log.info('push instance has no credentials for some platforms: publishes count their devices as failed', { instanceId: instance.instanceId, platforms: missing });
    }
  }
}

/** The shard worker entry (compiled beside this file): it lists the areas every shard runs. */
const SHARD_WORKER_FILE = fileURLToPath(new URL('./shard-worker.js', import.meta.url));

/** Thrown when a cluster node cannot join its cluster (Redis unreachable, push instance leased elsewhere). */
export class ClusterStartError extends Error {
  override readonly name = 'ClusterStartError';
}

/**
 * With a `cluster` block, the node's cluster (built here, once) and the channel adapter on it,
 * which joins it; otherwise the adapter of one node (channels/adapter/open-adapter.ts).
 */
async function createChannelAdapter(
  config: Readonly<HeraldConfig>,
  topics: TopicFanout,
  shards: ShardPool<HeraldShardApi>,
  registry: SocketRegistry,
  running: () => Readonly<HeraldConfig>,
  apps: ReadonlyMap<string, AppConfig>,
): Promise<{ adapter: ChannelAdapter; cluster: Cluster | null }> {
  if (config.cluster) {
    try {
      const cluster = new Cluster(config.cluster, { nodeId: config.cluster.nodeId ?? randomNodeId(hostname()) });
      const adapter = await openChannelAdapter({ topics, registry, shards, cluster, subscriptionWaitMs: config.cluster.subscriptionWaitMs, config: running, apps });
      log.info('cluster: node joined', { nodeId: cluster.nodeId, redis: describeRedis(config.cluster), keyPrefix: config.cluster.keyPrefix });
      return { adapter, cluster };
    } catch (err) {
      throw new ClusterStartError(
        `cluster: cannot join through ${describeRedis(config.cluster)}: ${(err as Error).message}; check cluster.redisUrl (or HERALD_REDIS_URL) and that Redis runs there`,
      );
    }
  }
  const adapter = await openChannelAdapter({ topics, registry, shards, cluster: null, subscriptionWaitMs: 0, config: running, apps });
  return { adapter, cluster: null };
}

/**
 * In a cluster, push records live in PostgreSQL so that any node serves any push instance: a
 * cluster with push instances and no `cluster.postgresUrl` is refused before anything starts.
 */
function requirePushStore(config: Readonly<HeraldConfig>): void {
  if (!config.cluster || config.push.length === 0 || config.cluster.postgresUrl) return;
  throw new ClusterStartError(
    'cluster: push instances need a shared PostgreSQL in cluster mode: set cluster.postgresUrl (or HERALD_POSTGRES_URL), or remove the push instances (a channels-only cluster needs only Redis)',
  );
}

/**
 * Every shard's push store connected and migrated (the shards do it: the main thread never
 * connects), or a start-up error; resolves to the cluster's installation secret.
 */
async function pushStoreReady(shards: ShardPool<HeraldShardApi>, url: string, candidate: string): Promise<string> {
  try {
    const [first] = await shards.broadcast({ type: 'device.storeReady', installSecret: candidate }, 60_000);
    log.info('cluster: push store ready', { postgres: describePostgres(url) });
    return first!.installSecret;
  } catch (err) {
    await shards.close(5000);
    throw new ClusterStartError(`cluster: cannot use the push store at ${describePostgres(url)}: ${(err as Error).message}`);
  }
}

/** A PostgreSQL URL fit for logs: its password masked. */
function describePostgres(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return 'postgres://(unparsable URL)';
  }
}

/** First path segments of the push APIs (Beams): their 404s use the push error body. */
const PUSH_PREFIXES = ['device_api', 'publish_api', 'reporting_api', 'customer_api', 'user_api'];

/**
 * The catch-all 404 for every method and path no route serves (registered last; uWS prefers
 * any more specific pattern). Paths under a push API prefix answer in the push error shape,
 * every other one in the channel API's; both with `Access-Control-Allow-Origin: *` like the
 * APIs themselves, so a browser page sees the error instead of a CORS failure.
 */
function notFoundRoutes(): Route[] {
  const notFound = (rc: RequestContext): Reply => {
    const first = rc.path.split('/')[1] ?? '';
    const err = new HeraldError('ROUTE_NOT_FOUND', `No route for ${rc.method.toUpperCase()} ${rc.path}`);
    return errorReply(err, PUSH_PREFIXES.includes(first) ? 'push' : 'channel', rc.path);
  };
  return [{ method: 'any', pattern: '/*', handler: notFound, options: { errorStyle: 'channel', bodyLimit: 0, extraHeaders: CORS_ANY_ORIGIN } }];
}

/** Thrown when the port cannot be had; the CLI prints the message alone. */
export class ListenError extends Error {
  override readonly name = 'ListenError';
}

/**
 * Listens on host:port; by default alone (a port in use fails), with `reusePort` shared with
 * other processes that also ask for it. `shareable` (TLS): opened with SO_REUSEPORT even without
 * `reusePort`, so that a certificate reload can open a new listener beside it; the port is then
 * first checked free with a listener that does not share (a port in use still fails).
 */
async function listen(app: ReturnType<UwsModule['App']>, host: string, port: number, reusePort: boolean, shareable = false): Promise<us_listen_socket> {
  const failure = (at: number): ListenError => {
    const hint = reusePort
      ? 'it is in use by a process that does not share it (or not permitted)'
      : 'it is in use (another Herald or another program), or not permitted; ' +
        'choose another port (port, or HERALD_PORT); to run several Herald nodes of one cluster on one port, set "reusePort": true on each';
    return new ListenError(`cannot listen on ${host}:${at}: ${hint}`);
  };
  let at = port;
  if (shareable && !reusePort) {
    // Also picks the port when 0 (an ephemeral port cannot be shared once bound).
    at = await new Promise<number>((resolvePort, reject) => {
      const probe = createNetServer();
      probe.once('error', () => reject(failure(port)));
      probe.listen({ host, port, exclusive: true }, () => {
        const bound = (probe.address() as AddressInfo).port;
        probe.close(() => resolvePort(bound));
      });
    });
  }
  return new Promise((resolvePromise, reject) => {
    const options = reusePort || shareable ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT;
    (app.listen as unknown as ListenWithOptions).call(app, host, at, options, (socket) => {
      if (socket) resolvePromise(socket);
      else reject(failure(at));
    });
  });
}

async function shutdown(
  main: MainApp,
  ws: WebSocketEndpoint,
  shards: ShardPool<HeraldShardApi>,
  state: ServerState,
  timeoutMs: number,
  admin: AdminEndpoints | undefined,
  adapter: ChannelAdapter,
  webhooks: WebhooksClient,
  fallback: HttpFallback,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  state.draining = true;
  state.ready = false;
  log.info('shutting down: no new connections');
  main.closeListener();
  ws.closeAll(CLOSE_CODES.GENERIC_RECONNECT, 'Server shutting down');
  admin?.close();
  // Requests finish, and the closed sockets' close handlers run (their leaves start: a cluster
  // node's leave webhooks are decided before it leaves the cluster).
  while ((inFlight.count > 0 || ws.connectionCount() > 0) && Date.now() < deadline - 2000) {
    await new Promise((r) => setTimeout(r, 20));
  }
  if (inFlight.count > 0) log.warn('shutdown: requests still in flight at the deadline', { inFlight: inFlight.count });
  if (ws.connectionCount() > 0) log.warn('shutdown: connections not closed by the deadline', { connections: ws.connectionCount() });
  // HTTP fallback sessions were closed with the connections and their close lines written: their streams end.
  fallback.close();
  // A cluster node leaves its cluster while its shards still take the webhooks that produces.
  await adapter.close().catch((err: unknown) => log.warn('shutdown: leaving the cluster failed', { error: String(err) }));
  // Webhooks due now get their first attempt before the shards stop: a node that does not come
  // back (a cluster scaled down) would otherwise keep them in its outbox. Bounded by the deadline.
  const drainMs = deadline - Date.now() - 1000;
  if (drainMs > 0) {
    const left = await webhooks.drain(drainMs).catch(() => -1);
    if (left !== 0) log.warn('shutdown: webhooks due at the stop were not all attempted; they are sent after the next start', { left });
  }
  await shards.close(Math.max(1000, deadline - Date.now()));
  log.info('shutdown complete');
}
