/**
 * Tenants at run time through the real admin API and the official clients: an app created
 * through `POST /admin/v1/apps` serves pusher-js and the `pusher` SDK at once; validation (422),
 * conflicts (409) and unknown ids (404) come from the catalogue; paging and filtering; a rotated
 * secret keeps the old one for its grace period only; disabling closes the app's sockets with
 * 4003 and deleting with 4001; a restarted node still has the app; a push instance created the
 * same way serves the Beams SDK with its secret key.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { adminRequest, type AdminRequest } from '../helpers/admin-client.js';
import { ClientPool, refusal, rawConnection } from '../helpers/channel-clients.js';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk, channelsSdk } from '../helpers/sdk-clients.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const TOKEN = 'tenants-admin-token-0123456789';
const FILE_APP = { id: 'file-app', key: 'file-key', secret: 'file-secret' };

let herald: HeraldProcess;
const pools: ClientPool[] = [];

beforeAll(async () => {
  herald = await startHerald({ config: { admin: { token: TOKEN }, apps: [FILE_APP], push: [] }, env: { HERALD_LOG_LEVEL: 'info' } });
}, 60_000);
afterEach(() => {
  for (const p of pools.splice(0)) p.disconnectAll();
});
afterAll(async () => {
  await herald?.dispose();
});

function admin(path: string, init: AdminRequest = {}): Promise<Response> {
  return adminRequest(herald.baseUrl, TOKEN, path, init);
}

async function createApp(fields: Record<string, unknown>): Promise<{ id: string; key: string; secret: string }> {
  const res = await admin('/apps', { method: 'POST', body: fields });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; key: string; secret: string };
}

function pool(creds: { id: string; key: string; secret: string }): ClientPool {
  const p = new ClientPool(creds);
  pools.push(p);
  return p;
}

describe('apps through the admin API', () => {
  it('an app created through the API serves pusher-js and the pusher SDK at once, its secret generated and shown once', async () => {
    const created = await createApp({ id: 'live-app', key: 'live-key', clientEvents: true, maxConnections: 10 });
    expect(created.secret).toMatch(/^[0-9a-f]{32}$/);
    expect(created).toMatchObject({ id: 'live-app', key: 'live-key', clientEvents: true, maxConnections: 10, source: 'api', enabled: true });
    const client = await pool(created).connect(herald);
    const feed = await client.subscribe('private-feed');
    await channelsSdk(herald.port, created).trigger('private-feed', 'hello', { n: 1 });
    await until(() => feed.data('hello').length === 1, 'the event on the new app');
    expect(feed.data('hello')).toEqual([{ n: 1 }]);
    // Read back: every field, the secret masked.
    const list = (await (await admin('/apps?filter=live')).json()) as { apps: Record<string, unknown>[] };
    expect(list.apps).toHaveLength(1);
    expect(list.apps[0]).toMatchObject({ id: 'live-app', key: 'live-key', maxConnections: 10, source: 'api', connections: 1 });
    expect(list.apps[0]!.secret).not.toBe(created.secret);
  });

  it('answers 422 for a field the config schema refuses, 409 for an id or key in use or a config-file app, 404 for an unknown id', async () => {
    const bad = await admin('/apps', { method: 'POST', body: { id: 'bad-app', key: 'bad-key', maxConnections: -1 } });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toEqual({ code: 'ADMIN_INVALID_TENANT', error: expect.stringContaining('apps[].maxConnections') });
    const unknownField = await admin('/apps', { method: 'POST', body: { id: 'bad-app', key: 'bad-key', colour: 'red' } });
    expect(unknownField.status).toBe(422);
    await createApp({ id: 'taken-app', key: 'taken-key' });
    for (const body of [{ id: 'taken-app', key: 'other-key' }, { id: 'other-app', key: 'taken-key' }, { id: FILE_APP.id, key: 'x-key' }, { id: 'x-app', key: FILE_APP.key }]) {
      const res = await admin('/apps', { method: 'POST', body });
      expect(res.status, JSON.stringify(body)).toBe(409);
      expect(((await res.json()) as { code: string }).code).toBe('ADMIN_CONFLICT');
    }
    const fileEdit = await admin(`/apps/${FILE_APP.id}`, { method: 'PATCH', body: { enabled: false } });
    expect(fileEdit.status).toBe(409);
    expect(((await fileEdit.json()) as { error: string }).error).toContain('config file');
    const patchBad = await admin('/apps/taken-app', { method: 'PATCH', body: { maxEventsPerSecond: 0 } });
    expect(patchBad.status).toBe(422);
    for (const [method, path] of [['GET', '/apps/nope'], ['PATCH', '/apps/nope'], ['DELETE', '/apps/nope'], ['POST', '/apps/nope/rotate-secret']] as const) {
      const res = await admin(path, { method, ...(method !== 'GET' && method !== 'DELETE' && { body: {} }) });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(((await res.json()) as { code: string }).code).toBe('ADMIN_NOT_FOUND');
    }
  });

  it('lists apps by id in pages with a cursor and a filter', async () => {
    for (let i = 0; i < 5; i++) await createApp({ id: `page-${i}`, key: `page-key-${i}` });
    const first = (await (await admin('/apps?filter=page-&limit=2')).json()) as { apps: { id: string }[]; nextCursor: string | null };
    expect(first.apps.map((a) => a.id)).toEqual(['page-0', 'page-1']);
    const second = (await (await admin(`/apps?filter=page-&limit=2&cursor=${first.nextCursor}`)).json()) as typeof first;
    expect(second.apps.map((a) => a.id)).toEqual(['page-2', 'page-3']);
    const last = (await (await admin(`/apps?filter=page-&limit=2&cursor=${second.nextCursor}`)).json()) as typeof first;
    expect(last).toEqual({ apps: [expect.objectContaining({ id: 'page-4' })], nextCursor: null });
    expect((await admin('/apps?limit=0')).status).toBe(400);
  });

  it('a rotated secret: the new one works at once, the old one until the grace period ends, then 401', async () => {
    const created = await createApp({ id: 'rotate-app', key: 'rotate-key' });
    const res = await admin('/apps/rotate-app/rotate-secret', { method: 'POST', body: { graceSeconds: 2 } });
    expect(res.status).toBe(200);
    const { secret, previousSecretValidUntil } = (await res.json()) as { secret: string; previousSecretValidUntil: string };
    expect(secret).not.toBe(created.secret);
    expect(Date.parse(previousSecretValidUntil)).toBeGreaterThan(Date.now());
    const fresh = { ...created, secret };
    await channelsSdk(herald.port, fresh).trigger('c', 'e', {});
    await channelsSdk(herald.port, created).trigger('c', 'e', {});
    // The old secret also still authorises channels for pusher-js during the grace period.
    const oldSigned = await pool(created).connect(herald);
    await oldSigned.subscribe('private-grace');
    await until(() => Date.now() > Date.parse(previousSecretValidUntil), 'the grace period to end', 5000);
    const refused = await refusal(channelsSdk(herald.port, created).trigger('c', 'e', {}));
    expect(refused).toMatchObject({ status: 401, body: { code: 'AUTH_BAD_SIGNATURE' } });
    await channelsSdk(herald.port, fresh).trigger('c', 'e', {});
    // Without a grace period the old secret is refused at once.
    const again = (await (await admin('/apps/rotate-app/rotate-secret', { method: 'POST', body: {} })).json()) as { secret: string };
    expect(await refusal(channelsSdk(herald.port, fresh).trigger('c', 'e', {}))).toMatchObject({ status: 401 });
    await channelsSdk(herald.port, { ...created, secret: again.secret }).trigger('c', 'e', {});
    expect((await admin('/apps/rotate-app/rotate-secret', { method: 'POST', body: { graceSeconds: -1 } })).status).toBe(422);
  });

  it('disabling closes the app\'s sockets with 4003 and refuses its API calls; deleting closes them with 4001 and forgets the key', async () => {
    const created = await createApp({ id: 'doomed-app', key: 'doomed-key' });
    const client = await pool(created).connect(herald);
    const patched = await admin('/apps/doomed-app', { method: 'PATCH', body: { enabled: false } });
    expect(patched.status).toBe(200);
    expect(await patched.json()).toMatchObject({ enabled: false });
    await until(() => client.errorCodes.includes(4003), 'the 4003 close');
    expect(await refusal(channelsSdk(herald.port, created).trigger('c', 'e', {}))).toMatchObject({ status: 403, body: { code: 'APP_DISABLED' } });
    expect((await admin('/apps/doomed-app', { method: 'PATCH', body: { enabled: true } })).status).toBe(200);
    const again = await pool(created).connect(herald);
    const deleted = await admin('/apps/doomed-app', { method: 'DELETE' });
    expect(deleted.status).toBe(204);
    await until(() => again.errorCodes.includes(4001), 'the 4001 close');
    const late = await rawConnection(herald, created.key);
    expect(late.first).toMatchObject({ event: 'pusher:error', data: { code: 4001 } });
    expect(await refusal(channelsSdk(herald.port, created).trigger('c', 'e', {}))).toMatchObject({ status: 401, body: { code: 'AUTH_UNKNOWN_KEY' } });
    expect((await admin('/apps/doomed-app')).status).toBe(404);
  });

  it('metrics: an app\'s rate limits are exported at 0 from the start; a deleted app\'s series go, and its id starts again at 0', async () => {
    const scrape = async () => parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
    const ofApp = (metrics: Map<string, number>) => [...metrics.keys()].filter((k) => k.includes('app_id="metered-app"'));
    const created = await createApp({ id: 'metered-app', key: 'metered-key', maxHttpRequestsPerSecond: 1 });
    const limited = { app_id: 'metered-app', limit: 'maxHttpRequestsPerSecond' };
    const fresh = await scrape();
    expect(fresh.has('herald_rate_limited_total{app_id="metered-app",limit="maxHttpRequestsPerSecond"}')).toBe(true);
    expect(series(fresh, 'herald_rate_limited_total', limited)).toBe(0);
    // Limits the app does not have get no series.
    expect(fresh.has('herald_rate_limited_total{app_id="metered-app",limit="maxEventsPerSecond"}')).toBe(false);
    const sdk = channelsSdk(herald.port, created);
    await Promise.allSettled([1, 2, 3].map((n) => sdk.trigger('metered', 'e', { n })));
    const client = await pool(created).connect(herald);
    client.disconnect();
    await until(async () => {
      const m = await scrape();
      return series(m, 'herald_rate_limited_total', limited) >= 1 && series(m, 'herald_ws_disconnects_total', { app_id: 'metered-app' }) >= 1;
    }, 'the refusal and the disconnect counted');
    expect((await admin('/apps/metered-app', { method: 'DELETE' })).status).toBe(204);
    expect(ofApp(await scrape())).toEqual([]);
    await createApp({ id: 'metered-app', key: 'metered-key-2', maxHttpRequestsPerSecond: 1 });
    const again = await scrape();
    expect(series(again, 'herald_rate_limited_total', limited)).toBe(0);
    expect(series(again, 'herald_ws_disconnects_total', { app_id: 'metered-app' })).toBe(0);
  });

  it('webhooks of an app created through the API are sent at once, signed with its secret, and follow a change', async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const created = await createApp({ id: 'hooked-app', key: 'hooked-key', webhooks: [{ url: receiver.url('/a'), events: ['channel_occupied'] }] });
      const client = await pool(created).connect(herald);
      await client.subscribe('hooked-1');
      await until(() => receiver.deliveredEvents().some((e) => e.name === 'channel_occupied' && e.channel === 'hooked-1'), 'channel_occupied of the new app');
      const signed = receiver.delivered().find((r) => r.path === '/a')!;
      expect(signed.headers['x-pusher-key']).toBe('hooked-key');
      expect((await admin('/apps/hooked-app', { method: 'PATCH', body: { webhooks: [{ url: receiver.url('/b'), events: ['channel_occupied'] }] } })).status).toBe(200);
      await client.subscribe('hooked-2');
      await until(() => receiver.delivered().some((r) => r.path === '/b'), 'the webhook at the changed URL');
    } finally {
      await receiver.close();
    }
  });

  it('limits changed through the API apply to connected clients at once (requireUserAuthentication)', async () => {
    const created = await createApp({ id: 'strict-app', key: 'strict-key' });
    const lurker = await pool(created).connect(herald);
    const res = await admin('/apps/strict-app', { method: 'PATCH', body: { requireUserAuthentication: true, userAuthenticationTimeoutMs: 200 } });
    expect(res.status).toBe(200);
    await until(() => lurker.errorCodes.includes(4009), 'the 4009 close of the connection that did not sign in');
    // Sign-in is on (required), and every view says so, though userAuthentication itself was left false.
    expect(((await res.json()) as { userAuthentication: boolean }).userAuthentication).toBe(true);
    expect(((await (await admin('/apps/strict-app')).json()) as { settings: { userAuthentication: boolean } }).settings.userAuthentication).toBe(true);
    const listed = (await (await admin('/apps')).json()) as { apps: { id: string; userAuthentication: boolean }[] };
    expect(listed.apps.find((a) => a.id === 'strict-app')?.userAuthentication).toBe(true);
  });

  it('a push instance disabled through the API refuses its device and publish APIs with 403, keeps its devices, and serves again once enabled', async () => {
    const vapid = JSON.parse(readFileSync(join(REPO_ROOT, 'test/fixtures/vapid.json'), 'utf8')) as { publicKey: string; privateKey: string };
    const web = { vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: 'mailto:ops@example.com' };
    const created = (await (await admin('/push', { method: 'POST', body: { web } })).json()) as { instanceId: string; secretKey: string; enabled: boolean };
    expect(created.enabled).toBe(true);
    const devices = `${herald.baseUrl}/device_api/v1/instances/${created.instanceId}/devices/web`;
    const subscription = { endpoint: 'https://push.example.com/send/disable-probe', keys: { p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM', auth: 'tBHItJI5svbpez7KI4CCXg' } };
    const register = () => fetch(devices, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: Buffer.from(JSON.stringify(subscription)).toString('base64') }) });
    const before = await register();
    expect(before.status, await before.clone().text()).toBe(200);
    const { id } = (await before.json()) as { id: string };
    const disabled = await admin(`/push/${created.instanceId}`, { method: 'PATCH', body: { enabled: false } });
    expect(disabled.status, await disabled.clone().text()).toBe(200);
    expect(((await disabled.json()) as { enabled: boolean }).enabled).toBe(false);
    const refused = await register();
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain('is disabled');
    await expect(beamsSdk(herald.port, created.instanceId, created.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } })).rejects.toThrow(/403|disabled/i);
    expect((await admin(`/push/${created.instanceId}`, { method: 'PATCH', body: { enabled: true } })).status).toBe(200);
    // The device registered before is still there.
    expect((await fetch(`${devices}/${encodeURIComponent(id)}`)).status).toBe(200);
    await beamsSdk(herald.port, created.instanceId, created.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } });
  });

  it('a push instance created through the API serves the Beams SDK with its secret key; rotation refuses the old key', async () => {
    const res = await admin('/push', { method: 'POST', body: {} });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { instanceId: string; secretKey: string; source: string };
    expect(created.instanceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.source).toBe('api');
    const published = (await beamsSdk(herald.port, created.instanceId, created.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } })) as { publishId: string };
    expect(published.publishId).toBeTruthy();
    const rotated = (await (await admin(`/push/${created.instanceId}/rotate-secret`, { method: 'POST', body: {} })).json()) as { secretKey: string };
    await expect(beamsSdk(herald.port, created.instanceId, created.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } })).rejects.toThrow(/401|Incorrect secret key/i);
    await beamsSdk(herald.port, created.instanceId, rotated.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } });
    const listed = (await (await admin('/push')).json()) as { push: { instanceId: string }[] };
    expect(listed.push.map((p) => p.instanceId)).toContain(created.instanceId);
  });

  it('a SIGHUP reload keeps the API-created apps, except one the file now defines (the file wins)', async () => {
    const kept = await createApp({ id: 'kept-app', key: 'kept-key' });
    const shadowed = await createApp({ id: 'shadowed-app', key: 'shadowed-api-key' });
    const keptClient = await pool(kept).connect(herald);
    const shadowedClient = await pool(shadowed).connect(herald);
    const reloads = () => herald.stderr.split('\n').filter((l) => l.includes('"msg":"config reloaded"')).length;
    const before = reloads();
    herald.writeConfig({ admin: { token: TOKEN }, apps: [FILE_APP, { id: 'shadowed-app', key: 'shadowed-file-key', secret: 'file-secret-2' }], push: [] });
    herald.signal('SIGHUP');
    await until(() => reloads() > before, 'the reload', 20_000);
    await until(() => shadowedClient.errorCodes.includes(4001), 'the 4001 close of the shadowed app');
    expect(keptClient.state).toBe('connected');
    await channelsSdk(herald.port, kept).trigger('c', 'e', {});
    const listed = (await (await admin('/apps?filter=shadowed')).json()) as { apps: { id: string; key: string; source: string }[] };
    expect(listed.apps).toEqual([expect.objectContaining({ id: 'shadowed-app', key: 'shadowed-file-key', source: 'config' })]);
    expect((await admin('/apps/shadowed-app', { method: 'DELETE' })).status).toBe(409);
  });

  it('apps and push instances created through the API survive a restart', async () => {
    const created = await createApp({ id: 'durable-app', key: 'durable-key', maxEventsPerSecond: 50 });
    const push = (await (await admin('/push', { method: 'POST', body: { maxPublishesPerSecond: 7 } })).json()) as { instanceId: string; secretKey: string };
    await herald.restart();
    const read = (await (await admin('/apps?filter=durable')).json()) as { apps: Record<string, unknown>[] };
    expect(read.apps).toEqual([expect.objectContaining({ id: 'durable-app', key: 'durable-key', maxEventsPerSecond: 50, source: 'api' })]);
    const client = await pool(created).connect(herald);
    const feed = await client.subscribe('after-restart');
    await channelsSdk(herald.port, created).trigger('after-restart', 'e', 'still here');
    await until(() => feed.data('e').length === 1, 'the event after the restart');
    await beamsSdk(herald.port, push.instanceId, push.secretKey).publishToInterests(['news'], { web: { notification: { title: 't' } } });
  });

  it('a restart reads back every stored app, more than one page of them (500 a page)', async () => {
    const ids = Array.from({ length: 1050 }, (_, i) => `paged-${String(i).padStart(4, '0')}`);
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < ids.length) {
          const id = ids[next++]!;
          expect((await admin('/apps', { method: 'POST', body: { id, key: `${id}-key` } })).status).toBe(201);
        }
      }),
    );
    await herald.restart();
    const listed: string[] = [];
    let cursor: string | null = '';
    while (cursor !== null) {
      const page = (await (await admin(`/apps?filter=paged-&limit=1000${cursor ? `&cursor=${cursor}` : ''}`)).json()) as { apps: { id: string }[]; nextCursor: string | null };
      listed.push(...page.apps.map((a) => a.id));
      cursor = page.nextCursor;
    }
    expect(listed).toEqual(ids);
  }, 120_000);
});
