/**
 * Per-app rate limits through the built server and the official clients: past
 * maxHttpRequestsPerSecond and maxEventsPerSecond the channel API answers 429 with Retry-After
 * (whole seconds) and the catalogue's body; past maxNewConnectionsPerSecond(PerIp) a new
 * WebSocket is closed with 4301 and its pusher:error; under each limit nothing is refused. And
 * requireUserAuthentication: a connection that does not sign in within
 * userAuthenticationTimeoutMs is closed with 4009, a signed-in one stays.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { ClientPool, refusal } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { channelsSdk, pusherJsClient, type ChannelsCreds } from '../helpers/sdk-clients.js';
import { signedQuery } from '../helpers/signed-request.js';
import { sleep, until } from '../helpers/wait.js';

const HTTP = { id: 'http-app', key: 'http-key', secret: 'http-secret', maxHttpRequestsPerSecond: 5 };
const EVENTS = { id: 'events-app', key: 'events-key', secret: 'events-secret', maxEventsPerSecond: 6 };
const CONNS = { id: 'conns-app', key: 'conns-key', secret: 'conns-secret', maxNewConnectionsPerSecond: 3 };
const PER_IP = { id: 'ip-app', key: 'ip-key', secret: 'ip-secret', maxNewConnectionsPerSecondPerIp: 2 };
const SIGNIN = { id: 'signin-app', key: 'signin-key', secret: 'signin-secret', requireUserAuthentication: true, userAuthenticationTimeoutMs: 500 };
const FREE = { id: 'free-app', key: 'free-key', secret: 'free-secret' };

let herald: HeraldProcess;
const sockets: WebSocket[] = [];
const pool = new ClientPool(SIGNIN);

beforeAll(async () => {
  herald = await startHerald({ config: { apps: [HTTP, EVENTS, CONNS, PER_IP, SIGNIN, FREE], webSocketSweepIntervalMs: 100 } });
});
afterEach(() => {
  for (const ws of sockets.splice(0)) ws.terminate();
  pool.disconnectAll();
});
afterAll(async () => {
  await herald?.dispose();
});

/** Waits for the start of the next second of the clock: a fresh window of every limit. */
async function startOfSecond(): Promise<void> {
  const second = Math.floor(Date.now() / 1000);
  await until(() => Math.floor(Date.now() / 1000) > second && Date.now() % 1000 < 50, 'the start of the next second');
}

/** A signed GET /apps/<id>/channels by fetch (the SDK does not show response headers). */
function listChannels(app: ChannelsCreds): Promise<Response> {
  const path = `/apps/${app.id}/channels`;
  return fetch(`${herald.baseUrl}${path}?${signedQuery(app, 'GET', path)}`);
}

/** A bare socket to the app: its first frame and close code (`localAddress` picks the client IP). */
async function connect(key: string, localAddress = '127.0.0.1'): Promise<{ first: Frame; frames: Frame[]; closed: Promise<number> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${key}?protocol=7&client=js&version=8.4.0`, { localAddress });
  sockets.push(ws);
  ws.on('error', () => undefined);
  const frames: Frame[] = [];
  ws.on('message', (raw: Buffer) => frames.push(decodeFrame(raw.toString())));
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const first = await new Promise<Frame>((resolve, reject) => {
    ws.once('message', (raw: Buffer) => resolve(decodeFrame(raw.toString())));
    void closed.then((code) => reject(new Error(`closed with ${code} before any frame`)));
  });
  return { first, frames, closed };
}

async function rateLimited(appId: string, limit: string): Promise<number> {
  const metrics = parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
  return series(metrics, 'herald_rate_limited_total', { app_id: appId, limit });
}

describe('maxHttpRequestsPerSecond', () => {
  it('answers 429 with Retry-After in whole seconds and the catalogue body past the limit, and counts it', async () => {
    await startOfSecond();
    const answers = await Promise.all(Array.from({ length: 15 }, () => listChannels(HTTP)));
    const statuses = answers.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(5);
    expect(statuses.filter((s) => s === 200).length).toBeLessThanOrEqual(10);
    const refused = answers.find((r) => r.status === 429)!;
    expect(refused).toBeDefined();
    expect(refused.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    expect(await refused.json()).toEqual({ error: expect.stringContaining('maxHttpRequestsPerSecond of 5'), code: 'APP_RATE_LIMITED' });
    // The SDK sees the same refusal.
    const sdk = channelsSdk(herald.port, HTTP);
    let sdkRefusal: Awaited<ReturnType<typeof refusal>> | undefined;
    await startOfSecond();
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => sdk.trigger('c', 'e', {})));
    const failed = results.find((r) => r.status === 'rejected');
    if (failed) sdkRefusal = await refusal(Promise.reject((failed as PromiseRejectedResult).reason));
    expect(sdkRefusal).toMatchObject({ status: 429, body: { code: 'APP_RATE_LIMITED' } });
    expect(await rateLimited(HTTP.id, 'maxHttpRequestsPerSecond')).toBeGreaterThanOrEqual(statuses.filter((s) => s === 429).length);
  });

  it('never refuses a client that stays under the limit, nor an app without one', async () => {
    const sdk = channelsSdk(herald.port, HTTP);
    // One request at a time, at most 4 per second: under 5 in any one-second window.
    await startOfSecond();
    for (let i = 0; i < 12; i++) {
      await sdk.trigger('steady', 'tick', { i });
      // time: a request every 250 ms, 4 a second: under the limit of 5.
      await sleep(250);
    }
    const free = channelsSdk(herald.port, FREE);
    await Promise.all(Array.from({ length: 40 }, (_, i) => free.trigger('free', 'tick', { i })));
  });
});

describe('maxEventsPerSecond', () => {
  it('counts each event of a batch, answers 429 past the limit and accepts under it', async () => {
    const sdk = channelsSdk(herald.port, EVENTS);
    const batch = (n: number) => Array.from({ length: n }, (_, i) => ({ channel: `b-${i}`, name: 'e', data: '{}' }));
    await startOfSecond();
    await sdk.triggerBatch(batch(4));
    // 4 + 4 > 6: refused whole, nothing of it published.
    const refused = await refusal(sdk.triggerBatch(batch(4)));
    expect(refused).toMatchObject({ status: 429, body: { code: 'APP_EVENT_RATE_LIMITED' } });
    expect(String(refused.body.error)).toContain('maxEventsPerSecond of 6');
    const path = `/apps/${EVENTS.id}/events`;
    const body = JSON.stringify({ name: 'e', channels: ['x'], data: '{}' });
    let res: Response;
    // Single events until the window is spent (at most 2 more fit in it).
    do {
      res = await fetch(`${herald.baseUrl}${path}?${signedQuery(EVENTS, 'POST', path, { body })}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
    } while (res.status === 200);
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBe(1);
    expect(await rateLimited(EVENTS.id, 'maxEventsPerSecond')).toBeGreaterThanOrEqual(2);
    // Under the limit: 3 events every 600 ms never pass 6 in a one-second window.
    await startOfSecond();
    for (let i = 0; i < 6; i++) {
      await sdk.triggerBatch(batch(3));
      // time: 3 events every 600 ms, under the limit of 6 a second.
      await sleep(600);
    }
  });
});

describe('maxNewConnectionsPerSecond', () => {
  it('closes new connections past the limit with 4301 and its pusher:error; pusher-js under it connects', async () => {
    await startOfSecond();
    const conns = await Promise.all(Array.from({ length: 10 }, () => connect(CONNS.key)));
    const established = conns.filter((c) => c.first.event === 'pusher:connection_established').length;
    expect(established).toBeGreaterThanOrEqual(3);
    expect(established).toBeLessThanOrEqual(6);
    const refused = conns.filter((c) => c.first.event === 'pusher:error');
    expect(refused.length).toBe(10 - established);
    expect(refused[0]!.first.data).toMatchObject({ code: 4301, message: expect.stringContaining('maxNewConnectionsPerSecond of 3') });
    expect(await refused[0]!.closed).toBe(4301);
    expect(await rateLimited(CONNS.id, 'maxNewConnectionsPerSecond')).toBeGreaterThanOrEqual(refused.length);

    // pusher-js, two new connections a second: all connect.
    await startOfSecond();
    const clients = [];
    try {
      for (let i = 0; i < 6; i++) {
        const client = pusherJsClient(herald.port, CONNS.key);
        clients.push(client);
        let error: unknown;
        client.connection.bind('error', (e: unknown) => (error = e));
        await until(() => client.connection.state === 'connected' || error !== undefined, 'pusher-js connected');
        expect(error).toBeUndefined();
        // time: a new connection every 500 ms, under the limit of 3 a second.
        await sleep(500);
      }
    } finally {
      for (const c of clients) c.disconnect();
    }
  });

  it('per IP: refuses one address past the limit while another address still connects', async () => {
    await startOfSecond();
    const fromOne = await Promise.all(Array.from({ length: 6 }, () => connect(PER_IP.key, '127.0.0.1')));
    const fromTwo = await connect(PER_IP.key, '127.0.0.2');
    const refused = fromOne.filter((c) => c.first.event === 'pusher:error');
    expect(refused.length).toBeGreaterThanOrEqual(2);
    expect(refused[0]!.first.data).toMatchObject({ code: 4301, message: expect.stringContaining('maxNewConnectionsPerSecondPerIp of 2') });
    expect(await refused[0]!.closed).toBe(4301);
    expect(fromTwo.first.event).toBe('pusher:connection_established');
    expect(await rateLimited(PER_IP.id, 'maxNewConnectionsPerSecondPerIp')).toBeGreaterThanOrEqual(refused.length);
  });
});

describe('requireUserAuthentication', () => {
  it('closes a pusher-js connection that does not sign in within the timeout with 4009; a signed-in one stays', async () => {
    const signedIn = await pool.signedIn(herald, { userId: 'alice' });
    const lurker = await pool.connect(herald);
    await until(() => lurker.errorCodes.includes(4009), 'the unsigned connection closed with 4009', 10_000);
    await lurker.gone();
    expect(signedIn.state).toBe('connected');
    // time: the signed-in connection outlives three more 500 ms sign-in timeouts.
    await sleep(1500);
    expect(signedIn.state).toBe('connected');
    expect(signedIn.errorCodes).toEqual([]);
  });

  it('sends pusher:error 4009 before the close to a bare socket', async () => {
    const conn = await connect(SIGNIN.key);
    expect(conn.first.event).toBe('pusher:connection_established');
    expect(await conn.closed).toBe(4009);
    expect(conn.frames.at(-1)).toMatchObject({ event: 'pusher:error', data: { code: 4009, message: expect.stringContaining('pusher:signin') } });
  });
});
