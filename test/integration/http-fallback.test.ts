/**
 * The HTTP fallback transports (xhr_streaming, xhr, xhr_send) spoken by hand over fetch, for
 * what a browser test cannot drive: the bounds (a session that never polls is let go with
 * 4100, frames past the hard cap are dropped, 10,000 bogus session ids leave nothing behind,
 * oversized and malformed sends), CORS, and that a session is a connection like any other
 * (maxConnections quota, terminate_connections) whose socket id carries the front-end thread, as
 * a WebSocket's does.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_APP, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { rawConnection } from '../helpers/channel-clients.js';
import { isValidSocketId } from '../../src/channels/names.js';
import { threadOf } from '../../src/channels/socket-id.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { FALLBACK_QUERY, connectSession, poll, pollUntil, send, sessionBase as baseOf } from '../helpers/fallback-session.js';
import { until } from '../helpers/wait.js';

const FRAME_LIMIT = 4096;
const BACKPRESSURE = 16 * 1024;
const QUOTA_APP = { id: 'quota-app', key: 'quota-key', secret: 'quota-secret', maxConnections: 1 };

let herald: HeraldProcess;

const sessionBase = (key: string = DEFAULT_APP.key): string => baseOf(herald.baseUrl, key);
const QUERY = FALLBACK_QUERY;
const connect = connectSession;

async function connections(appId: string = DEFAULT_APP.id): Promise<number> {
  const metrics = parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
  return series(metrics, 'herald_connections', { app_id: appId });
}

async function occupied(channel: string): Promise<boolean> {
  const info = (await channelsSdk(herald.port, DEFAULT_APP).get({ path: `/channels/${channel}` }).then((r) => r.json())) as { occupied: boolean };
  return info.occupied;
}

describe('HTTP fallback sessions', () => {
  beforeAll(async () => {
    herald = await startHerald({
      config: {
        apps: [{ ...DEFAULT_APP, userAuthentication: true, maxEventDataBytes: 8 * 1024 }, QUOTA_APP],
        maxWebSocketFrameBytes: FRAME_LIMIT,
        maxSocketBackpressureBytes: BACKPRESSURE,
        webSocketSweepIntervalMs: 50,
        // The bogus-ids test misses 3,334 times from one address: no miss budget here (http-fallback-binding.test.ts tests it).
        httpFallback: { sessionTimeoutMs: 1500, heartbeatMs: 1000, maxSessionMissesPerMinute: null },
      },
    });
  }, 60_000);

  afterAll(async () => {
    await herald?.dispose();
  });

  it('answers a preflight and carries CORS headers on every answer', async () => {
    const base = sessionBase();
    for (const route of ['xhr_streaming', 'xhr', 'xhr_send']) {
      const res = await fetch(`${base}/${route}${QUERY}`, {
        method: 'OPTIONS',
        headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
      });
      expect(res.status).toBe(204);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-methods')).toContain('POST');
      expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('content-type');
    }
    const missing = await send(sessionBase(), []);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('access-control-allow-origin')).toBe('*');
    expect(((await missing.json()) as { code: string }).code).toBe('FALLBACK_SESSION_NOT_FOUND');
  });

  it('streams the open, frames and heartbeats on one response', async () => {
    const base = sessionBase();
    const controller = new AbortController();
    const res = await fetch(`${base}/xhr_streaming${QUERY}`, { method: 'POST', signal: controller.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    const reader = res.body!.getReader();
    let text = '';
    const readUntil = async (done: () => boolean): Promise<void> => {
      while (!done()) {
        const { value, done: ended } = await reader.read();
        if (ended) throw new Error(`stream ended: ${text}`);
        text += Buffer.from(value).toString('utf8');
      }
    };
    await readUntil(() => text.includes('connection_established'));
    expect(text.startsWith('o\n')).toBe(true);
    expect((await send(base, [{ event: 'pusher:subscribe', data: { channel: 'streamed' } }])).status).toBe(204);
    await readUntil(() => text.includes('subscription_succeeded'));
    await channelsSdk(herald.port, DEFAULT_APP).trigger('streamed', 'hello', { n: 1 });
    await readUntil(() => text.includes('hello'));
    // Nothing to send for heartbeatMs: a heartbeat line keeps proxies from closing the stream.
    await readUntil(() => text.split('\n').includes('h'));
    controller.abort();
    // The stream is gone: the session expires after sessionTimeoutMs, leaving its channel.
    await until(async () => !(await occupied('streamed')), 'the expired session leaving its channel', 15_000);
    expect((await send(base, [])).status).toBe(404);
  });

  it('lets a session that never polls go with 4100 once its queue passes the limit, dropping frames past twice the limit', async () => {
    const base = sessionBase();
    await connect(base);
    await send(base, [{ event: 'pusher:subscribe', data: { channel: 'never-polled' } }]);
    await pollUntil(base, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));
    // No poll open from now on: 40 events of ~2 KiB (80 KiB) against a 16 KiB limit.
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const payload = 'x'.repeat(2000);
    for (let i = 0; i < 40; i++) await sdk.trigger('never-polled', 'big', { i, payload });
    // Let go: off its channel at once (no subscriber left), closed when it reads its backlog.
    await until(async () => !(await occupied('never-polled')), 'the slow session let go of its channel', 15_000);
    const rest = await pollUntil(base, (l) => l.close !== null);
    const big = rest.frames.filter((f) => f.event === 'big');
    expect(big.length).toBeGreaterThan(0);
    // Frames past twice the limit were dropped, as uWS drops them for a WebSocket.
    expect(big.length).toBeLessThan(40);
    expect(rest.raw.length).toBeLessThan(2 * BACKPRESSURE + 8 * 1024);
    expect(rest.frames.at(-1)).toMatchObject({ event: 'pusher:error', data: { code: 4100 } });
    expect(rest.close?.[0]).toBe(4100);
    expect((await send(base, [])).status).toBe(404);
  });

  it('10,000 bogus session ids leave nothing behind', async () => {
    const before = await connections();
    let i = 0;
    const statuses = new Map<number, number>();
    const worker = async (): Promise<void> => {
      while (i < 10_000) {
        const n = i++;
        // Sends to sessions that do not exist; polls that open sessions nobody comes back to;
        // polls for an app key that does not exist.
        const base = n % 3 === 2 ? sessionBase('no-such-key') : sessionBase();
        const res = n % 3 === 0 ? await send(base, [{ event: 'pusher:ping' }]) : await fetch(`${base}/xhr${QUERY}`, { method: 'POST' });
        await res.arrayBuffer();
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    expect(statuses.get(404)).toBe(3334);
    expect(statuses.get(200)).toBe(6666);
    // The sessions the polls opened expire (sessionTimeoutMs): no connection is left.
    let left = 0;
    await until(async () => (left = await connections()) <= before, () => `the polls' sessions expired (connections: ${left}, before: ${before})`, 30_000);
  }, 120_000);

  it('refuses an unknown app key with 4001, statelessly', async () => {
    const l = await poll(sessionBase('no-such-key'));
    expect(l.opened).toBe(true);
    expect(l.frames[0]).toMatchObject({ event: 'pusher:error', data: { code: 4001 } });
    expect(l.close?.[0]).toBe(4001);
  });

  it('closes a session with 1009 for an oversized send, whether declared or streamed in', async () => {
    // Declared by Content-Length.
    const declared = sessionBase();
    await connect(declared);
    const huge = JSON.stringify([JSON.stringify({ event: 'client-x', channel: 'private-a', data: 'y'.repeat(4 * FRAME_LIMIT) })]);
    const res = await fetch(`${declared}/xhr_send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: huge });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { code: string }).code).toBe('BODY_TOO_LARGE');
    const closed = await pollUntil(declared, (l) => l.close !== null);
    expect(closed.close?.[0]).toBe(1009);
    expect(closed.frames.at(-1)?.event).toBe('pusher:error');

    // Chunked, no Content-Length: counted while it is read.
    const chunked = sessionBase();
    await connect(chunked);
    const url = new URL(`${chunked}/xhr_send`);
    const status = await new Promise<number>((resolve, reject) => {
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (r) => {
        r.resume();
        resolve(r.statusCode ?? 0);
      });
      req.on('error', reject);
      for (let k = 0; k < 16; k++) req.write(huge.slice(k * 1024, (k + 1) * 1024));
      req.end(huge.slice(16 * 1024));
    });
    expect(status).toBe(413);
    expect((await pollUntil(chunked, (l) => l.close !== null)).close?.[0]).toBe(1009);

    // A message over the frame limit but within the body cap: what a WebSocket frame that size gets.
    const frame = sessionBase();
    await connect(frame);
    expect((await send(frame, [{ event: 'pusher:ping', data: 'z'.repeat(FRAME_LIMIT) }])).status).toBe(204);
    const tooBig = await pollUntil(frame, (l) => l.close !== null);
    expect(tooBig.close?.[0]).toBe(1009);

    // Not an array of strings.
    const bad = sessionBase();
    await connect(bad);
    const badRes = await fetch(`${bad}/xhr_send`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"event":"pusher:ping"}' });
    expect(badRes.status).toBe(400);
    expect(((await badRes.json()) as { code: string }).code).toBe('FALLBACK_BAD_PAYLOAD');
  });

  it('gives sessions and WebSockets socket ids of a front-end thread that serves (thread 0 when one serves)', async () => {
    // The suite runs again with HERALD_FRONT_END_THREADS=2 (npm run test:threads).
    const threads = Number(process.env.HERALD_FRONT_END_THREADS || 1);
    // A random first number is a multiple of 64 one time in 64: ten ids all of thread 0 are no chance.
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await connect(sessionBase()));
    for (let i = 0; i < 5; i++) {
      const { ws, first } = await rawConnection(herald, DEFAULT_APP.key);
      ids.push((first.data as { socket_id: string }).socket_id);
      ws.close();
    }
    for (const id of ids) {
      expect(isValidSocketId(id), id).toBe(true);
      expect(threadOf(id), id).toBeLessThan(threads);
    }
  });

  it("counts sessions against an app's maxConnections (4004)", async () => {
    const first = sessionBase(QUOTA_APP.key);
    await connect(first);
    const second = await pollUntil(sessionBase(QUOTA_APP.key), (l) => l.close !== null);
    expect(second.frames[0]).toMatchObject({ event: 'pusher:error', data: { code: 4004 } });
    expect(second.close?.[0]).toBe(4004);
  });

  it('a trigger with socket_id leaves that session out, reaches the others; a cache channel replays its last event to a new session', async () => {
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const a = sessionBase();
    const b = sessionBase();
    const aId = await connect(a);
    await connect(b);
    for (const s of [a, b]) {
      await send(s, [{ event: 'pusher:subscribe', data: { channel: 'excluded' } }]);
      await pollUntil(s, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));
    }
    await sdk.trigger('excluded', 'first', { n: 1 }, { socket_id: aId });
    await sdk.trigger('excluded', 'second', { n: 2 });
    const toB = await pollUntil(b, (l) => l.frames.some((f) => f.event === 'second'));
    expect(toB.frames.filter((f) => f.channel === 'excluded').map((f) => f.event)).toEqual(['first', 'second']);
    const toA = await pollUntil(a, (l) => l.frames.some((f) => f.event === 'second'));
    expect(toA.frames.filter((f) => f.channel === 'excluded').map((f) => f.event)).toEqual(['second']);

    await sdk.trigger('cache-fallback', 'latest', { v: 7 });
    const c = sessionBase();
    await connect(c);
    await send(c, [{ event: 'pusher:subscribe', data: { channel: 'cache-fallback' } }]);
    const cached = await pollUntil(c, (l) => l.frames.some((f) => f.event === 'latest'));
    expect(JSON.parse(cached.frames.find((f) => f.event === 'latest')!.data as string)).toEqual({ v: 7 });
  });

  it('terminate_connections closes a signed-in session with 4009', async () => {
    const base = sessionBase();
    const socketId = await connect(base);
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const auth = sdk.authenticateUser(socketId, { id: 'fallback-user' });
    await send(base, [{ event: 'pusher:signin', data: auth }]);
    await pollUntil(base, (l) => l.frames.some((f) => f.event === 'pusher:signin_success'));
    await sdk.terminateUserConnections('fallback-user');
    const closed = await pollUntil(base, (l) => l.close !== null);
    expect(closed.frames.at(-1)).toMatchObject({ event: 'pusher:error', data: { code: 4009 } });
    expect(closed.close?.[0]).toBe(4009);
  });
});
