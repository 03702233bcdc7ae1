/**
 * What the admin API takes, through the built server: credentials are key material only (a
 * file path field answers 422 naming it, whether the file exists or not, and no file is read),
 * validated as keys, and no answer quotes what it was given; ids and keys with control
 * characters are refused; an admin token a client puts into a request target (`#token=`,
 * `?token=`, a route parameter, an app key) is never logged unmasked.
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { FCM_CLIENT_EMAIL, FCM_PROJECT_ID, startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';
import { apnsKeys, fcmKeys, TEST_CA_FILE } from '../fakes/tls.js';

const TOKEN = 'input-admin-token-0123456789-SECRET';
/** In the server's environment (so in /proc/self/environ): no answer may show it. */
const ENV_MARKER = 'environ-marker-value-4f1d';

let herald: HeraldProcess;
let fakes: FakeGateways;

beforeAll(async () => {
  fakes = await startFakeGateways();
  herald = await startHerald({
    config: { admin: { token: TOKEN }, apps: [], push: [] },
    // The fake gateways' CA, trusted the way the API leaves it to the operator (no caFile through the API).
    env: { HERALD_LOG_LEVEL: 'debug', INPUT_TEST_MARKER: ENV_MARKER, NODE_EXTRA_CA_CERTS: TEST_CA_FILE },
  });
}, 60_000);

afterAll(async () => {
  await herald?.dispose();
  await fakes?.stop();
});

function admin(path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${herald.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

/** The answer to a refused create: status and body. */
async function refused(path: string, body: unknown, method = 'POST'): Promise<{ status: number; code: string; error: string }> {
  const res = await admin(path, { method, body });
  const answer = (await res.json()) as { code: string; error: string };
  return { status: res.status, ...answer };
}

async function pushIds(): Promise<string[]> {
  return ((await (await admin('/push')).json()) as { push: { instanceId: string }[] }).push.map((p) => p.instanceId);
}

const serviceAccount = () => ({ type: 'service_account', project_id: FCM_PROJECT_ID, client_email: FCM_CLIENT_EMAIL, private_key: fcmKeys().privateKey });

describe('credentials through the admin API', () => {
  it('refuses every file path field with 422 naming it, the same answer whether the file exists or not, and stores nothing', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ fcm: { serviceAccountFile: '/proc/self/environ' } }, 'push[].fcm.serviceAccountFile'],
      [{ apns: { teamId: 'T', keyId: 'K', privateKeyFile: '/etc/passwd' } }, 'push[].apns.privateKeyFile'],
      [{ web: { vapidPublicKey: 'p', vapidPrivateKey: 'k', subject: 'mailto:a@b.c', caFile: '/etc/hostname' } }, 'push[].web.caFile'],
    ];
    for (const [body, field] of cases) {
      const answer = await refused('/push', body);
      expect(answer, field).toEqual({ status: 422, code: 'ADMIN_INVALID_TENANT', error: expect.stringContaining(`invalid ${field}: file paths are not accepted through the admin API`) });
      expect(answer.error).toContain('config file');
      expect(answer.error).not.toMatch(/environ-marker|root:|\/etc\/|\/proc\//);
    }
    // A path that exists and one that does not: one answer, so nothing tells them apart.
    const existing = await refused('/push', { fcm: { serviceAccountFile: '/proc/self/environ' } });
    const missing = await refused('/push', { fcm: { serviceAccountFile: '/no/such/dir/key.json' } });
    expect(missing).toEqual(existing);
    expect(await pushIds()).toEqual([]);
  });

  it('refuses a key that is not a key (a file\'s text pasted in, a service account that does not parse) without quoting it', async () => {
    const passwd = `root:x:0:0:root:/root:/bin/bash\n${ENV_MARKER}`;
    const apns = await refused('/push', { apns: { teamId: 'T', keyId: 'K', privateKey: passwd } });
    expect(apns).toEqual({ status: 422, code: 'ADMIN_INVALID_TENANT', error: expect.stringContaining('invalid push[].apns.privateKey: is not a PEM private key') });
    const rsaAsApns = await refused('/push', { apns: { teamId: 'T', keyId: 'K', privateKey: fcmKeys().privateKey } });
    expect(rsaAsApns.error).toContain('invalid push[].apns.privateKey: must be an EC P-256 key');
    const notJson = await refused('/push', { fcm: { serviceAccount: `${ENV_MARKER}=1\nOTHER=2` } });
    expect(notJson).toEqual({ status: 422, code: 'ADMIN_INVALID_TENANT', error: expect.stringContaining('invalid push[].fcm.serviceAccount: is not a service-account key: not valid JSON') });
    const noKey = await refused('/push', { fcm: { serviceAccount: { project_id: ENV_MARKER } } });
    expect(noKey.error).toContain('invalid push[].fcm.serviceAccount: is not a service-account key: no client_email, private_key');
    const badKey = await refused('/push', { fcm: { serviceAccount: { ...serviceAccount(), private_key: passwd } } });
    expect(badKey.error).toContain('invalid push[].fcm.serviceAccount: is not a PEM private key');
    const badVapid = await refused('/push', { web: { vapidPublicKey: ENV_MARKER, vapidPrivateKey: passwd, subject: 'mailto:a@b.c' } });
    expect(badVapid.error).toContain('invalid push[].web');
    // A request body that is not JSON is answered without quoting it either.
    const garbled = await fetch(`${herald.baseUrl}/admin/v1/push`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: `${ENV_MARKER} {` });
    expect(garbled.status).toBe(400);
    for (const answer of [apns, rsaAsApns, notJson, noKey, badKey, badVapid, await garbled.json()]) {
      expect(JSON.stringify(answer)).not.toMatch(/environ-marker|root:|bin\/bash/);
    }
    expect(await pushIds()).toEqual([]);
  });

  it('takes the service-account JSON and PEM keys themselves: the instance sends through FCM, keys masked in the listing', async () => {
    const res = await admin('/push', {
      method: 'POST',
      body: {
        fcm: { endpoint: fakes.fcm.origin, tokenUri: fakes.fcm.tokenUri, serviceAccount: JSON.stringify(serviceAccount()) },
        apns: { teamId: 'HERALDTEAM', keyId: 'HERALDKEY1', privateKey: apnsKeys().privateKey },
      },
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const created = (await res.json()) as { instanceId: string; fcm: Record<string, unknown> };
    expect(created.fcm).toMatchObject({ projectId: FCM_PROJECT_ID, clientEmail: FCM_CLIENT_EMAIL });
    expect(created.fcm).not.toHaveProperty('serviceAccount');
    expect(JSON.stringify(created)).not.toContain('BEGIN');
    const device = await fetch(`${herald.baseUrl}/device_api/v1/instances/${created.instanceId}/devices/fcm`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: 'fcm:input-device_APA91b' }),
    });
    expect(device.status, await device.clone().text()).toBe(200);
    const deviceId = ((await device.json()) as { id: string }).id;
    const sent = await admin(`/push/${created.instanceId}/publishes`, { method: 'POST', body: { deviceId, title: 'Key material', body: 'B' } });
    expect(sent.status, await sent.clone().text()).toBe(200);
    await until(() => fakes.fcm.received.some((r) => r.token === 'fcm:input-device_APA91b'), 'the notification at the fake FCM', 20_000);

    // A change may not name a file either; the stored keys stay as they were.
    const patched = await refused(`/push/${created.instanceId}`, { apns: { teamId: 'T', keyId: 'K', privateKeyFile: '/etc/passwd' } }, 'PATCH');
    expect(patched).toMatchObject({ status: 422, error: expect.stringContaining('invalid push[].apns.privateKeyFile: file paths are not accepted') });
    // A listing sent back as it is (`caFile: null`) names no file and passes.
    const listed = ((await (await admin('/push')).json()) as { push: { instanceId: string; web: unknown; fcm: Record<string, unknown> }[] }).push.find((p) => p.instanceId === created.instanceId)!;
    expect(listed.fcm.caFile).toBeNull();
    const changed = await admin(`/push/${created.instanceId}`, { method: 'PATCH', body: { maxPublishesPerSecond: 9, fcm: { ...listed.fcm, privateKey: fcmKeys().privateKey } } });
    expect(changed.status, await changed.clone().text()).toBe(200);
    expect(await changed.json()).toMatchObject({ maxPublishesPerSecond: 9, fcm: { projectId: FCM_PROJECT_ID } });
  });
});

describe('secrets in the listings', () => {
  it('mask the password of a webhook URL, as they mask secrets', async () => {
    const res = await admin('/apps', { method: 'POST', body: { id: 'hook-app', key: 'hook-key', webhooks: [{ url: 'https://hooks:hook-password-7@hooks.example/in', events: ['channel_occupied'] }] } });
    expect(res.status).toBe(201);
    const listed = (await (await admin('/apps?filter=hook-app')).json()) as { apps: { webhooks: { url: string }[] }[] };
    expect(listed.apps[0]!.webhooks[0]!.url).toBe('https://hooks:***@hooks.example/in');
    expect(JSON.stringify(await res.json()) + JSON.stringify(await (await admin('/apps/hook-app')).json())).not.toContain('hook-password-7');
  });
});

describe('ids, keys and names', () => {
  it('refuses control characters in an app id or key, on create and on change, naming the field', async () => {
    const key = await refused('/apps', { id: 'ctl-app', key: 'k\r\nX-Injected: yes' });
    expect(key).toEqual({ status: 422, code: 'ADMIN_INVALID_TENANT', error: expect.stringContaining('invalid apps[].key: must not contain control characters') });
    expect(key.error).not.toContain('X-Injected');
    const id = await refused('/apps', { id: 'ctl\u0000app', key: 'ctl-key' });
    expect(id).toMatchObject({ status: 422, error: expect.stringContaining('invalid apps[].id: must not contain control characters') });
    expect((await admin('/apps', { method: 'POST', body: { id: 'ctl-app', key: 'ctl-key' } })).status).toBe(201);
    const changed = await refused('/apps/ctl-app', { key: 'ctl-key\n' }, 'PATCH');
    expect(changed).toMatchObject({ status: 422, error: expect.stringContaining('invalid apps[].key: must not contain control characters') });
    const apnsKeyId = await refused('/push', { apns: { teamId: 'T', keyId: 'K\r\n', privateKey: apnsKeys().privateKey } });
    expect(apnsKeyId).toMatchObject({ status: 422, error: expect.stringContaining('invalid push[].apns.keyId: must not contain control characters') });
    const listed = (await (await admin('/apps?filter=ctl')).json()) as { apps: { id: string; key: string }[] };
    expect(listed.apps.map((a) => [a.id, a.key])).toEqual([['ctl-app', 'ctl-key']]);
  });
});

/** Sends one raw HTTP/1.1 request (a target fetch would not send as is) and resolves with the status line. */
function rawRequest(target: string, headers = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(herald.port, '127.0.0.1', () => socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers}Connection: close\r\n\r\n`));
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
    socket.on('end', () => resolve(answer.split('\r\n')[0] ?? ''));
    socket.on('error', reject);
  });
}

describe('the admin token in a request target', () => {
  it('is never logged unmasked: fragment, query, route parameter, app key', async () => {
    expect(await rawRequest(`/admin/v1/session#token=${TOKEN}`)).toMatch(/^HTTP\/1\.1 40[14]/);
    expect(await rawRequest(`/no-such-route#token=${TOKEN}`)).toMatch(/^HTTP\/1\.1 404/);
    expect(await rawRequest(`/admin/v1/session?token=${TOKEN}`)).toMatch(/^HTTP\/1\.1 401/);
    expect((await admin(`/apps/token=${TOKEN}`)).status).toBe(404);
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/token=${TOKEN}?protocol=7`);
    await new Promise((resolve) => ws.on('close', resolve));
    const lines = () => herald.stderr.split('\n').filter((l) => l.includes('token='));
    // Each is logged (the 4xx lines at debug level, the unknown key at info), masked.
    await until(() => lines().length >= 4, () => `four log lines with token= in:\n${herald.stderr}`);
    expect(lines().filter((l) => l.includes('"msg":"http request refused"')).length).toBeGreaterThanOrEqual(2);
    expect(lines().some((l) => l.includes('no app has key'))).toBe(true);
    for (const line of lines()) expect(line).toContain('token=***');
    expect(herald.stderr).not.toContain(TOKEN);
    expect(herald.stderr).not.toContain(TOKEN.slice(-12));
  });
});
