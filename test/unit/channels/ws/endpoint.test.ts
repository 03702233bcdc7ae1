/**
 * The WebSocket endpoint of one front-end thread, put together as the server does (real shard
 * worker, LocalChannelAdapter, uWS app on a free port, the HTTP fallback on the same endpoint):
 * the socket ids it gives WebSocket clients and HTTP fallback sessions carry its thread.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { us_listen_socket } from 'uWebSockets.js';
import { DebugHub } from '../../../../src/admin/debug-hub.js';
import { LocalChannelAdapter } from '../../../../src/channels/adapter/local-adapter.js';
import { createHttpFallback, type HttpFallback } from '../../../../src/channels/http-fallback/endpoint.js';
import { SessionTopics } from '../../../../src/channels/http-fallback/topics.js';
import { isValidSocketId } from '../../../../src/channels/names.js';
import { threadOf } from '../../../../src/channels/socket-id.js';
import { SocketRegistry } from '../../../../src/channels/socket-registry.js';
import { registerWebSocket, type WebSocketEndpoint } from '../../../../src/channels/ws/endpoint.js';
import { parseConfig } from '../../../../src/config/load.js';
import { MainApp } from '../../../../src/http/tls.js';
import { loadUws } from '../../../../src/http/uws-native.js';
import type { HeraldShardApi } from '../../../../src/shard-api.js';
import { openDataDir } from '../../../../src/shards/data-dir.js';
import { ShardPool } from '../../../../src/shards/pool.js';
import { connectSession, sessionBase } from '../../../helpers/fallback-session.js';
import { REPO_ROOT } from '../../../helpers/herald-process.js';
import { decodeFrame } from '../../../helpers/protocol-frame.js';

const WORKER_FILE = join(REPO_ROOT, 'dist/src/shard-worker.js');
const APP = { id: 'thread-app', key: 'thread-key', secret: 'thread-secret' };
const THREAD = 5;

describe('a WebSocket endpoint of front-end thread 5', () => {
  const { uws } = loadUws();
  let dataDir: string;
  let shards: ShardPool<HeraldShardApi>;
  let debug: DebugHub;
  let endpoint: WebSocketEndpoint;
  let fallback: HttpFallback;
  let listenSocket: us_listen_socket;
  let port: number;

  beforeAll(async () => {
    statSync(WORKER_FILE); // built by `npm run build`
    dataDir = mkdtempSync(join(tmpdir(), 'herald-front-end-thread-'));
    const config = parseConfig({ dataDir, shards: 1, apps: [APP] });
    const identity = openDataDir(dataDir, 1);
    shards = new ShardPool<HeraldShardApi>({ workerFile: WORKER_FILE, shardCount: 1, dataDir, config, installSecret: identity.installSecret, requestTimeoutMs: 30_000, testHooks: false });
    const main = new MainApp(uws, null);
    const topics = new SessionTopics(main);
    const registry = new SocketRegistry();
    const adapter = new LocalChannelAdapter(topics, shards, registry, { frontEnd: THREAD });
    const appsByKey = new Map(config.apps.map((app) => [app.key, app]));
    debug = new DebugHub({ dataDir });
    endpoint = registerWebSocket({ config, state: { ready: true, draining: false }, appsByKey, registry, adapter, debug, frontEndThread: THREAD });
    fallback = createHttpFallback({ config, appsByKey, endpoint, topics });
    main.install((app) => fallback.register(app), endpoint.behavior);
    listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
      main.app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('listen failed')))),
    );
    port = uws.us_socket_local_port(listenSocket);
    await shards.broadcast({ type: 'core.ping' }, 30_000);
  }, 60_000);

  afterAll(async () => {
    endpoint?.closeAll(4200, 'test over');
    fallback?.close();
    if (listenSocket) uws.us_listen_socket_close(listenSocket);
    debug?.close();
    await shards?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }, 60_000);

  async function webSocketId(): Promise<string> {
    const client = new WebSocket(`ws://127.0.0.1:${port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`);
    try {
      const first = await new Promise<string>((resolve, reject) => {
        client.once('message', (raw) => resolve(String(raw)));
        client.once('error', reject);
      });
      const frame = decodeFrame(first);
      expect(frame.event).toBe('pusher:connection_established');
      return (frame.data as { socket_id: string }).socket_id;
    } finally {
      client.close();
    }
  }

  it('gives WebSocket clients and HTTP fallback sessions socket ids of its thread', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await webSocketId());
    for (let i = 0; i < 5; i++) ids.push(await connectSession(sessionBase(`http://127.0.0.1:${port}`, APP.key)));
    for (const id of ids) {
      expect(isValidSocketId(id), id).toBe(true);
      expect(threadOf(id), id).toBe(THREAD);
    }
  });
});
