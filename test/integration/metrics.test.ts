/**
 * GET /metrics in the Prometheus text format, scraped from the built server while real
 * clients (pusher-js, the `pusher` SDK, the Beams SDK, fetch) connect, trigger and publish:
 * the named series move. Also the separate metrics listener, and publish failure reasons in
 * the statistics endpoint and the metric labels (a broken FCM token endpoint, no credentials).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadUws } from '../../src/http/uws-native.js';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_APP, DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { beamsSdk, channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

/** FCM credentials whose token endpoint answers 404. */
const BROKEN = { instanceId: '3c9d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f', secretKey: 'broken-secret' };
/** Web push credentials only: its FCM devices have no gateway. */
const WEB_ONLY = { instanceId: '4d0e5f6a-7b8c-4d9e-8f0a-2b3c4d5e6f7a', secretKey: 'web-only-secret' };

let fakes: FakeGateways;
let herald: HeraldProcess;

beforeAll(async () => {
  fakes = await startFakeGateways();
  const full = fakes.instanceConfig({ ...DEFAULT_PUSH });
  const broken = fakes.instanceConfig({ ...BROKEN });
  (broken.fcm as Record<string, unknown>).tokenUri = `${fakes.fcm.origin}/no-such-token-endpoint`;
  const webOnly = { ...fakes.instanceConfig({ ...WEB_ONLY }), apns: null, fcm: null };
  herald = await startHerald({
    shards: 2,
    config: { push: [full, broken, webOnly], pushDelivery: { retryBaseDelayMs: 10, retryAttempts: 2 } },
  });
});

afterAll(async () => {
  await herald?.dispose();
  await fakes?.stop();
});

async function scrape(baseUrl = herald.baseUrl): Promise<Map<string, number>> {
  const res = await fetch(`${baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return parsePrometheus(await res.text());
}


function subscribed(client: PusherJsClient, channel: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ch = client.subscribe(channel);
    ch.bind('pusher:subscription_succeeded', () => resolve());
    ch.bind('pusher:subscription_error', (e: unknown) => reject(new Error(JSON.stringify(e))));
  });
}

describe('GET /metrics', () => {
  it('exposes the named series, and they move with connections, triggers and publishes', async () => {
    const before = await scrape();
    for (const name of ['process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'herald_shard_restarts_total', 'herald_webhook_pending']) {
      expect([...before.keys()].some((k) => k.startsWith(name)), name).toBe(true);
    }
    expect(before.has('herald_shard_queue_depth{shard="0"}')).toBe(true);
    expect(before.has('herald_shard_queue_depth{shard="1"}')).toBe(true);

    const clients = [0, 1, 2].map(() => pusherJsClient(herald.port, DEFAULT_APP.key));
    try {
      await Promise.all(clients.map((c) => subscribed(c, 'metrics-channel')));
      const received: unknown[] = [];
      for (const c of clients) c.channel('metrics-channel').bind('tick', (d: unknown) => received.push(d));
      await channelsSdk(herald.port, DEFAULT_APP).trigger('metrics-channel', 'tick', { n: 1 });
      await until(() => received.length === 3, '3 deliveries', 20_000);

      const during = await scrape();
      const app = { app_id: DEFAULT_APP.id };
      expect(series(during, 'herald_connections', app)).toBe(3);
      expect(series(during, 'herald_events_triggered_total', app) - series(before, 'herald_events_triggered_total', app)).toBe(1);
      expect(series(during, 'herald_ws_messages_sent_total', app) - series(before, 'herald_ws_messages_sent_total', app)).toBe(3);
      // Each client sent at least its subscribe.
      expect(series(during, 'herald_ws_messages_received_total', app) - series(before, 'herald_ws_messages_received_total', app)).toBeGreaterThanOrEqual(3);
      expect(series(during, 'herald_http_requests_total', { api: 'channels', status: '200' })).toBeGreaterThanOrEqual(1);
      expect(series(during, 'herald_http_request_duration_seconds_count', { api: 'channels' })).toBeGreaterThanOrEqual(1);
      expect(series(during, 'herald_http_requests_total', { api: 'system', status: '200' })).toBeGreaterThanOrEqual(1);
    } finally {
      for (const c of clients) c.disconnect();
    }
    await until(async () => series(await scrape(), 'herald_connections', { app_id: DEFAULT_APP.id }) === 0, 'connections closed', 20_000);
    const after = await scrape();
    expect(series(after, 'herald_ws_disconnects_total', { app_id: DEFAULT_APP.id })).toBeGreaterThanOrEqual(3);

    // A 401 shows under its API and status.
    const unsigned = await fetch(`${herald.baseUrl}/apps/${DEFAULT_APP.id}/channels`);
    expect(unsigned.status).toBe(401);
    expect(series(await scrape(), 'herald_http_requests_total', { api: 'channels', status: '401' })).toBeGreaterThanOrEqual(1);
  });

  it('counts the front-end threads and the WebSocket connections each holds: all of them, on one thread when there is one', async () => {
    // The suite runs again with HERALD_FRONT_END_THREADS=2 (npm run test:threads).
    const threads = Number(process.env.HERALD_FRONT_END_THREADS || 1);
    const perThread = (m: Map<string, number>): number[] => Array.from({ length: threads }, (_, t) => m.get(`herald_front_end_connections{thread="${t}"}`) ?? -1);
    const clients = [0, 1].map(() => pusherJsClient(herald.port, DEFAULT_APP.key));
    try {
      await Promise.all(clients.map((c) => subscribed(c, 'front-end-threads')));
      const during = await scrape();
      expect(during.get('herald_front_end_threads')).toBe(threads);
      const held = perThread(during);
      for (const n of held) expect(n).toBeGreaterThanOrEqual(0);
      expect(held.reduce((a, b) => a + b, 0)).toBe(2);
      if (threads === 1) expect(held[0]).toBe(2);
      expect(series(during, 'herald_front_end_connections')).toBe(series(during, 'herald_connections'));
    } finally {
      for (const c of clients) c.disconnect();
    }
    await until(async () => perThread(await scrape()).every((n) => n === 0), 'every thread back at 0 connections', 20_000);
  });

  it('counts publishes and notifications by instance, gateway and result', async () => {
    const instance = DEFAULT_PUSH.instanceId;
    const token = `metrics-fcm-${Date.now()}`;
    await registerFcm(instance, token, 'metrics-interest');
    const before = await scrape();
    const { publishId } = (await beamsSdk(herald.port).publishToInterests(['metrics-interest'], { fcm: { notification: { title: 'm' } } })) as { publishId: string };
    await until(async () => (await stats(instance, DEFAULT_PUSH.secretKey, publishId)).state === 'finished', 'publish finished', 20_000);
    const after = await scrape();
    const labels = { instance_id: instance };
    expect(series(after, 'herald_push_publishes_total', labels) - series(before, 'herald_push_publishes_total', labels)).toBe(1);
    const sent = { instance_id: instance, gateway: 'fcm', result: 'sent' };
    expect(series(after, 'herald_push_notifications_total', sent) - series(before, 'herald_push_notifications_total', sent)).toBe(1);
  });

  it('says in herald_build_info which Node and which uWebSockets.js build the process runs', async () => {
    const metrics = await scrape();
    expect(series(metrics, 'herald_build_info', { node: process.version, uws: loadUws({}).build })).toBe(1);
  });

  it('keeps the JSON webhook figures at ?format=json', async () => {
    const res = await fetch(`${herald.baseUrl}/metrics?format=json`);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { webhooks: { pending: number; shards: unknown[] } };
    expect(body.webhooks.shards).toHaveLength(2);
    expect(typeof body.webhooks.pending).toBe('number');
  });
});

describe('push failure reasons', () => {
  it('a publish through a failing FCM token endpoint finishes failed, with the reason in the statistics and the metrics', async () => {
    const token = `broken-fcm-${Date.now()}`;
    await registerFcm(BROKEN.instanceId, token, 'broken-interest');
    const { publishId } = (await beamsSdk(herald.port, BROKEN.instanceId, BROKEN.secretKey).publishToInterests(['broken-interest'], {
      fcm: { notification: { title: 'x' } },
    })) as { publishId: string };
    const body = await until(async () => {
      const s = await stats(BROKEN.instanceId, BROKEN.secretKey, publishId);
      return s.state === 'finished' && s;
    }, 'publish finished', 20_000);
    expect(body.gateways.fcm).toMatchObject({ recipients: 1, sent: 0, failed: 1 });
    const reasons = Object.keys(body.gateways.fcm.errors);
    expect(reasons).toHaveLength(1);
    expect(reasons[0]).toMatch(/^oauth: .*404/);
    expect(body.gateways.fcm.errors[reasons[0]!]).toBe(1);
    expect(body.gateways.apns.errors).toEqual({});
    const metrics = await scrape();
    expect(series(metrics, 'herald_push_notifications_total', { instance_id: BROKEN.instanceId, gateway: 'fcm', result: 'failed' })).toBe(1);
    expect([...metrics.keys()].some((k) => k.startsWith('herald_push_notifications_total') && k.includes(BROKEN.instanceId) && /reason="oauth: [^"]*404/.test(k))).toBe(true);
    // And a warn line names it (rate-limited per instance, gateway and reason).
    await until(() => herald.stderr.includes('"msg":"push notification failed"') && /"reason":"oauth: [^"]*404/.test(herald.stderr), 'warn log', 20_000);
  });

  it('devices of a platform the instance has no credentials for fail with "no credentials for <platform>"', async () => {
    const token = `web-only-fcm-${Date.now()}`;
    await registerFcm(WEB_ONLY.instanceId, token, 'no-creds');
    const { publishId } = (await beamsSdk(herald.port, WEB_ONLY.instanceId, WEB_ONLY.secretKey).publishToInterests(['no-creds'], {
      fcm: { notification: { title: 'x' } },
    })) as { publishId: string };
    const body = await until(async () => {
      const s = await stats(WEB_ONLY.instanceId, WEB_ONLY.secretKey, publishId);
      return s.state === 'finished' && s;
    }, 'publish finished', 20_000);
    expect(body.gateways.fcm).toMatchObject({ recipients: 1, sent: 0, failed: 1, errors: { 'no credentials for fcm': 1 } });
  });
});

describe('separate metrics listener', () => {
  it('serves /metrics on metrics.port only', async () => {
    const own = await startHerald({ shards: 1, config: { metrics: { host: '127.0.0.1', port: 0 } } });
    try {
      const m = /metrics on http:\/\/127\.0\.0\.1:(\d+)\/metrics/.exec(own.stdout);
      expect(m, own.stdout).not.toBeNull();
      const metricsUrl = `http://127.0.0.1:${m![1]}`;
      expect((await fetch(`${own.baseUrl}/metrics`)).status).toBe(404);
      const metrics = await scrape(metricsUrl);
      expect(series(metrics, 'process_resident_memory_bytes')).toBeGreaterThan(0);
      expect((await fetch(`${metricsUrl}/ready`)).status).toBe(404);
    } finally {
      await own.dispose();
    }
  });
});

async function registerFcm(instanceId: string, token: string, interest: string): Promise<string> {
  const base = `${herald.baseUrl}/device_api/v1/instances/${instanceId}/devices/fcm`;
  const created = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
  expect(created.status, await created.clone().text()).toBe(200);
  const { id } = (await created.json()) as { id: string };
  const sub = await fetch(`${base}/${encodeURIComponent(id)}/interests/${interest}`, { method: 'POST' });
  expect(sub.status).toBe(200);
  return id;
}

interface Stats {
  state: string;
  gateways: Record<'apns' | 'fcm' | 'web', { recipients: number; sent: number; failed: number; removed: number; errors: Record<string, number> }>;
}

async function stats(instanceId: string, secretKey: string, publishId: string): Promise<Stats> {
  const res = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${instanceId}/publishes/${publishId}`, { headers: { authorization: `Bearer ${secretKey}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as Stats;
}
