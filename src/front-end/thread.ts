/**
 * A front-end thread (with `frontEndThreads` > 1): its own uWS app on the shared port (TLS
 * included), serving everything the port serves: the WebSocket endpoint, HTTP fallback
 * sessions, the channel and push APIs, `/ready`; the admin API, the dashboard and `/metrics` are
 * the main thread's, relayed there. It talks to the shard workers over its own ports, delivers
 * frames to the other threads through shared memory (fanout.ts), counts every per-app budget
 * in the process-wide counters (shared-counters.ts), and asks the main thread for what spans
 * the threads (who is online, terminating a user, where a fallback session lives).
 *
 * A thread that fails closes its uWS apps before it ends (an open app aborts the whole
 * process when its thread exits) and tells the main thread, which ends the process cleanly.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import type { HeraldConfig } from '../config/schema.js';
import { loadUws } from '../http/uws-native.js';
import type { Route } from '../http/router.js';
import { listenOn } from '../http/listen.js';
import { MainApp } from '../http/tls.js';
import { describeError, log, setLogLevel } from '../log.js';
import { tenantsAndClients } from '../server-clients.js';
import type { ServerContext, ServerState } from '../server-context.js';
import type { HeraldShardApi } from '../shard-api.js';
import { SocketRegistry } from '../channels/socket-registry.js';
import { SessionTopics } from '../channels/http-fallback/topics.js';
import { registerWebSocket } from '../channels/ws/endpoint.js';
import { createHttpFallback } from '../channels/http-fallback/endpoint.js';
import { RunningTenants } from '../tenants/running-tenants.js';
import type { TenantChange } from '../shards/context.js';
import type { KeptNotice } from '../channels/messages.js';
import { PortShardRequester } from '../shards/port-requester.js';
import { ControlLink } from './control.js';
import { routeTable, notFoundRoutes } from './route-table.js';
import { drainServing, installServing } from './serving.js';
import { relayedRoutes } from './route-relay.js';
import { ThreadedChannelAdapter } from './threaded-adapter.js';
import { threadClusterDirectory, threadSessionDirectory } from './thread-directory.js';
import { ThreadTap } from './thread-tap.js';
import { SharedCounters, SharedMissBudget } from './shared-counters.js';
import { ThreadedTopicFanout } from './fanout.js';
import { closeMissedSubscribers } from './missed-frames.js';
import { appIdOfTopic, countRemoteDelivery } from './delivery-count.js';
import type { TopicInterestHook } from '../http/topic-fanout.js';
import { snapshotNodeCounters } from '../metrics/counters-snapshot.js';
import { forgetTenantsExcept } from '../metrics/node-counters.js';
import { relayedStreams } from '../admin/stream-relay.js';
import type { FrontEndThreadData } from './thread-data.js';
import type { ChannelAdapter } from '../channels/adapter/channel-adapter.js';
import { startThreadShare, type ThreadShare } from '../channels/adapter/open-adapter.js';
import { messageQuotaOf } from '../channels/http-api/routes.js';

const data = workerData as FrontEndThreadData;
const link = new ControlLink(parentPort!);
let main: MainApp | undefined;

/** Ends the thread after an error it cannot recover from: apps closed first, then the main thread told. */
function fail(err: unknown): void {
  log.error('front-end thread failed: closing its connections and ending', { thread: data.thread, error: describeError(err) });
  try {
    main?.closeApps();
  } catch {
    // Closing what is left is all that can be done.
  }
  link.tell('dying', { error: describeError(err) });
  // The main thread ends the process; this thread's loop has nothing left to run.
  setImmediate(() => process.exit(1));
}
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);

async function start(): Promise<void> {
  const config: Readonly<HeraldConfig> = data.config;
  setLogLevel(config.logLevel);
  const { uws } = loadUws();
  main = new MainApp(uws, config.tls);
  const app = main;
  const shards = new PortShardRequester<HeraldShardApi>(data.shardPorts, { requestTimeoutMs: config.shardRequestTimeoutMs });
  link.on<{ shard: number; port: MessagePort }>('shardPort', ({ shard, port }) => shards.replacePort(shard, port));
  const counters = SharedCounters.attach(data.counters, data.thread);
  for (const [appId, slot] of data.slots) counters.setSlot(appId, slot);
  const state: ServerState = { ready: false, draining: false };
  const registry = new SocketRegistry();
  const running = new RunningTenants(config, {
    shards,
    config: () => ctx.config,
    configChanged: (next) => {
      ctx.config = next;
    },
  });
  // Fallback sessions and WebSockets alike tell the fan-out which topics this thread has subscribers on.
  const interest: TopicInterestHook = { add: (topic) => fanout.interest?.add(topic), remove: (topic) => fanout.interest?.remove(topic) };
  const topics = new SessionTopics(main, interest);
  const frameWatch: { remote?: (topic: string, frame: Uint8Array, producer: number, except: string) => void; signal?: (name: string, message: string) => void } = {};
  const fanout = new ThreadedTopicFanout(data.fanout, data.thread, topics, {
    lookupSocket: (socketId, topic) => {
      const state = registry.get(appIdOfTopic(topic), socketId);
      return state?.ws && !state.closed && state.ws.isSubscribed(topic) ? state.ws : undefined;
    },
    onDelivered: countRemoteDelivery,
    // The fan-out reads from its construction on, before the adapter exists.
    onRemoteFrame: (topic, frame, producer, except) => frameWatch.remote?.(topic, frame, producer, except),
    onSignal: (name, message) => frameWatch.signal?.(name, message),
    onReadersDropped: (threads, queuedBytes) =>
      log.warn('front-end threads fell behind on frames from this thread past the bound: going on without them until they catch up', { thread: data.thread, dropped: threads, queuedBytes }),
    onMissed: (producer, missed) => {
      const closed = closeMissedSubscribers(registry.all(), missed);
      log.warn('this front-end thread fell behind and missed frames: closing their subscribers with 4100', {
        thread: data.thread,
        producer,
        records: missed.records,
        topics: missed.topics === null ? 'all' : missed.topics.size,
        closed,
      });
    },
  });
  let adapter: ChannelAdapter;
  let share: ThreadShare | undefined;
  if (data.cluster && config.cluster) {
    share = await startThreadShare({
      init: data.cluster,
      settings: config.cluster,
      thread: data.thread,
      mainProducer: data.threads,
      link,
      topics: fanout,
      shards,
      registry,
      interest,
      connectionCount: (appId) => counters.connectionCount(appId),
      config: () => ctx.config,
      apps: running.appsById,
    });
    frameWatch.remote = share.remoteFrame;
    frameWatch.signal = share.signal;
    adapter = share.adapter;
  } else {
    const local = new ThreadedChannelAdapter(fanout, shards, registry, { frontEnd: data.thread, link, connectionCount: (appId) => counters.connectionCount(appId), interest });
    frameWatch.remote = (topic, frame) => local.remoteFrame(topic, frame);
    // A history channel's kept events come from its shard, in serial order, for this thread's sockets.
    shards.onNotice((notice) => {
      if (notice.type === 'channels.kept') local.keptByShard(notice as KeptNotice, topics);
    });
    adapter = local;
  }
  const debug = new ThreadTap(link);
  const ctx: ServerContext = { config, installSecret: data.installSecret, state, debug, channels: adapter, ...tenantsAndClients(running, shards) };
  adapter.tapSubscriptions(debug);
  const ws = registerWebSocket({ config, state, appsByKey: ctx.appsByKey, registry, adapter, debug, frontEndThread: data.thread, counters, interest });
  running.attach(ws);
  const fallback = createHttpFallback({ config, appsByKey: ctx.appsByKey, endpoint: ws, topics, directory: share ? threadClusterDirectory(data.thread, link, share.node) : threadSessionDirectory(data.thread, link), misses: new SharedMissBudget(data.counters, config.httpFallback.maxSessionMissesPerMinute) });
  const controlPlane = relayedRoutes(data.relaySpecs, data.relayPort);
  // The admin API's live stream (the dashboard's debug console) is opened on the main thread too.
  const streams = data.adminStream ? relayedStreams(data.relayPort) : null;
  // In a cluster the quota and rate limits count in Redis, across nodes (the adapter's).
  const allRoutes = [...routeTable(ctx, messageQuotaOf(adapter, counters.quota), controlPlane, counters.rateCounter), ...(process.env.HERALD_TEST_HOOKS === '1' ? [crashRoute(), stallRoute()] : []), ...notFoundRoutes()];
  const serving = { ws, fallback };
  installServing(main, serving, allRoutes, state, streams ? (target) => streams.register(target) : undefined);

  link.on<{ change: TenantChange; config: HeraldConfig | undefined; slots: [string, number][] }>('tenants', ({ change, config: next, slots }) => {
    for (const [appId, slot] of slots) counters.setSlot(appId, slot);
    const { closed } = running.apply(change, next ? { config: next, shardsUpToDate: true } : { shardsUpToDate: true });
    for (const appId of change.removedApps ?? []) counters.clearSlot(appId);
    // An app or instance created again with the same id starts its counters from 0.
    forgetTenantsExcept(new Set(ctx.appsById.keys()), new Set(ctx.pushInstances.keys()));
    return closed;
  });
  // Answers null, or why this thread kept its certificate (the rest of the config is taken either way).
  link.on<{ config: HeraldConfig }>('reload', ({ config: next }) => {
    setLogLevel(next.logLevel);
    ctx.config = next;
    if (!next.tls) return null;
    try {
      // The main thread checked the files; they may have changed since.
      app.reloadCertificates(next.tls);
      return null;
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      log.error('tls certificates not re-read on this front-end thread: its certificate stays', { thread: data.thread, error: reason });
      return reason;
    }
  });
  link.on<{ appId: string; userId: string }>('terminateUser', ({ appId, userId }) => registry.terminateUser(appId, userId));
  link.on('counters', () => snapshotNodeCounters());
  link.on<{ deadline: number }>('drain', async ({ deadline }) => {
    state.draining = true;
    state.ready = false;
    streams?.endAll();
    const left = await drainServing(app, serving, deadline);
    // The leaves of the closed sockets are recorded before the node leaves the cluster (main, next).
    if (share) await adapter.close().catch((err: unknown) => log.warn('shutdown: closing this thread\'s share of the cluster node failed', { thread: data.thread, error: describeError(err) }));
    return left;
  });
  link.on('exit', () => {
    debug.close();
    app.closeApps();
    fanout.close();
    shards.close();
    setImmediate(() => process.exit(0));
  });

  const listenSocket = await listenOn(main.app, config.host, data.port, { reusePort: config.reusePort, shared: true });
  main.listening(config.host, data.port, listenSocket);
  state.ready = true;
  link.tell('listening', null);
}

/** Test hook: the thread that takes `POST /debug/front-end/crash` fails as an uncaught error would make it (after answering). */
function crashRoute(): Route {
  return {
    method: 'post',
    pattern: '/debug/front-end/crash',
    options: { errorStyle: 'plain', bodyLimit: 0 },
    handler: () => {
      setTimeout(() => {
        throw new Error('test hook: front-end thread crash');
      }, 50);
      return { status: 200, body: { thread: data.thread } };
    },
  };
}

/**
 * Test hook: the thread that takes `POST /debug/front-end/stall?stall_ms=` answers its index,
 * then blocks its event loop that long (0: answers only, to learn which thread a connection is on).
 */
function stallRoute(): Route {
  return {
    method: 'post',
    pattern: '/debug/front-end/stall',
    options: { errorStyle: 'plain', bodyLimit: 0 },
    handler: (req) => {
      const stallMs = Number(new URLSearchParams(req.query).get('stall_ms') ?? 0);
      if (!Number.isFinite(stallMs) || stallMs < 0 || stallMs > 10_000) return { status: 400, body: { error: 'stall_ms must be in [0, 10000]' } };
      if (stallMs > 0) {
        setTimeout(() => {
          const until = Date.now() + stallMs;
          while (Date.now() < until) {
            // Blocked, as a thread busy with something else would be.
          }
        }, 20);
      }
      return { status: 200, body: { thread: data.thread, stallMs } };
    },
  };
}

start().catch(fail);
