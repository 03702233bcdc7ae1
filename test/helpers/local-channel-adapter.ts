/**
 * A local channel adapter on real parts, for unit tests of the adapter and of what drives it:
 * real shard workers (the compiled dist/src/shard-worker.js, so `npm run build` first, as for
 * the integration tests) on a temp data dir, and a uWS app on a free port whose connections
 * are plain `ws` clients, registered as the WebSocket endpoint registers them.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import type { TemplatedApp, WebSocket as UwsSocket, us_listen_socket } from 'uWebSockets.js';
import { LocalChannelAdapter } from '../../src/channels/adapter/local-adapter.js';
import { SocketRegistry, type SocketState, type SocketUserData } from '../../src/channels/socket-registry.js';
import { SmallMap } from '../../src/channels/small-map.js';
import type { AppConfig, HeraldConfig } from '../../src/config/schema.js';
import type { ChannelAdapter } from '../../src/channels/adapter/channel-adapter.js';
import { parseConfig } from '../../src/config/load.js';
import { MainApp } from '../../src/http/tls.js';
import { loadUws } from '../../src/http/uws-native.js';
import type { TopicFanout } from '../../src/http/topic-fanout.js';
import type { HeraldShardApi } from '../../src/shard-api.js';
import { openDataDir } from '../../src/shards/data-dir.js';
import { ShardPool } from '../../src/shards/pool.js';
import { REPO_ROOT } from './herald-process.js';
import type { AdapterHarness, ContractConnection } from '../unit/channels/adapter/channel-adapter-contract.js';

const WORKER_FILE = join(REPO_ROOT, 'dist/src/shard-worker.js');

/** What the harness's sockets carry: the front end's state, and the user the connection signs in as. */
type HarnessData = SocketUserData & { signIn: string };

/** The one app a local harness serves. */
export const HARNESS_APP = 'contract-app';

/** A harness connection, with the front end's state of it. */
export interface LocalConnection extends ContractConnection {
  readonly state: SocketState;
}

export interface LocalHarness extends AdapterHarness {
  adapter: LocalChannelAdapter;
  /** The open connections (what the WebSocket endpoint's registry holds). */
  registry: SocketRegistry;
  /** The shards, typed with every request (test hooks on: core.stall works). */
  shards: ShardPool<HeraldShardApi>;
  connect(appId: string, userId?: string): Promise<LocalConnection>;
}

/** Shard pool settings a test may tighten (a small queue, a short timeout). */
export interface LocalPoolOptions {
  maxQueuePerShard?: number;
  requestTimeoutMs?: number;
}

/** Starts a local adapter for HARNESS_APP; `appOverrides` overrides fields of its config. */
export async function startLocalAdapter(appOverrides: Partial<AppConfig> = {}, pool: LocalPoolOptions = {}): Promise<LocalHarness> {
  return startAdapterHarness(async ({ topics, shards, registry }) => new LocalChannelAdapter(topics, shards, registry), appOverrides, pool);
}

/** What an adapter is built from in a harness. */
export interface HarnessParts {
  app: TemplatedApp;
  /** Frames go through it, as through the server's main app (plain, as without TLS). */
  topics: TopicFanout;
  shards: ShardPool<HeraldShardApi>;
  registry: SocketRegistry;
  config: HeraldConfig;
}

/** A harness connection and adapter of any kind (see startLocalAdapter for the parts). */
export interface Harness<A extends ChannelAdapter> extends AdapterHarness {
  adapter: A;
  /** The open connections (what the WebSocket endpoint's registry holds). */
  registry: SocketRegistry;
  shards: ShardPool<HeraldShardApi>;
  connect(appId: string, userId?: string): Promise<LocalConnection>;
}

/**
 * The harness around any adapter `build` makes: real shards on a temp data dir, a uWS app on a
 * free port whose `ws` clients are registered as the WebSocket endpoint registers them.
 */
export async function startAdapterHarness<A extends ChannelAdapter>(
  build: (parts: HarnessParts) => Promise<A>,
  appOverrides: Partial<AppConfig> = {},
  pool: LocalPoolOptions = {},
): Promise<Harness<A> & { close(): Promise<void> }> {
  statSync(WORKER_FILE); // built by `npm run build`
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-local-adapter-'));
  const config = parseConfig({
    dataDir,
    shards: 2,
    apps: [{ id: HARNESS_APP, key: 'contract-key', secret: 'contract-secret', cacheTtlSeconds: 600, ...appOverrides }],
  });
  const identity = openDataDir(dataDir, 2);
  const shards = new ShardPool<HeraldShardApi>({
    workerFile: WORKER_FILE, shardCount: 2, dataDir, config, installSecret: identity.installSecret, requestTimeoutMs: pool.requestTimeoutMs ?? 30_000, testHooks: true,
    ...(pool.maxQueuePerShard !== undefined ? { maxQueuePerShard: pool.maxQueuePerShard } : {}),
  });
  const { uws } = loadUws();
  const main = new MainApp(uws, null);
  const app = main.app;
  const registry = new SocketRegistry();
  const adapter = await build({ app, topics: main, shards, registry, config });
  const opened = new Map<string, (ws: UwsSocket<HarnessData>) => void>();
  const appConfig = config.apps[0]!;

  app.ws<HarnessData>('/*', {
    upgrade: (res, req, context) => {
      const [socketId = '', userId = ''] = req.getUrl().slice(1).split('/');
      const state: SocketState = {
        socketId, app: appConfig, ws: null, closed: false, channels: new SmallMap(), userId: null,
        openedMs: Date.now(), lastSeenMs: Date.now(), pingSentMs: 0, clientEventWindowMs: 0, clientEventCount: 0,
      };
      res.upgrade({ state, reject: null, signIn: decodeURIComponent(userId) }, req.getHeader('sec-websocket-key'), req.getHeader('sec-websocket-protocol'), req.getHeader('sec-websocket-extensions'), context);
    },
    open: (ws) => {
      const data = ws.getUserData();
      const state = data.state!;
      state.ws = ws;
      registry.add(state);
      if (data.signIn) registry.addUser(state, data.signIn);
      opened.get(state.socketId)?.(ws);
    },
    close: (ws) => {
      const state = ws.getUserData().state;
      if (!state) return;
      state.closed = true;
      state.ws = null;
      registry.remove(state);
      adapter.cluster?.disconnected(HARNESS_APP, state.socketId);
    },
  });
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('listen failed')))),
  );
  const port = uws.us_socket_local_port(listenSocket);
  await shards.broadcast({ type: 'core.ping' }, 30_000);

  let next = 1;
  const clients: WebSocket[] = [];
  return {
    adapter,
    registry,
    shards,
    async connect(appId: string, userId?: string): Promise<LocalConnection> {
      if (appId !== HARNESS_APP) throw new Error('the local harness serves one app');
      const socketId = `${next++}.${next++}`;
      const server = new Promise<UwsSocket<HarnessData>>((resolve) => opened.set(socketId, resolve));
      const client = new WebSocket(`ws://127.0.0.1:${port}/${socketId}${userId ? `/${encodeURIComponent(userId)}` : ''}`);
      clients.push(client);
      const frames: string[] = [];
      client.on('message', (data) => frames.push(String(data)));
      const closed = new Promise<number>((resolve) => client.on('close', (code) => resolve(code)));
      await new Promise<void>((resolve, reject) => {
        client.once('open', () => resolve());
        client.once('error', reject);
      });
      const socket = await server;
      return { socketId, socket, state: socket.getUserData().state!, frames, closed };
    },
    async close() {
      for (const client of clients) client.terminate();
      uws.us_listen_socket_close(listenSocket);
      await adapter.close?.();
      await shards.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

