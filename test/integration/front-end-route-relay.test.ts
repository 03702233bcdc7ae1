/**
 * Routes served by the main thread behind a front-end thread (src/front-end/route-relay.ts),
 * and the admin live stream (src/admin/stream-relay.ts): a real worker thread runs a uWS app
 * (the built dist/ modules) with the relayed routes and stream on a free port, this thread
 * answers them with the real handlers and stream registry, and fetch() goes through the
 * thread: status, headers, JSON and binary bodies, a POST body, the client's address, a
 * handler's error, the real admin API and dashboard routes, a 503 when main does not answer
 * in time, and a stream refused, streamed, left by its client and ended by main.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MessageChannel, Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEventStream, type StreamEvent } from '../helpers/admin-client.js';
import { AdminAuth } from '../../src/admin/auth.js';
import { DebugHub } from '../../src/admin/debug-hub.js';
import { adminRoutes, type AdminContext, type AdminDeps } from '../../src/admin/routes.js';
import { dashboardRoutes } from '../../src/admin/static.js';
import { adminStreams, type StreamRegistry } from '../../src/admin/stream.js';
import { HeraldError } from '../../src/errors.js';
import { relaySpecs, serveRelayedRoutes } from '../../src/front-end/route-relay.js';
import { serveRelayedStreams } from '../../src/admin/stream-relay.js';
import { clientAddressResolver } from '../../src/net/client-address.js';
import type { Route } from '../../src/http/router.js';
import { REPO_ROOT } from '../helpers/herald-process.js';
import { nextEvent, until } from '../helpers/wait.js';

/** The front-end thread: the relayed routes on a uWS app; closes its app when told (a thread exiting with one open aborts the process). */
const THREAD_SOURCE = `
import { parentPort, workerData } from 'node:worker_threads';
const dist = (path) => new URL(path, workerData.dist).href;
const { loadUws } = await import(dist('http/uws-native.js'));
const { registerRoutes } = await import(dist('http/router.js'));
const { relayedRoutes } = await import(dist('front-end/route-relay.js'));
const { relayedStreams } = await import(dist('admin/stream-relay.js'));
const { uws } = loadUws();
const app = uws.App();
registerRoutes(app, relayedRoutes(workerData.specs, workerData.relay, { timeoutMs: workerData.timeoutMs }));
const streams = relayedStreams(workerData.relay, { timeoutMs: workerData.timeoutMs });
streams.register(app);
app.listen('127.0.0.1', 0, (token) => {
  parentPort.postMessage({ port: token ? uws.us_socket_local_port(token) : 0 });
  parentPort.once('message', () => {
    if (token) uws.us_listen_socket_close(token);
    streams.endAll();
    app.close();
    workerData.relay.close();
    parentPort.close();
  });
});
`;

const TIMEOUT_MS = 500;
const BYTES = Buffer.from(Array.from({ length: 300 }, (_, i) => i % 256));

let dir: string;
let thread: Worker;
let baseUrl: string;
let stopServing: () => void;
let stopStreams: () => void;
let hub: DebugHub;
let streams: StreamRegistry;
const TOKEN = 'relay-admin-token';
/** Releases the route main never answers in time. */
let releaseSlow: () => void = () => {};

const plain = { errorStyle: 'plain' as const, bodyLimit: 0 };

function testRoutes(): Route[] {
  return [
    {
      method: 'get',
      pattern: '/t/json/:name',
      options: { ...plain, headers: ['x-test'] },
      handler: (rc) => ({ status: 201, body: { name: rc.params.name, query: rc.query, header: rc.headers['x-test'], method: rc.method, path: rc.path }, headers: { 'x-reply': 'yes' } }),
    },
    {
      method: 'get',
      pattern: '/t/binary',
      options: plain,
      handler: () => ({ status: 200, body: BYTES, headers: { 'content-type': 'application/octet-stream' } }),
    },
    {
      method: 'post',
      pattern: '/t/echo',
      options: { errorStyle: 'push', bodyLimit: 4096, headers: ['content-length', 'content-type'] },
      handler: (rc) => ({ status: 200, body: { body: rc.body.toString('utf8'), bytes: rc.body.length, remoteAddress: rc.remoteAddress } }),
    },
    {
      method: 'get',
      pattern: '/t/refused',
      options: { errorStyle: 'channel', bodyLimit: 0 },
      handler: () => {
        throw new HeraldError('INVALID_PARAMETERS', 'refused on main');
      },
    },
    {
      method: 'get',
      pattern: '/t/slow',
      options: { errorStyle: 'push', bodyLimit: 0 },
      handler: () => new Promise((resolve) => (releaseSlow = () => resolve({ status: 200, body: 'late' }))),
    },
  ];
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'herald-relay-test-'));
  mkdirSync(join(dir, 'dashboard', 'assets'), { recursive: true });
  writeFileSync(join(dir, 'dashboard', 'index.html'), '<!doctype html><title>relay</title>');
  writeFileSync(join(dir, 'dashboard', 'assets', 'app.png'), BYTES);
  const entry = join(dir, 'thread.mjs');
  writeFileSync(entry, THREAD_SOURCE);

  // The admin API and live stream as main runs them: the real routes, stream registry, debug hub
  // and token check, over the part of the server context they read here (state and apps).
  hub = new DebugHub({ dataDir: dir });
  const ctx = { state: { ready: true, draining: false }, appsById: new Map([['app-a', { id: 'app-a', secret: 'app-a-secret' }]]) } as unknown as AdminContext;
  const admin: AdminDeps = { ctx, hub, auth: new AdminAuth(TOKEN), clientAddressOf: clientAddressResolver([]), connectionCount: (appId) => (appId === undefined ? 5 : 2), startedAt: Date.now() };
  streams = adminStreams(admin);

  const routes = [...testRoutes(), ...adminRoutes(admin), ...dashboardRoutes(join(dir, 'dashboard'))];
  const { port1, port2 } = new MessageChannel();
  stopServing = serveRelayedRoutes(port1, routes);
  stopStreams = serveRelayedStreams(port1, streams.open);
  thread = new Worker(entry, {
    workerData: { dist: pathToFileURL(join(REPO_ROOT, 'dist/src/')).href, specs: relaySpecs(routes), relay: port2, timeoutMs: TIMEOUT_MS },
    transferList: [port2],
  });
  const { port } = await nextEvent<{ port: number }>(thread, 'message', 'the thread listening', 30_000);
  expect(port).toBeGreaterThan(0);
  baseUrl = `http://127.0.0.1:${port}`;
  port1.unref();
}, 60_000);

afterAll(async () => {
  releaseSlow();
  stopServing?.();
  stopStreams?.();
  hub?.close();
  if (thread) {
    const exited = nextEvent<number>(thread, 'exit', 'the thread exiting', 10_000);
    thread.postMessage('close');
    expect(await exited).toBe(0);
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('routes relayed from a front-end thread to main', () => {
  it('answers with main\'s status, headers and JSON body, from the path, query, params and listed headers', async () => {
    const res = await fetch(`${baseUrl}/t/json/a%20b?x=1&y=2`, { headers: { 'x-test': 'sent', 'x-unlisted': 'no' } });
    expect(res.status).toBe(201);
    expect(res.headers.get('x-reply')).toBe('yes');
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({ name: 'a b', query: 'x=1&y=2', header: 'sent', method: 'get', path: '/t/json/a%20b' });
  });

  it('carries a binary body byte for byte', async () => {
    const res = await fetch(`${baseUrl}/t/binary`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    expect(Buffer.from(await res.arrayBuffer()).equals(BYTES)).toBe(true);
  });

  it('carries a POST body and the client\'s address to main', async () => {
    const sent = JSON.stringify({ hello: 'wörld', n: 'x'.repeat(1000) });
    const res = await fetch(`${baseUrl}/t/echo`, { method: 'POST', body: sent, headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { body: string; bytes: number; remoteAddress: string };
    expect(body.body).toBe(sent);
    expect(body.bytes).toBe(Buffer.byteLength(sent));
    expect(body.remoteAddress).toMatch(/127\.0\.0\.1$/);
  });

  it('refuses a body over the route\'s limit on the thread, in the route\'s error shape', async () => {
    const res = await fetch(`${baseUrl}/t/echo`, { method: 'POST', body: 'x'.repeat(5000) });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: 'Payload Too Large' });
  });

  it('answers a handler\'s error as main built it', async () => {
    const res = await fetch(`${baseUrl}/t/refused`);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'refused on main', code: 'INVALID_PARAMETERS' });
  });

  it('serves the dashboard\'s real routes: the page and a binary asset', async () => {
    const page = await fetch(`${baseUrl}/dashboard/apps/x`);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(page.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await page.text()).toBe('<!doctype html><title>relay</title>');
    const asset = await fetch(`${baseUrl}/dashboard/assets/app.png`);
    expect(asset.headers.get('content-type')).toBe('image/png');
    expect(Buffer.from(await asset.arrayBuffer()).equals(BYTES)).toBe(true);
    // Asked twice: main's asset is sent by copy, never handed over.
    const again = await fetch(`${baseUrl}/dashboard/assets/app.png`);
    expect(Buffer.from(await again.arrayBuffer()).equals(BYTES)).toBe(true);
  });

  it('serves the real admin API routes: the token checked on main, the app read from main\'s registry', async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    expect(await (await fetch(`${baseUrl}/admin/v1/session`, { headers: auth })).json()).toEqual({ ok: true });
    expect(await (await fetch(`${baseUrl}/admin/v1/apps/app-a/secret`, { headers: auth })).json()).toEqual({ secret: 'app-a-secret' });
    const refused = await fetch(`${baseUrl}/admin/v1/session`, { headers: { authorization: 'Bearer wrong' } });
    expect(refused.status).toBe(401);
    expect(await refused.json()).toMatchObject({ code: 'ADMIN_UNAUTHORIZED' });
    const unknown = await fetch(`${baseUrl}/admin/v1/no-such-route`, { headers: auth });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'ROUTE_NOT_FOUND' });
  });

  it('answers 503 MAIN_THREAD_TIMEOUT, in the route\'s error shape, when main does not answer in time', async () => {
    const started = Date.now();
    const res = await fetch(`${baseUrl}/t/slow`);
    expect(res.status).toBe(503);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toMatchObject({ error: 'Service Unavailable' });
    // The thread still serves the next request once main's late answer is dropped.
    releaseSlow();
    expect((await fetch(`${baseUrl}/t/binary`)).status).toBe(200);
  });
});

/** Reads the relayed live stream as the dashboard does (fetch, server-sent events). */
async function openStream(query: string): Promise<{ events: StreamEvent[]; ended: Promise<void>; close: () => void }> {
  const controller = new AbortController();
  const res = await fetch(`${baseUrl}/admin/v1/stream${query}`, { headers: { authorization: `Bearer ${TOKEN}` }, signal: controller.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
  const { events, ended } = readEventStream(res);
  return { events, ended, close: () => controller.abort() };
}

describe('the admin live stream relayed from a front-end thread to main', () => {
  it('refuses a request without the token, as main\'s stream does', async () => {
    const res = await fetch(`${baseUrl}/admin/v1/stream`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'ADMIN_UNAUTHORIZED' });
    const unknown = await fetch(`${baseUrl}/admin/v1/stream?app=nope`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(unknown.status).toBe(404);
  });

  it('streams main\'s stats and watched app until the client goes away', async () => {
    const stream = await openStream('?app=app-a');
    const stats = await until(() => stream.events.find((e) => e.type === 'stats'), 'a stats event', 10_000);
    expect(stats.data).toMatchObject({ connections: 5, appConnections: 2, dropped: 0 });
    expect(hub.watching('app-a')).toBe(true);
    stream.close();
    await until(() => !hub.watching('app-a'), 'main to stop watching the app once the client left', 10_000);
  });

  it('ends the thread\'s response when main ends its streams (shutdown)', async () => {
    const stream = await openStream('');
    await until(() => stream.events.some((e) => e.type === 'stats'), 'a stats event', 10_000);
    streams.closeAll();
    await stream.ended;
  });
});
