/**
 * Two front ends in one process given the shared counters, as front-end threads are: each is
 * a uWS app on its own port with its own WebSocket endpoint (registerWebSocket) and channel API
 * routes, attached as thread 0 and thread 1 to the same SharedCounters. Every per-app limit and
 * the node's maxConnections is then one budget across both, whichever port a client uses.
 * Real shards behind a local adapter (npm run build first), real `ws` clients and fetch.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DebugHub } from '../../../src/admin/debug-hub.js';
import { channelApiRoutes, messageQuotaOf } from '../../../src/channels/http-api/routes.js';
import { SocketRegistry } from '../../../src/channels/socket-registry.js';
import { registerWebSocket, type WebSocketEndpoint } from '../../../src/channels/ws/endpoint.js';
import { parseConfig } from '../../../src/config/load.js';
import type { AppConfig } from '../../../src/config/schema.js';
import { SharedCounters } from '../../../src/front-end/shared-counters.js';
import { registerRoutes } from '../../../src/http/router.js';
import { loadUws } from '../../../src/http/uws-native.js';
import { HARNESS_APP, startLocalAdapter, type LocalHarness } from '../../helpers/local-channel-adapter.js';
import { decodeFrame, type Frame } from '../../helpers/protocol-frame.js';
import { signedQuery } from '../../helpers/signed-request.js';

/** The counters' clock: fixed, so that every rate window in the test is one window. */
const NOW = Date.UTC(2026, 0, 1, 12, 0, 0, 250);

interface FrontEnd {
  port: number;
  endpoint: WebSocketEndpoint;
  listenSocket: us_listen_socket;
}

describe('front ends sharing SharedCounters', () => {
  const { uws } = loadUws();
  let harness: LocalHarness & { close(): Promise<void> };
  let dataDir: string;
  let debug: DebugHub;
  let main: SharedCounters;
  let frontEnds: FrontEnd[];
  const clients: WebSocket[] = [];

  beforeAll(async () => {
    harness = (await startLocalAdapter()) as LocalHarness & { close(): Promise<void> };
    dataDir = mkdtempSync(join(tmpdir(), 'herald-front-end-counters-'));
    const config = parseConfig({
      dataDir,
      maxConnections: 4,
      apps: [
        // The local adapter's app (its shards know it): the channel API's limits.
        { id: HARNESS_APP, key: 'contract-key', secret: 'contract-secret', messageQuota: 2, maxHttpRequestsPerSecond: 4 },
        { id: 'conn', key: 'conn-key', secret: 'conn-secret', maxConnections: 2 },
        { id: 'rate', key: 'rate-key', secret: 'rate-secret', maxNewConnectionsPerSecond: 1 },
        { id: 'free', key: 'free-key', secret: 'free-secret' },
      ],
    });
    const appsByKey = new Map<string, AppConfig>(config.apps.map((app) => [app.key, app]));
    debug = new DebugHub({ dataDir });
    main = SharedCounters.create({ threads: 2, maxApps: 8, now: () => NOW });
    const slots = config.apps.map((app) => [app.id, main.assignSlot(app.id)] as const);
    frontEnds = await Promise.all(
      [0, 1].map(async (thread) => {
        const counters = SharedCounters.attach(main.init, thread, { now: () => NOW });
        for (const [appId, slot] of slots) counters.setSlot(appId, slot);
        const app: TemplatedApp = uws.App();
        const state = { ready: true, draining: false };
        const endpoint = registerWebSocket({ config, state, appsByKey, registry: new SocketRegistry(), adapter: harness.adapter, debug, counters });
        app.ws('/*', endpoint.behavior);
        const ctx = { config, appsByKey, channels: harness.adapter, debug };
        registerRoutes(app, channelApiRoutes(ctx, messageQuotaOf(harness.adapter, counters.quota), counters.rateCounter));
        const listenSocket = await new Promise<us_listen_socket>((resolve, reject) =>
          app.listen('127.0.0.1', 0, (socket) => (socket ? resolve(socket) : reject(new Error('listen failed')))),
        );
        return { port: uws.us_socket_local_port(listenSocket), endpoint, listenSocket };
      }),
    );
  }, 60_000);

  afterAll(async () => {
    for (const client of clients) client.terminate();
    for (const frontEnd of frontEnds ?? []) uws.us_listen_socket_close(frontEnd.listenSocket);
    debug?.close();
    await harness?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  /** A WebSocket to front end `thread` for `key`: its first frame and how it closed. */
  async function connect(thread: number, key: string): Promise<{ ws: WebSocket; first: Frame; closed: Promise<number> }> {
    const ws = new WebSocket(`ws://127.0.0.1:${frontEnds[thread]!.port}/app/${key}?protocol=7&client=js&version=8.4.0&flash=false`);
    clients.push(ws);
    ws.on('error', () => undefined);
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    const first = await new Promise<Frame>((resolve, reject) => {
      ws.once('message', (raw) => resolve(decodeFrame(raw.toString())));
      void closed.then((code) => reject(new Error(`closed with ${code} before the first frame`)));
    });
    return { ws, first, closed };
  }

  async function refusedWith(thread: number, key: string): Promise<number> {
    const { first, closed } = await connect(thread, key);
    expect(first.event).toBe('pusher:error');
    return closed;
  }

  async function accepted(thread: number, key: string): Promise<WebSocket> {
    const { ws, first } = await connect(thread, key);
    expect(first.event).toBe('pusher:connection_established');
    return ws;
  }

  it("holds an app's connection quota, its new-connection rate and the node's maxConnections across both", async () => {
    const conn0 = await accepted(0, 'conn-key');
    await accepted(1, 'conn-key');
    expect(await refusedWith(0, 'conn-key')).toBe(4004);
    expect(await refusedWith(1, 'conn-key')).toBe(4004);
    expect(frontEnds[0]!.endpoint.connectionCount('conn')).toBe(2);
    expect(main.connectionCount('conn')).toBe(2);
    // A close on one frees a place for the other.
    conn0.close();
    await new Promise((resolve) => conn0.once('close', resolve));
    expect(main.connectionCount('conn')).toBe(1);
    await accepted(1, 'conn-key');

    await accepted(1, 'rate-key');
    expect(await refusedWith(0, 'rate-key')).toBe(4301);

    // conn 2 + rate 1: the node's fourth is its last.
    await accepted(0, 'free-key');
    expect(await refusedWith(1, 'free-key')).toBe(4100);
    expect(main.connectionCount()).toBe(4);
    expect([main.threadConnections(0), main.threadConnections(1)]).toEqual([1, 3]);
    expect(frontEnds[1]!.endpoint.connectionCounts()).toEqual(new Map([['conn', 2], ['rate', 1], ['free', 1]]));
  });

  it("holds an app's message quota and HTTP request rate across both channel APIs", async () => {
    const creds = { id: HARNESS_APP, key: 'contract-key', secret: 'contract-secret' };
    const request = async (thread: number, method: 'GET' | 'POST', path: string, body?: string): Promise<{ status: number; code: unknown }> => {
      const query = signedQuery(creds, method, path, body ? { body } : {});
      const res = await fetch(`http://127.0.0.1:${frontEnds[thread]!.port}${path}?${query}`, {
        method,
        ...(body && { body, headers: { 'content-type': 'application/json' } }),
      });
      const answer = (await res.json()) as { code?: unknown };
      return { status: res.status, code: answer.code };
    };
    const trigger = (thread: number): Promise<{ status: number; code: unknown }> =>
      request(thread, 'POST', `/apps/${HARNESS_APP}/events`, JSON.stringify({ name: 'e', channels: ['c'], data: '{}' }));
    expect((await trigger(0)).status).toBe(200);
    expect((await trigger(1)).status).toBe(200);
    expect(await trigger(0)).toEqual({ status: 403, code: 'APP_OVER_QUOTA' });
    expect(main.quota.usedToday(HARNESS_APP)).toBe(2);
    // Four requests in the window so far (the refused trigger too): one more fits.
    expect((await request(1, 'GET', `/apps/${HARNESS_APP}/channels`)).status).toBe(200);
    expect(await request(0, 'GET', `/apps/${HARNESS_APP}/channels`)).toEqual({ status: 429, code: 'APP_RATE_LIMITED' });
  });
});
