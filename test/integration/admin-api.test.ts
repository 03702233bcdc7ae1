/**
 * The admin API and the dashboard's live stream against the built server: 404 without a
 * token, Bearer authentication (401, constant-time compare, 429 after repeated failures),
 * masked secrets, the debug taps (on only while a stream watches the app, sampled under load),
 * the event creator and the test notification. The browser side is dashboard-browser.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readEventStream, type StreamEvent } from '../helpers/admin-client.js';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_APP, DEFAULT_PUSH, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { nextEvent, sleep, until } from '../helpers/wait.js';

const CONFIG_TOKEN = 'config-admin-token-0123456789';
const ENV_TOKEN = 'env-admin-token-9876543210abc';
const OTHER_APP = { id: 'other-app', key: 'other-key', secret: 'other-secret-0123456789' };
const APP = { ...DEFAULT_APP, secret: 'admin-test-app-secret-xyz' };
/** Large events, so that a socket that stops reading passes its backpressure limit after a few. */
const SLOW_APP = { id: 'slow-app', key: 'slow-key', secret: 'slow-secret-0123456789', maxEventDataBytes: 200_000 };

let herald: HeraldProcess;
let receiver: WebhookReceiver;
let fakes: FakeGateways;
const clients: PusherJsClient[] = [];

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  fakes = await startFakeGateways();
  herald = await startHerald({
    config: {
      admin: { token: CONFIG_TOKEN },
      apps: [{ ...APP, clientEvents: true, webhooks: [{ url: receiver.url('/hooks'), events: ['channel_occupied'] }] }, OTHER_APP, SLOW_APP],
      push: [fakes.instanceConfig({ ...DEFAULT_PUSH })],
    },
    env: { HERALD_ADMIN_TOKEN: ENV_TOKEN, HERALD_TEST_HOOKS: '1' },
  });
}, 60_000);

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await herald?.dispose();
  await receiver?.close();
  await fakes?.stop();
});

function admin(path: string, init: { method?: string; body?: unknown; token?: string | null } = {}): Promise<Response> {
  const headers: Record<string, string> = {};
  const token = init.token === undefined ? ENV_TOKEN : init.token;
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  return fetch(`${herald.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers,
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
}

/** Reads /admin/v1/stream as the page does (fetch, server-sent events). */
async function openStream(query = ''): Promise<{ events: StreamEvent[]; next: (match: (e: StreamEvent) => boolean, timeoutMs?: number) => Promise<StreamEvent>; close: () => void }> {
  const controller = new AbortController();
  const res = await fetch(`${herald.baseUrl}/admin/v1/stream${query}`, { headers: { authorization: `Bearer ${ENV_TOKEN}` }, signal: controller.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const { events } = readEventStream(res);
  const next = (match: (e: StreamEvent) => boolean, timeoutMs = 15_000): Promise<StreamEvent> => {
    const seen = (): string => `a matching stream event; got ${JSON.stringify(events.filter((e) => e.type !== 'stats')).slice(0, 2000)}`;
    return until(() => events.find(match), seen, timeoutMs);
  };
  return { events, next, close: () => controller.abort() };
}

async function connect(key = APP.key): Promise<PusherJsClient> {
  const sdk = channelsSdk(herald.port, APP);
  const client = pusherJsClient(herald.port, key, {
    channelAuthorization: {
      endpoint: '/unused',
      transport: 'ajax',
      customHandler: (params: { socketId: string; channelName: string }, callback: (err: Error | null, auth: { auth: string } | null) => void) =>
        callback(null, sdk.authorizeChannel(params.socketId, params.channelName)),
    },
  } as never);
  clients.push(client);
  await until(() => client.connection.state === 'connected', 'a pusher-js connection');
  return client;
}

const debugOf = (kind: string, extra: (d: Record<string, unknown>) => boolean = () => true) => (e: StreamEvent) =>
  e.type === 'debug' && e.data.kind === kind && extra(e.data);

describe('admin API', () => {
  it('is absent (404) when no admin token is configured', async () => {
    const plain = await startHerald({ shards: 1, config: { apps: [{ ...APP }] } });
    try {
      for (const path of ['/admin/v1/overview', '/admin/v1/stream', '/dashboard', '/dashboard/apps/app-id']) {
        const res = await fetch(`${plain.baseUrl}${path}`, { headers: { authorization: `Bearer ${CONFIG_TOKEN}` } });
        expect(res.status, path).toBe(404);
      }
      // No link: one line saying the dashboard is off and how to turn it on.
      expect(plain.stdout).not.toContain('/dashboard');
      expect(plain.stdout).toContain('dashboard: off (no admin token); to turn it on, set admin.token in the config file or HERALD_ADMIN_TOKEN');
    } finally {
      await plain.dispose();
    }
  });

  it('runs with the development token and prints the dashboard link under the embedded defaults', async () => {
    const defaults = await startHerald({ shards: 1 });
    try {
      const link = /dashboard: (http:\/\/\S+\/dashboard#token=(\S+))/.exec(defaults.stdout);
      expect(link?.[2]).toBe('herald-dev-admin-token');
      const res = await fetch(`${defaults.baseUrl}/admin/v1/session`, { headers: { authorization: `Bearer ${link![2]}` } });
      expect(res.status).toBe(200);
      expect((await fetch(`${defaults.baseUrl}/dashboard`)).status).toBe(200);
    } finally {
      await defaults.dispose();
    }
  });

  it('needs the Bearer token (HERALD_ADMIN_TOKEN overrides the config) and never prints it', async () => {
    expect((await admin('/overview', { token: null })).status).toBe(401);
    const wrong = await admin('/overview', { token: CONFIG_TOKEN });
    expect(wrong.status).toBe(401);
    expect(await wrong.json()).toMatchObject({ code: 'ADMIN_UNAUTHORIZED' });
    expect((await admin('/session')).status).toBe(200);
    expect((await fetch(`${herald.baseUrl}/admin/v1/stream`)).status).toBe(401);
    expect((await admin('/no/such/route')).status).toBe(404);
    expect(herald.stdout).toContain('/dashboard (sign in with the admin token)');
    expect(herald.stdout + herald.stderr).not.toContain(ENV_TOKEN);
  });

  it('answers the overview with masked secrets, and a secret only on request', async () => {
    const res = await admin('/overview');
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).not.toContain(APP.secret);
    expect(text).not.toContain(DEFAULT_PUSH.secretKey);
    const body = JSON.parse(text) as { node: { shards: unknown[] }; cluster: unknown; apps: { id: string; secret: string }[]; pushInstances: { instanceId: string }[] };
    expect(body.node.shards).toHaveLength(2);
    expect(body.cluster).toBeNull(); // one node, no Redis
    expect(body.apps.map((a) => a.id)).toEqual([APP.id, OTHER_APP.id, SLOW_APP.id]);
    expect(body.apps[0]!.secret).toMatch(/^•+yz$/);
    expect(body.pushInstances[0]!.instanceId).toBe(DEFAULT_PUSH.instanceId);
    expect(await (await admin(`/apps/${APP.id}/secret`)).json()).toEqual({ secret: APP.secret });
    expect(await (await admin(`/push/${DEFAULT_PUSH.instanceId}/secret`)).json()).toEqual({ secretKey: DEFAULT_PUSH.secretKey });
    const missing = await admin('/apps/nope');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ code: 'ADMIN_NOT_FOUND' });
  });

  it('serves the page for every deep link and its bundle', async () => {
    for (const path of ['/dashboard', `/dashboard/apps/${APP.id}`, `/dashboard/push/${DEFAULT_PUSH.instanceId}`]) {
      const res = await fetch(`${herald.baseUrl}${path}`);
      expect(res.status, path).toBe(200);
      expect(res.headers.get('content-type')).toContain('text/html');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(await res.text()).toContain('/dashboard/assets/app.js');
    }
    const js = await fetch(`${herald.baseUrl}/dashboard/assets/app.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toContain('javascript');
    expect((await fetch(`${herald.baseUrl}/dashboard/assets/nope.js`)).status).toBe(404);
  });

  it('streams connections, subscriptions, API and client events and webhooks of a watched app only', async () => {
    const watched = await openStream(`?app=${APP.id}`);
    const other = await openStream(`?app=${OTHER_APP.id}`);
    try {
      await watched.next((e) => e.type === 'stats');
      const overview = (await (await admin('/overview')).json()) as { apps: { id: string; watched: boolean }[] };
      expect(overview.apps.find((a) => a.id === APP.id)!.watched).toBe(true);

      const client = await connect();
      const socketId = client.connection.socket_id;
      await watched.next(debugOf('connection', (d) => d.action === 'opened' && d.socketId === socketId));
      const channel = client.subscribe('private-chat');
      await until(() => channel.subscribed, 'the subscription to private-chat');
      await watched.next(debugOf('subscription', (d) => d.action === 'subscribed' && d.channel === 'private-chat' && d.subscriptionCount === 1));
      // channel_occupied went to the receiver: the attempt shows up.
      await watched.next(debugOf('webhook', (d) => d.ok === true && (d.events as string[]).includes('channel_occupied') && String(d.url).includes('/hooks')));

      await channelsSdk(herald.port, APP).trigger(['private-chat', 'public-news'], 'greeting', { text: 'x'.repeat(1000) });
      const api = await watched.next(debugOf('api_event', (d) => d.event === 'greeting'));
      expect(api.data.channels).toEqual(['private-chat', 'public-news']);
      expect(api.data.dataBytes).toBe(JSON.stringify({ text: 'x'.repeat(1000) }).length);
      expect(String(api.data.data).length).toBeLessThan(400);

      channel.trigger('client-typing', { who: 'me' });
      await watched.next(debugOf('client_event', (d) => d.event === 'client-typing' && d.channel === 'private-chat' && d.socketId === socketId));

      client.unsubscribe('private-chat');
      await watched.next(debugOf('subscription', (d) => d.action === 'unsubscribed' && d.channel === 'private-chat'));
      client.disconnect();
      const closed = await watched.next(debugOf('connection', (d) => d.action === 'closed' && d.socketId === socketId));
      expect(typeof closed.data.code).toBe('number');
      expect(other.events.filter((e) => e.type === 'debug')).toEqual([]);
    } finally {
      watched.close();
      other.close();
    }
    // Nobody watches any more: the taps are off again.
    await until(async () => !((await (await admin('/overview')).json()) as { apps: { watched: boolean }[] }).apps.some((a) => a.watched), 'no app watched');
  });

  it('shows a slow consumer as closed with 4100 when it is let go', async () => {
    const watched = await openStream(`?app=${SLOW_APP.id}`);
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${SLOW_APP.key}?protocol=7&client=js&version=8.4.0`);
    const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
    ws.on('error', () => undefined);
    let flooding = true;
    try {
      const first = await nextEvent<Buffer>(ws, 'message', 'pusher:connection_established');
      const established = JSON.parse((JSON.parse(first.toString()) as { data: string }).data) as { socket_id: string };
      const socketId = established.socket_id;
      ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'flood' } }));
      await watched.next(debugOf('subscription', (d) => d.action === 'subscribed' && d.socketId === socketId));
      // Stop reading: the kernel buffers fill, then the server's send buffer for this socket.
      (ws as unknown as { _socket: Socket })._socket.pause();
      const sdk = channelsSdk(herald.port, SLOW_APP);
      const data = 'z'.repeat(150_000);
      const flood = (async () => {
        // Paced well under the console's sampling threshold, so that the close is shown.
        for (let i = 0; flooding && i < 2000; i++) {
          await sdk.trigger('flood', 'big', data);
          // time: at most 25 events a second, under the console's sampling threshold.
          await sleep(40);
        }
      })();
      const gone = await watched.next(debugOf('connection', (d) => d.action === 'closed' && d.socketId === socketId), 60_000);
      flooding = false;
      await flood;
      expect(gone.data.code).toBe(4100);
      (ws as unknown as { _socket: Socket })._socket.resume();
      expect(await closed).toBe(4100);
    } finally {
      flooding = false;
      ws.terminate();
      watched.close();
    }
  }, 90_000);

  it('samples the console under load and says so', async () => {
    const watched = await openStream(`?app=${APP.id}`);
    const sdk = channelsSdk(herald.port, APP);
    try {
      await watched.next((e) => e.type === 'stats');
      let sampled: StreamEvent | undefined;
      for (let round = 0; round < 10 && !sampled; round++) {
        // 30 batches of 10 events at once: 300 events, over the 200 a second passed in full.
        await Promise.all(Array.from({ length: 30 }, (_, i) => sdk.triggerBatch(Array.from({ length: 10 }, (_, j) => ({ channel: `load-${j}`, name: 'tick', data: String(i) })))));
        sampled = watched.events.find((e) => e.type === 'sampling' && (e.data.every as number) > 1);
      }
      expect(sampled).toBeDefined();
      const shown = watched.events.filter(debugOf('api_event', (d) => d.event === 'tick')).length;
      expect(shown).toBeGreaterThan(0);
    } finally {
      watched.close();
    }
  });

  it('sends an event from the event creator as the HTTP API would', async () => {
    const client = await connect();
    let received: unknown;
    const creator = client.subscribe('creator');
    creator.bind('made', (data: unknown) => (received = data));
    await until(() => creator.subscribed, 'the subscription to creator');
    const res = await admin(`/apps/${APP.id}/events`, { method: 'POST', body: { channel: 'creator', event: 'made', data: '{"n":1}' } });
    expect(res.status).toBe(200);
    expect(await until(() => received, 'made on creator')).toEqual({ n: 1 });
    const bad = await admin(`/apps/${APP.id}/events`, { method: 'POST', body: { channel: 'bad channel!', event: 'made', data: '' } });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ code: 'INVALID_CHANNEL_NAME' });
    expect((await admin(`/apps/${APP.id}/events`, { method: 'POST', body: { channel: 'creator' } })).status).toBe(400);
    client.disconnect();
  });

  it('sends a test notification and lists it with its state', async () => {
    const res = await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { interest: 'nobody-here', title: 'T', body: 'B' } });
    expect(res.status).toBe(200);
    const { publishId } = (await res.json()) as { publishId: string };
    await until(async () => {
      const view = (await (await admin(`/push/${DEFAULT_PUSH.instanceId}`)).json()) as { publishes: { publishId: string; state: string }[]; devices: { total: number } };
      return view.publishes.find((p) => p.publishId === publishId)?.state === 'finished';
    }, 'the test notification finished', 15_000);
    expect((await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { title: 'T', body: 'B' } })).status).toBe(400);
  });

  it('sends a test notification to one device id through its gateway, counted in the recent publishes', async () => {
    const registerFcm = async (token: string): Promise<string> => {
      const res = await fetch(`${herald.baseUrl}/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/devices/fcm`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
      });
      expect(res.status, await res.clone().text()).toBe(200);
      return ((await res.json()) as { id: string }).id;
    };
    const target = await registerFcm('fcm:admin-target-device_APA91b');
    await registerFcm('fcm:admin-other-device_APA91b');
    const res = await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { deviceId: target, title: 'To one device', body: 'B' } });
    expect(res.status, await res.clone().text()).toBe(200);
    const { publishId } = (await res.json()) as { publishId: string };
    type Listed = { publishId: string; kind: string; targets: string[]; state: string; recipients: number; gateways: Record<string, { sent: number; failed: number }> };
    let listed: Listed | undefined;
    await until(async () => {
      const view = (await (await admin(`/push/${DEFAULT_PUSH.instanceId}`)).json()) as { publishes: Listed[] };
      listed = view.publishes.find((p) => p.publishId === publishId);
      return listed?.state === 'finished';
    }, () => `the publish to one device finished (listed: ${JSON.stringify(listed)})`, 20_000);
    expect(listed).toMatchObject({ kind: 'devices', targets: [target], state: 'finished', recipients: 1, gateways: { fcm: { recipients: 1, sent: 1, failed: 0 } } });
    const received = fakes.fcm.received.filter((r) => (r.message['notification'] as { title?: string } | undefined)?.title === 'To one device');
    expect(received.map((r) => r.token)).toEqual(['fcm:admin-target-device_APA91b']);

    const unknown = await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { deviceId: `fcm-${'0'.repeat(32)}`, title: 'T', body: 'B' } });
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ code: 'DEVICE_NOT_FOUND' });
    const malformed = await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { deviceId: 'not-a-device', title: 'T', body: 'B' } });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ code: 'DEVICE_ID_INVALID' });
    const both = await admin(`/push/${DEFAULT_PUSH.instanceId}/publishes`, { method: 'POST', body: { deviceId: target, interest: 'x', title: 'T', body: 'B' } });
    expect(both.status).toBe(400);
  });

  it('keeps reporting webhooks after shard workers are replaced (a new worker learns the watched apps)', async () => {
    const watched = await openStream(`?app=${APP.id}`);
    try {
      await watched.next((e) => e.type === 'stats');
      for (const shard of [0, 1]) {
        const crash = await fetch(`${herald.baseUrl}/debug/shards/${shard}/crash`, { method: 'POST' });
        expect(crash.status).toBe(500);
      }
      const client = await connect();
      // Subscribing retries until the replaced worker answers, each time on a new channel:
      // pusher-js sends nothing when a channel refused with pusher:subscription_error is
      // unsubscribed and subscribed again (the channel stays pending on its side).
      let attempt = 0;
      await until(async () => {
        const channel = `after-crash-${Date.now()}-${attempt++}`;
        const sub = client.subscribe(channel);
        let refused = false;
        sub.bind('pusher:subscription_error', () => (refused = true));
        await until(() => sub.subscribed || refused, `an answer to the subscription to ${channel}`);
        return sub.subscribed;
      }, 'a subscription answered by a replaced worker', 20_000);
      await watched.next(debugOf('webhook', (d) => d.ok === true && (d.events as string[]).includes('channel_occupied')), 20_000);
      client.disconnect();
    } finally {
      watched.close();
    }
  });

  // Last: it locks this address out of the admin API for a minute.
  it('refuses an address after repeated failed sign-ins, even with the right token', async () => {
    let status = 0;
    for (let i = 0; i < 20 && status !== 429; i++) status = (await admin('/session', { token: `guess-${i}` })).status;
    expect(status).toBe(429);
    const refused = await admin('/session');
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ code: 'ADMIN_SIGNIN_RATE_LIMITED' });
  });
});
