/**
 * Herald's composition root, on the main thread: builds the shard pool (its worker entry lists
 * the areas, shard-worker.ts), one main-thread client per area (the channel adapter; push
 * devices, publishes, reports; webhooks), the uWS front end (HTTP routes and the WebSocket
 * endpoint), and hands each route module only the clients and config it uses. This thread
 * stays an I/O loop: storage, gateway calls and per-device work happen on the shards.
 */
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { us_listen_socket } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from './config/schema.js';
import { loadUws, type UwsModule } from './http/uws-native.js';
import { registerRoutes } from './http/router.js';
import { messageQuotaOf } from './channels/http-api/routes.js';
import { routeTable, notFoundRoutes } from './front-end/route-table.js';
import { drainServing, installServing } from './front-end/serving.js';
import { claimPort, listen, ListenError } from './http/listen.js';
import type { Route } from './http/router.js';
import type { StreamRequest, StreamSink } from './admin/stream.js';
import { FrontEndThreads } from './front-end/threads.js';
import { SharedCounters } from './front-end/shared-counters.js';
import { createFanoutBuffers, ThreadedTopicFanout, type FanoutInit } from './front-end/fanout.js';
import type { LocalChannelAdapter } from './channels/adapter/local-adapter.js';

export { ListenError } from './http/listen.js';
import { metricsRoutes } from './http/metrics-routes.js';
import { MainApp } from './http/tls.js';
import { HeraldMetrics } from './metrics/prometheus.js';
import { heraldVersion } from './metrics/build-info.js';
import { planReload } from './config/reload.js';
import { missingPlatforms } from './config/key-material.js';
import { setLogLevel } from './log.js';
import { openDataDir } from './shards/data-dir.js';
import { ShardPool } from './shards/pool.js';
import { log } from './log.js';
import { tenantsAndClients } from './server-clients.js';
import type { WebhooksClient } from './webhooks/client.js';
import type { ServerContext, ServerState } from './server-context.js';
import type { HeraldShardApi } from './shard-api.js';
import type { ChannelAdapter, ClusterCapability, MessageCharger } from './channels/adapter/channel-adapter.js';
import { ClusterThreadsHost, openChannelAdapter } from './channels/adapter/open-adapter.js';
import type { TopicFanout } from './http/topic-fanout.js';
import { Cluster } from './cluster/cluster.js';
import { randomNodeId } from './cluster/node-session.js';
import { describeRedis } from './cluster/connection.js';
import { hostname } from 'node:os';
import { registerWebSocket } from './channels/ws/endpoint.js';
import { SocketRegistry } from './channels/socket-registry.js';
import { SessionTopics } from './channels/http-fallback/topics.js';
import { createHttpFallback } from './channels/http-fallback/endpoint.js';
import { clusterSessionDirectory } from './channels/http-fallback/cluster-directory.js';
import { DebugHub } from './admin/debug-hub.js';
import { createAdminEndpoints, type AdminEndpoints } from './admin/admin-endpoints.js';
import { RunningTenants } from './tenants/running-tenants.js';
import { TenantRegistry } from './tenants/tenant-registry.js';
import { retirePushInstance } from './push/clients/instances.js';
import { LmdbTenantStore } from './tenants/lmdb-tenant-store.js';
import { RedisTenantStore } from './tenants/redis-tenant-store.js';
import { testHookNumber } from './test-hooks.js';

export interface RunningHerald {
  /** Settles when a front-end thread died: the server stops itself, and the process should end with an error code. */
  readonly failed: Promise<Error>;
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
  /** Connections closed because their app was removed or disabled (on every front-end thread). */
  closedConnections: number;
  /**
   * What some front-end thread did not take, one line each (a thread whose certificate files
   * turned bad after they were checked keeps its certificate; a thread that did not answer):
   * the others took the whole config. Empty when every thread took it.
   */
  notApplied: string[];
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
  // Several front-end threads: the budgets they share, the buffers frames cross between them, and the threads once started.
  const threadCounters = config.frontEndThreads > 1 ? SharedCounters.create({ threads: config.frontEndThreads }) : undefined;
  const fanoutBuffers = config.frontEndThreads > 1 ? createFanoutBuffers({ threads: config.frontEndThreads, maxFrameBytes: maxFrameBytes(config) }) : undefined;
  let threaded: FrontEndThreads | undefined;
  const running = new RunningTenants(config, {
    shards,
    config: () => ctx.config,
    configChanged: (next) => {
      ctx.config = next;
      shards.setWorkerConfig(next);
    },
    ...(threadCounters && { follow: (change, next) => threaded?.applyTenants(change, next) ?? Promise.resolve(0) }),
  });
  // Topic delivery reaches HTTP fallback sessions too (channels/http-fallback/topics.ts); with
  // several front-end threads, this thread holds none: its adapter's frames (watchlists, frames
  // relayed from other nodes) go into the shared fan-out, which excludes a socket on any thread.
  const mainFanout = fanoutBuffers ? new ThreadedTopicFanout(fanoutBuffers, config.frontEndThreads, NO_LOCAL_TOPICS, {}) : undefined;
  const topics = new SessionTopics(main);
  // With a `cluster` block, the cluster is this node's membership, shared by every area that keeps state in Redis.
  const { adapter, cluster, clusterThreads } = await stopOnFailure(shards, undefined, () => createChannelAdapter(config, mainFanout ?? topics, shards, registry, () => ctx.config, running.appsById, mainFanout));
  const ctx: ServerContext = { config, installSecret, state, debug, channels: adapter, ...tenantsAndClients(running, shards) };
  // What a cluster adds (null on a single node): shared tenants, fallback relay, overview, figures.
  const capability = adapter.cluster;
  const quota = messageQuotaOf(adapter, threadCounters?.quota);
  const tenants = tenantRegistry(ctx, shards, running, cluster, { capability, quota });
  await stopOnFailure(shards, adapter, () => startTenants(tenants, ctx, running, cluster));

  // The dashboard's subscription tap sits on the adapter, where subscriptions are recorded.
  ctx.channels.tapSubscriptions(debug);
  const token = config.admin.token;
  const admin =
    token === null
      ? undefined
      : createAdminEndpoints({ ctx, hub: debug, token, trustedProxies: config.trustedProxies, connectionCount: (appId) => front.connectionCount(appId), threadConnections: () => front.threadConnections(), startedAt, tenants, ...(cluster && capability && { cluster: () => cluster.overview(capability.figures) }) });
  const metrics = new HeraldMetrics({
    core: ctx.core,
    webhooks: ctx.webhooks,
    load: shards,
    connections: () => front.connectionCounts(),
    threadConnections: () => front.threadConnections(),
    // The threads start later (listen): each scrape asks those running then.
    ...(config.frontEndThreads > 1 && { gather: () => threaded?.gatherCounters() ?? Promise.resolve([]) }),
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
  const controlPlane = [...(config.metrics ? [] : metricsRoutes(ctx, metrics)), ...(admin?.routes ?? [])];
  let died: ((error: Error) => void) | undefined;
  const front: FrontEnd =
    config.frontEndThreads > 1
      ? threadedFrontEnd({
          config,
          current: () => ctx.config,
          dataDir,
          installSecret,
          shards,
          counters: threadCounters!,
          fanout: fanoutBuffers!,
          controlPlane,
          ...(admin && { openStream: admin.openStream }),
          hub: debug,
          adapter,
          ...(clusterThreads && { cluster: clusterThreads }),
          onThreads: (t) => {
            threaded = t;
            clusterThreads?.follow(t);
          },
          died: (error) => died?.(error),
        })
      : frontEndHere({ uws, ctx, main, registry, topics, cluster, quota, controlPlane, admin, running });
  await testListenDelay();
  const port = await stopOnFailure(shards, adapter, () => front.listen());
  let metricsSocket: us_listen_socket | undefined;
  if (metricsApp && config.metrics) {
    const { host: metricsHost, port: metricsPortWanted } = config.metrics;
    metricsSocket = await stopOnFailure(shards, adapter, () =>
      listen(metricsApp, metricsHost, metricsPortWanted, false).catch(async (err: unknown) => {
        await front.close();
        throw new ListenError(`metrics listener: ${(err as Error).message}`);
      }),
    );
  }
  const metricsPort = metricsSocket ? uws.us_socket_local_port(metricsSocket) : null;
  // What waits for clients to come back after a restart (the leaves of the channels the previous
  // run left occupied) is timed from now: every front end accepts them.
  await shards.markServing();
  state.ready = true;
  log.info('herald listening', { host: config.host, port, tls: main.secure, metricsPort, shards: config.shards, frontEndThreads: config.frontEndThreads, dataDir, uws: uwsBuild, maxConnections: config.maxConnections ?? null });
  logMissingCredentials(config);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    // Closed once (a second close would touch a listen socket uSockets has freed).
    if (metricsSocket) uws.us_listen_socket_close(metricsSocket);
    metricsSocket = undefined;
    tenants.close();
    stopping ??= shutdown(front, shards, state, config.shutdownTimeoutSeconds * 1000, admin, adapter, ctx.webhooks);
    return stopping;
  };
  // A front-end thread that dies ends the process: what runs stops as on SIGTERM, and `failed` says why.
  const failed = new Promise<Error>((resolveFailed) => {
    died = (error) => {
      resolveFailed(error);
      void stop();
    };
  });
  const reload = async (file: Readonly<HeraldConfig>): Promise<ReloadReport> => applyReload(tenants.merge(file), { ctx, main, front, shards, running, forget: { capability, quota } });
  return { port, host: config.host, secure: main.secure, metricsPort, reload, stop, failed };
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
    holdUntilServing: true,
  });
  await shards.broadcast({ type: 'core.ping' }, SHARD_START_TIMEOUT_MS);
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
 * Applies a re-read config (SIGHUP), merged with the stored tenants: see config/reload.ts.
 * Certificates first (bad files leave everything as it was), then the shards, then this thread.
 */
async function applyReload(
  merged: Readonly<HeraldConfig>,
  live: { ctx: ServerContext; main: MainApp; front: FrontEnd; shards: ShardPool<HeraldShardApi>; running: RunningTenants; forget: AppForgetting },
): Promise<ReloadReport> {
  const { ctx, main, front, shards, running, forget } = live;
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
  const { closed, taken, followed } = running.apply(tenants, { config: effective, shardsUpToDate: !onlyTenants });
  const answers = [...reloaded, ...(await Promise.allSettled([taken]))];
  for (const a of answers) {
    if (a.status === 'rejected') log.error('reload: a shard did not take the new config', { error: String(a.reason) });
  }
  setLogLevel(effective.logLevel);
  // Each thread takes what it can: one that fails is reported, the others are not held back.
  const notApplied = await front.reload(effective);
  for (const problem of notApplied) log.error('reload: a front-end thread did not take all of the new config', { problem });
  await Promise.all(tenants.removedApps.map((id) => forgetRemovedApp(forget, id)));
  if (plan.changed.includes('push')) logMissingCredentials(effective);
  return { changed: plan.changed, restartNeeded: plan.restartNeeded, closedConnections: closed + (await followed), notApplied };
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

/** The main thread's own topics when several front-end threads serve: it holds no socket. */
const NO_LOCAL_TOPICS: TopicFanout = { publish: () => {}, numSubscribers: () => 0, publishFrom: () => {} };

/** The largest frame a channel event can make (the fan-out's buffers must hold one). */
function maxFrameBytes(config: Readonly<HeraldConfig>): number {
  return Math.max(config.maxRequestBodyBytes, config.maxWebSocketFrameBytes) * 2 + 4096;
}

/** The shard worker entry (compiled beside this file): it lists the areas every shard runs. */
const SHARD_WORKER_FILE = fileURLToPath(new URL('./shard-worker.js', import.meta.url));
/**
 * How long the start waits for the shard workers to come up, then to take each front-end
 * thread's ports (ms): a first start opens their storage, however short a request's timeout
 * (shardRequestTimeoutMs) is once the server runs.
 */
const SHARD_START_TIMEOUT_MS = 30_000;

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
  mainFanout: ThreadedTopicFanout | undefined,
): Promise<{ adapter: ChannelAdapter; cluster: Cluster | null; clusterThreads?: ClusterThreadsHost }> {
  if (config.cluster) {
    try {
      const cluster = new Cluster(config.cluster, { nodeId: config.cluster.nodeId ?? randomNodeId(hostname()) });
      // Several front-end threads: the node's subscriber and liveness stay on this thread, which relays to them.
      const clusterThreads = mainFanout ? new ClusterThreadsHost(cluster, mainFanout) : undefined;
      const adapter = await openChannelAdapter({ topics, registry, shards, cluster, subscriptionWaitMs: config.cluster.subscriptionWaitMs, config: running, apps, ...(clusterThreads && { threads: clusterThreads }) });
      log.info('cluster: node joined', { nodeId: cluster.nodeId, redis: describeRedis(config.cluster), keyPrefix: config.cluster.keyPrefix });
      return { adapter, cluster, ...(clusterThreads && { clusterThreads }) };
    } catch (err) {
      throw new ClusterStartError(
        `cluster: cannot join through ${describeRedis(config.cluster)}: ${(err as Error).message}; check cluster.redisUrl (or HERALD_REDIS_URL) and that Redis runs there`,
      );
    }
  }
  const adapter = await openChannelAdapter({ topics, registry, shards, cluster: null, subscriptionWaitMs: 0, config: running, apps, keptByShards: config.frontEndThreads > 1 });
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

async function shutdown(
  front: FrontEnd,
  shards: ShardPool<HeraldShardApi>,
  state: ServerState,
  timeoutMs: number,
  admin: AdminEndpoints | undefined,
  adapter: ChannelAdapter,
  webhooks: WebhooksClient,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  state.draining = true;
  state.ready = false;
  log.info('shutting down: no new connections');
  admin?.close();
  // No new connection; every one closed with 4200; requests finish, and the closed sockets'
  // close handlers run (their leaves start: a cluster node's leave webhooks are decided before
  // it leaves the cluster). HTTP fallback sessions were closed with the connections: their streams end.
  await front.drain(deadline - 2000);
  // A cluster node leaves its cluster while its shards still take the webhooks that produces.
  await adapter.close().catch((err: unknown) => log.warn('shutdown: leaving the cluster failed', { error: String(err) }));
  // Webhooks due now get their first attempt before the shards stop: a node that does not come
  // back (a cluster scaled down) would otherwise keep them in its outbox. Bounded by the deadline.
  const drainMs = deadline - Date.now() - 1000;
  if (drainMs > 0) {
    const left = await webhooks.drain(drainMs).catch(() => -1);
    if (left !== 0) log.warn('shutdown: webhooks due at the stop were not all attempted; they are sent after the next start', { left });
  }
  await front.close();
  await shards.close(Math.max(1000, deadline - Date.now()));
  log.info('shutdown complete');
}

/** What serves the port: this thread (one front-end thread), or several front-end threads. */
interface FrontEnd {
  /** Live connections, of one app or of all. */
  connectionCount(appId?: string): number;
  /** Open connections per app id. */
  connectionCounts(): Map<string, number>;
  /** Open connections per front-end thread. */
  threadConnections(): number[];
  /** Opens the port; answers the port it got. */
  listen(): Promise<number>;
  /** A reload's settings the front end reads (certificates, log level, the running config); answers what a thread did not take. */
  reload(effective: Readonly<HeraldConfig>): Promise<string[]>;
  /** Shutdown: no new connection, every one closed with 4200, requests answered; until `deadline`. */
  drain(deadline: number): Promise<void>;
  /** Shutdown, last: what is left closed. */
  close(): Promise<void>;
}

/** One front-end thread, this one: the WebSocket endpoint, HTTP fallback and every route on the main app. */
function frontEndHere(deps: {
  uws: UwsModule;
  ctx: ServerContext;
  main: MainApp;
  registry: SocketRegistry;
  topics: SessionTopics;
  cluster: Cluster | null;
  quota: MessageCharger;
  controlPlane: Route[];
  admin: AdminEndpoints | undefined;
  running: RunningTenants;
}): FrontEnd {
  const { uws, ctx, main, registry, topics, cluster, quota, controlPlane, admin, running } = deps;
  const { config, state } = ctx;
  const ws = registerWebSocket({ config, state, appsByKey: ctx.appsByKey, registry, adapter: ctx.channels, debug: ctx.debug });
  running.attach(ws);
  // In a cluster, requests of a session that reach another node are relayed to the session's node.
  const fallback = createHttpFallback({ config, appsByKey: ctx.appsByKey, endpoint: ws, topics, directory: cluster ? clusterSessionDirectory(cluster) : undefined });
  const serving = { ws, fallback };
  installServing(main, serving, [...routeTable(ctx, quota, controlPlane), ...notFoundRoutes()], state, admin && ((target) => admin.registerStream(target)));
  let listenSocket: us_listen_socket | undefined;
  return {
    connectionCount: (appId) => ws.connectionCount(appId),
    connectionCounts: () => ws.connectionCounts(),
    threadConnections: () => [ws.connectionCount()],
    listen: async () => {
      // With TLS the port is opened shareable (checked free first): a reload opens its new app beside it.
      listenSocket = await listen(main.app, config.host, config.port, config.reusePort, main.secure);
      const port = uws.us_socket_local_port(listenSocket);
      main.listening(config.host, port, listenSocket);
      return port;
    },
    reload: async () => [],
    drain: async (deadline) => {
      const left = await drainServing(main, serving, deadline);
      if (left.inFlight > 0) log.warn('shutdown: requests still in flight at the deadline', { inFlight: left.inFlight });
      if (left.connections > 0) log.warn('shutdown: connections not closed by the deadline', { connections: left.connections });
    },
    close: async () => {
      main.closeListener();
    },
  };
}

/**
 * Several front-end threads (front-end/threads.ts): this thread serves no connection; it keeps
 * the control plane, and its adapter publishes (watchlists, the dashboard's events) through the
 * threads' shared fan-out.
 */
function threadedFrontEnd(deps: {
  config: Readonly<HeraldConfig>;
  /** The running config (stored tenants included) when the threads start. */
  current: () => Readonly<HeraldConfig>;
  dataDir: string;
  installSecret: string;
  shards: ShardPool<HeraldShardApi>;
  counters: SharedCounters;
  fanout: FanoutInit;
  controlPlane: Route[];
  openStream?: (request: StreamRequest, sink: StreamSink) => void;
  hub: DebugHub;
  adapter: ChannelAdapter;
  /** A cluster node: its share for the threads. */
  cluster?: ClusterThreadsHost;
  onThreads: (threads: FrontEndThreads) => void;
  died: (error: Error) => void;
}): FrontEnd {
  const { config, counters } = deps;
  let threads: FrontEndThreads | undefined;
  return {
    connectionCount: (appId) => counters.connectionCount(appId),
    connectionCounts: () => counters.connectionCounts(),
    threadConnections: () => Array.from({ length: config.frontEndThreads }, (_, t) => counters.threadConnections(t)),
    listen: async () => {
      // Every thread listens in the port's SO_REUSEPORT group: the port is checked free first
      // (unless shared with other processes on purpose), and chosen first when 0.
      const port = config.reusePort && config.port !== 0 ? config.port : await claimPort(config.host, config.port);
      threads = await FrontEndThreads.start({
        config: deps.current(),
        dataDir: deps.dataDir,
        port,
        installSecret: deps.installSecret,
        attach: (t) => deps.shards.attachFrontEnd(t, Math.max(SHARD_START_TIMEOUT_MS, deps.current().shardRequestTimeoutMs)),
        counters,
        fanout: deps.fanout,
        controlPlane: deps.controlPlane,
        ...(deps.openStream && { openStream: deps.openStream }),
        hub: deps.hub,
        presence: (appId, userId, online) => deps.adapter.userPresence(appId, userId, online),
        ...(deps.cluster && { cluster: deps.cluster }),
        died: (t, error) => {
          const died = (): void => deps.died(new Error(`front-end thread ${t} died: ${error}`));
          // A cluster node's subscriptions go with its session when the process ends.
          if (deps.cluster) return died();
          const lost = deps.adapter as LocalChannelAdapter;
          void lost.dropFrontEnd(t).finally(died);
        },
      });
      deps.shards.onFrontEndPort((t, shard, p) => threads?.shardPort(t, shard, p));
      deps.onThreads(threads);
      return port;
    },
    reload: async (effective) => (await threads?.reload(effective)) ?? [],
    drain: async (deadline) => {
      await threads?.drain(deadline);
    },
    close: async () => {
      deps.cluster?.close();
      await threads?.exit();
    },
  };
}

/** Test hook (HERALD_TEST_HOOKS=1): HERALD_TEST_LISTEN_DELAY_MS between the shards' start and listening, as a slow start. */
async function testListenDelay(): Promise<void> {
  const ms = testHookNumber('HERALD_TEST_LISTEN_DELAY_MS');
  if (ms !== undefined) await new Promise((resolve) => setTimeout(resolve, ms));
}
