/**
 * Device API D1-D15 against the built server over real HTTP: every endpoint's success path,
 * pagination, the 5000-interest replace, the web VAPID key, CORS, and every row of Table 7.2
 * in docs/push-api.md (status, condition, endpoints).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import {
  apnsToken, call, DeviceApi, expectPushError, fcmToken, tokenFor, userToken, VAPID, WEB_INSTANCE, webToken,
  type ApiResponse, type Platform, type RequestOptions,
} from './device-api-helpers.js';

/** A third instance whose web push service may live on a private network. */
const PRIVATE_WEB_INSTANCE = {
  instanceId: '6c5d4e3f-2a1b-4c0d-9e8f-7a6b5c4d3e2f',
  secretKey: 'private-web-secret',
  web: { ...WEB_INSTANCE.web, allowPrivateEndpoints: true },
};

let herald: HeraldProcess;
let api: DeviceApi;
let webApi: DeviceApi;

beforeAll(async () => {
  herald = await startHerald({ config: { push: [DEFAULT_PUSH, WEB_INSTANCE, PRIVATE_WEB_INSTANCE] } });
  api = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
  webApi = new DeviceApi(herald.baseUrl, WEB_INSTANCE.instanceId);
});
afterAll(() => herald?.dispose());

describe('registration (D1, D2, web)', () => {
  it('registers an APNs device and answers the same device for the same token', async () => {
    const token = apnsToken('same');
    const first = await api.register('apns', { token, bundleIdentifier: 'com.example.app', metadata: { sdkVersion: '4.0.0', iosVersion: '17.1' } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ id: expect.stringMatching(/^apns-[0-9a-f]{32}$/), initialInterestSet: [] });
    expect(first.headers.get('access-control-allow-origin')).toBe('*');

    expect((await api.addInterest('apns', first.body.id, 'donuts')).status).toBe(200);
    const again = await api.register('apns', { token: token.toUpperCase(), bundleIdentifier: 'com.example.app' });
    expect(again.body).toEqual({ id: first.body.id, initialInterestSet: ['donuts'] });
    // Registration without metadata keeps the stored metadata.
    expect((await api.get('apns', first.body.id)).body.metadata).toEqual({ sdkVersion: '4.0.0', iosVersion: '17.1' });
  });

  it('registers an FCM device with the Android SDK body (no bundleIdentifier, extra fields)', async () => {
    const res = await api.register('fcm', {
      token: fcmToken('android'),
      knownPreviousClientIds: [],
      metadata: { sdkVersion: '1.9.0', androidVersion: '14' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ id: expect.stringMatching(/^fcm-[0-9a-f]{32}$/), initialInterestSet: [] });
    expect((await api.get('fcm', res.body.id)).body).toEqual({ id: res.body.id, userId: '', metadata: { sdkVersion: '1.9.0', androidVersion: '14' } });
  });

  it('registers a web device with the web SDK body and serves the VAPID public key', async () => {
    const key = await call(herald.baseUrl, 'GET', `/device_api/v1/instances/${WEB_INSTANCE.instanceId}/web-vapid-public-key`, { noContentType: true });
    expect(key.status).toBe(200);
    expect(key.body).toEqual({ vapidPublicKey: VAPID.publicKey });
    const res = await webApi.register('web', { token: webToken('browser'), metadata: { sdkVersion: '1.1.0' } });
    expect(res.status).toBe(200);
    expect(res.body.id).toMatch(/^web-[0-9a-f]{32}$/);
    expect((await webApi.get('web', res.body.id, { noContentType: true })).body).toEqual({ id: res.body.id, userId: '', metadata: { sdkVersion: '1.1.0' } });
  });

  it('answers 404 for the VAPID key of an instance without web push, and for unknown instances', async () => {
    expectPushError(await call(herald.baseUrl, 'GET', `/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/web-vapid-public-key`), 404, 'web push');
    expectPushError(await call(herald.baseUrl, 'GET', '/device_api/v1/instances/00000000-0000-4000-8000-000000000000/web-vapid-public-key'), 404, 'instance');
    expectPushError(await call(herald.baseUrl, 'GET', '/device_api/v1/instances/nope/web-vapid-public-key'), 400, 'instance id');
  });

  it('keeps instances apart: the same token is another device on another instance', async () => {
    const token = fcmToken('shared');
    const a = await api.registerOk('fcm', token);
    const b = await webApi.registerOk('fcm', token);
    expect(a).not.toBe(b);
    await api.addInterest('fcm', a, 'only-a');
    expect((await webApi.listInterests('fcm', b)).body).toEqual({ interests: [] });
    expectPushError(await webApi.get('fcm', a), 404, 'device');
  });

  it('answers 404 with a push error body for an unknown platform', async () => {
    expectPushError(await api.register('windows' as Platform, { token: 'x' }), 404, 'platform', 'windows');
    expectPushError(await api.call('GET', '/windows/apns-00000000000000000000000000000000'), 404, 'platform');
    expectPushError(await api.call('GET', '/windows/x/interests'), 404, 'platform');
  });

  it('refuses a device id of another platform', async () => {
    const id = await api.registerOk('apns', apnsToken('cross'));
    expectPushError(await api.get('fcm', id), 404, 'device');
    expectPushError(await api.addInterest('fcm', id, 'x'), 400, 'device id');
  });

  it('answers CORS preflights for the web SDK', async () => {
    const res = await fetch(`${api.baseUrl}${api.prefix}/web/web-00000000000000000000000000000000/user`, {
      method: 'OPTIONS',
      headers: { origin: 'https://shop.example', 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('PUT');
    expect(res.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
  });
});

describe('device records (D3-D9)', () => {
  it('D3/D4 show userId "" before association and leave out metadata never sent', async () => {
    const id = await api.registerOk('apns', apnsToken('bare'));
    expect((await api.get('apns', id)).body).toEqual({ id, userId: '' });
  });

  it('D5/D6 delete a device with its interests, and are idempotent', async () => {
    const token = fcmToken('deleted');
    const id = await api.registerOk('fcm', token);
    await api.replaceInterests('fcm', id, ['a', 'b']);
    expect((await api.remove('fcm', id)).status).toBe(200);
    expectPushError(await api.get('fcm', id), 404, 'device');
    expect((await api.remove('fcm', id)).status).toBe(200);
    expect((await api.remove('fcm', 'fcm-0123456789abcdef0123456789abcdef')).status).toBe(200);
    // Registering the token again makes a fresh device with the same id and no interests.
    expect((await api.register('fcm', { token })).body).toEqual({ id, initialInterestSet: [] });
    const apnsId = await api.registerOk('apns', apnsToken('deleted'));
    expect((await api.remove('apns', apnsId)).status).toBe(200);
    expectPushError(await api.get('apns', apnsId), 404);
  });

  it('D7/D8 replace the metadata with the platform fields, strings only', async () => {
    const apnsId = await api.registerOk('apns', apnsToken('meta'), { metadata: { sdkVersion: '1', iosVersion: '16' } });
    expect((await api.setMetadata('apns', apnsId, { sdkVersion: '2', macosVersion: '14.1', unknownField: 'dropped' })).status).toBe(200);
    expect((await api.get('apns', apnsId)).body.metadata).toEqual({ sdkVersion: '2', macosVersion: '14.1' });
    const fcmId = await api.registerOk('fcm', fcmToken('meta'));
    expect((await api.setMetadata('fcm', fcmId, { sdkVersion: '3', androidVersion: '13', iosVersion: 'ignored' })).status).toBe(200);
    expect((await api.get('fcm', fcmId)).body.metadata).toEqual({ sdkVersion: '3', androidVersion: '13' });
    expectPushError(await api.setMetadata('fcm', fcmId, { sdkVersion: 3 }), 400, 'sdkVersion', 'string');
    expectPushError(await api.register('fcm', { token: fcmToken('meta2'), metadata: 'x' }), 400, 'metadata');
  });

  it('D9 replaces the token and keeps the id; re-registering the new token makes another device (known limitation)', async () => {
    const id = await api.registerOk('fcm', fcmToken('old'));
    await api.addInterest('fcm', id, 'kept');
    expect((await api.setToken('fcm', id, { token: fcmToken('new') })).status).toBe(200);
    expect((await api.listInterests('fcm', id)).body.interests).toEqual(['kept']);
    const other = await api.register('fcm', { token: fcmToken('new') });
    expect(other.body.id).not.toBe(id);
    expect(other.body.initialInterestSet).toEqual([]);
    // APNs and web devices refresh their token too.
    const apnsId = await api.registerOk('apns', apnsToken('old'));
    expect((await api.setToken('apns', apnsId, { token: apnsToken('new') })).status).toBe(200);
    expectPushError(await api.setToken('apns', apnsId, { token: 'not hex' }), 400, 'device token');
    const webId = await webApi.registerOk('web', webToken('old'));
    expect((await webApi.setToken('web', webId, { token: webToken('new') })).status).toBe(200);
  });
});

describe('web push endpoints on private addresses (SSRF)', () => {
  const privateEndpoints = [
    'https://169.254.169.254/latest/meta-data/', 'https://127.0.0.1:6001/debug', 'https://localhost/x', 'https://10.0.0.7/x',
    'https://192.168.1.20/x', 'https://[::1]/x', 'https://[fd00::5]/x', 'https://2130706433/x',
  ];

  it('refuses them at registration (401) and token refresh (400) unless push[].web.allowPrivateEndpoints', async () => {
    const publicId = await webApi.registerOk('web', webToken('ssrf-public'));
    for (const [n, endpoint] of privateEndpoints.entries()) {
      const token = webToken(`ssrf-${n}`, { endpoint });
      expectPushError(await webApi.register('web', { token }), 401, 'incorrect device token', 'allowPrivateEndpoints');
      // Registration needs no credentials, so the default instance (no web config) refuses them too.
      expectPushError(await api.register('web', { token }), 401, 'allowPrivateEndpoints');
      expectPushError(await webApi.setToken('web', publicId, { token }), 400, 'allowPrivateEndpoints');
      const allowed = await call(herald.baseUrl, 'POST', `/device_api/v1/instances/${PRIVATE_WEB_INSTANCE.instanceId}/devices/web`, { body: { token } });
      expect(allowed.status, endpoint).toBe(200);
    }
  });
});

describe('interests (D12-D15)', () => {
  it('D12 pages 250 interests by 100 and by 7 with opaque cursors, sorted by name', async () => {
    const id = await api.registerOk('fcm', fcmToken('pages'));
    const names = Array.from({ length: 250 }, (_, i) => `interest-${String(i).padStart(3, '0')}`);
    expect((await api.replaceInterests('fcm', id, names)).status).toBe(200);

    const first = await api.listInterests('fcm', id);
    expect(first.body.interests).toEqual(names.slice(0, 100));
    expect(typeof first.body.responseMetadata.nextCursor).toBe('string');
    const second = await api.listInterests('fcm', id, `?cursor=${encodeURIComponent(first.body.responseMetadata.nextCursor)}`);
    expect(second.body.interests).toEqual(names.slice(100, 200));
    const third = await api.listInterests('fcm', id, `?limit=100&cursor=${encodeURIComponent(second.body.responseMetadata.nextCursor)}`);
    expect(third.body).toEqual({ interests: names.slice(200) });
    expect(await api.allInterests('fcm', id, 7)).toEqual(names);
  });

  it('D12 cursors stay correct while interests change between pages', async () => {
    const id = await api.registerOk('apns', apnsToken('moving'));
    await api.replaceInterests('apns', id, ['b', 'd', 'f', 'h']);
    const page1 = await api.listInterests('apns', id, '?limit=2');
    expect(page1.body.interests).toEqual(['b', 'd']);
    await api.addInterest('apns', id, 'a'); // before the cursor: not repeated, not shifting the page
    await api.addInterest('apns', id, 'e'); // after the cursor: seen
    await api.removeInterest('apns', id, 'd'); // the cursor's own name disappears: still valid
    const page2 = await api.listInterests('apns', id, `?limit=2&cursor=${page1.body.responseMetadata.nextCursor}`);
    expect(page2.body.interests).toEqual(['e', 'f']);
    const page3 = await api.listInterests('apns', id, `?limit=2&cursor=${page2.body.responseMetadata.nextCursor}`);
    expect(page3.body).toEqual({ interests: ['h'] });
  });

  it('D13 replaces with 5000 interests of 164 characters, and refuses 5001', async () => {
    const id = await api.registerOk('fcm', fcmToken('five-thousand'));
    const names = Array.from({ length: 5000 }, (_, i) => `${String(i).padStart(4, '0')}${'x'.repeat(160)}`);
    const res = await api.replaceInterests('fcm', id, [...names, names[0]]); // duplicates count once
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await api.listInterests('fcm', id, '?limit=3')).body.interests).toEqual(names.slice(0, 3));
    expect((await api.register('fcm', { token: fcmToken('five-thousand') })).body.initialInterestSet).toHaveLength(5000);
    const all = await api.allInterests('fcm', id);
    expect(all).toEqual(names);
    expectPushError(await api.replaceInterests('fcm', id, [...names, 'one-more']), 400, '5000');
    // D14 past the limit is refused too.
    expectPushError(await api.addInterest('fcm', id, 'one-more'), 400, '5000');
    expect((await api.replaceInterests('fcm', id, [])).status).toBe(200);
    expect((await api.listInterests('fcm', id)).body).toEqual({ interests: [] });
  }, 30_000);

  it('D14/D15 add and remove interests idempotently, names of the allowed characters', async () => {
    const id = await webApi.registerOk('web', webToken('interests'));
    const odd = 'A-z_0=9@a,b.c;d';
    const long = 'y'.repeat(164);
    for (const name of [odd, long, odd]) expect((await webApi.addInterest('web', id, name)).status).toBe(200);
    expect((await webApi.listInterests('web', id)).body.interests).toEqual([odd, long].sort());
    expect((await webApi.removeInterest('web', id, odd)).status).toBe(200);
    expect((await webApi.removeInterest('web', id, odd)).status).toBe(200);
    expect((await webApi.listInterests('web', id)).body.interests).toEqual([long]);
    expectPushError(await webApi.addInterest('web', id, 'y'.repeat(165)), 400, 'interest name');
    expectPushError(await webApi.addInterest('web', id, 'no spaces'), 400, 'interest name');
  });

  it('D14/D15 on a deleted device answer 404, so the iOS SDK re-registers it', async () => {
    const id = await api.registerOk('apns', apnsToken('gone'));
    await api.remove('apns', id);
    expectPushError(await api.addInterest('apns', id, 'x'), 404, 'device');
    expectPushError(await api.removeInterest('apns', id, 'x'), 404, 'device');
  });
});

describe('body limits', () => {
  it('refuses oversized bodies with 400 (device routes 64 KiB)', async () => {
    const id = await api.registerOk('fcm', fcmToken('big'));
    expectPushError(await api.setMetadata('fcm', id, { sdkVersion: 'x'.repeat(70 * 1024) }), 400, 'larger than 65536 bytes');
    expectPushError(await api.register('fcm', { token: 'x'.repeat(70 * 1024) }), 400, 'larger than 65536 bytes');
  });
});

/**
 * Table 7.2, row by row. Each endpoint is called with valid defaults (an existing device with
 * no user, a JSON body, a valid user token) and one thing broken per row.
 */
describe('table 7.2: every status and condition', () => {
  type Endpoint = 'D1' | 'D2' | 'D3' | 'D4' | 'D5' | 'D6' | 'D7' | 'D8' | 'D9' | 'D10' | 'D11' | 'D12' | 'D13' | 'D14' | 'D15';
  interface Mods {
    instanceId?: string;
    deviceId?: string;
    interest?: string;
    query?: string;
    contentType?: string | null;
    body?: unknown;
    rawBody?: string | Uint8Array;
    authorization?: string | null;
  }
  const devices: Record<'apns' | 'fcm', string> = { apns: '', fcm: '' };
  let goodJwt = '';

  beforeAll(async () => {
    devices.apns = await api.registerOk('apns', apnsToken('table'));
    devices.fcm = await api.registerOk('fcm', fcmToken('table'));
    goodJwt = await userToken(DEFAULT_PUSH.secretKey, DEFAULT_PUSH.instanceId, { sub: 'table-user' });
  });

  const spec: Record<Endpoint, { method: string; platform: 'apns' | 'fcm'; suffix: string; body?: () => unknown; user?: boolean }> = {
    D1: { method: 'POST', platform: 'apns', suffix: '', body: () => ({ token: apnsToken('table-new'), bundleIdentifier: 'com.example.app' }) },
    D2: { method: 'POST', platform: 'fcm', suffix: '', body: () => ({ token: fcmToken('table-new') }) },
    D3: { method: 'GET', platform: 'apns', suffix: '/:device' },
    D4: { method: 'GET', platform: 'fcm', suffix: '/:device' },
    D5: { method: 'DELETE', platform: 'apns', suffix: '/:device' },
    D6: { method: 'DELETE', platform: 'fcm', suffix: '/:device' },
    D7: { method: 'PUT', platform: 'apns', suffix: '/:device/metadata', body: () => ({ sdkVersion: '1' }) },
    D8: { method: 'PUT', platform: 'fcm', suffix: '/:device/metadata', body: () => ({ sdkVersion: '1' }) },
    D9: { method: 'PUT', platform: 'fcm', suffix: '/:device/token', body: () => ({ token: fcmToken('table') }) },
    D10: { method: 'PUT', platform: 'apns', suffix: '/:device/user', user: true },
    D11: { method: 'PUT', platform: 'fcm', suffix: '/:device/user', user: true },
    D12: { method: 'GET', platform: 'apns', suffix: '/:device/interests' },
    D13: { method: 'PUT', platform: 'apns', suffix: '/:device/interests', body: () => ({ interests: ['a'] }) },
    D14: { method: 'POST', platform: 'apns', suffix: '/:device/interests/:interest' },
    D15: { method: 'DELETE', platform: 'apns', suffix: '/:device/interests/:interest' },
  };

  function send(endpoint: Endpoint, mods: Mods = {}): Promise<ApiResponse> {
    const s = spec[endpoint];
    const instanceId = mods.instanceId ?? DEFAULT_PUSH.instanceId;
    const deviceId = mods.deviceId ?? devices[s.platform];
    const path =
      `/device_api/v1/instances/${instanceId}/devices/${s.platform}` +
      s.suffix.replace(':device', deviceId).replace(':interest', mods.interest ?? 'table-interest') +
      (mods.query ?? '');
    const headers: Record<string, string> = {};
    if (mods.contentType !== null) headers['content-type'] = mods.contentType ?? 'application/json';
    const authorization = mods.authorization === undefined ? (s.user ? `Bearer ${goodJwt}` : undefined) : mods.authorization;
    if (authorization !== undefined && authorization !== null) headers['authorization'] = authorization;
    const options: RequestOptions = { headers, noContentType: true };
    if (mods.rawBody !== undefined) options.rawBody = mods.rawBody;
    else if (mods.body !== undefined) options.body = mods.body;
    else if (s.body) options.body = s.body();
    return call(herald.baseUrl, s.method, path, options);
  }

  const all: Endpoint[] = ['D1', 'D2', 'D3', 'D4', 'D5', 'D6', 'D7', 'D8', 'D9', 'D10', 'D11', 'D12', 'D13', 'D14', 'D15'];
  const range = (from: number, to: number) => all.slice(from - 1, to);
  const jwt = (claims: Parameters<typeof userToken>[2], secret: string = DEFAULT_PUSH.secretKey, alg?: string) =>
    userToken(secret, DEFAULT_PUSH.instanceId, claims, alg);

  interface Row {
    status: number;
    condition: string;
    endpoints: Endpoint[];
    mods: (endpoint: Endpoint) => Mods | Promise<Mods>;
    words: (string | RegExp)[];
  }

  const rows: Row[] = [
    { status: 400, condition: 'content type is not application/json', endpoints: ['D1', 'D2', 'D3', 'D4', 'D7', 'D8', 'D9', 'D10', 'D11'], mods: () => ({ contentType: 'text/plain' }), words: ['content-type', 'application/json'] },
    { status: 400, condition: 'content type missing on a request with a body', endpoints: ['D1', 'D2', 'D7', 'D8', 'D9'], mods: () => ({ contentType: null }), words: ['content-type'] },
    { status: 400, condition: 'instance id missing from path', endpoints: all, mods: () => ({ instanceId: '' }), words: ['instance id missing'] },
    { status: 400, condition: 'instance id not valid', endpoints: all, mods: () => ({ instanceId: 'not-a-uuid' }), words: ['instance id', 'not valid'] },
    { status: 400, condition: 'device id missing from path', endpoints: range(3, 15), mods: () => ({ deviceId: '' }), words: ['device id missing'] },
    { status: 400, condition: 'device id not valid', endpoints: ['D10', 'D11', 'D14', 'D15'], mods: () => ({ deviceId: 'not-a-device-id' }), words: ['device id', 'not a valid'] },
    { status: 400, condition: 'body is not a readable JSON object (syntax)', endpoints: ['D1', 'D2', 'D7', 'D8', 'D9', 'D13'], mods: () => ({ rawBody: '{"token": ' }), words: ['json'] },
    { status: 400, condition: 'body is not a readable JSON object (array)', endpoints: ['D1', 'D2', 'D7', 'D8', 'D9', 'D13'], mods: () => ({ rawBody: '["token"]' }), words: ['json object'] },
    { status: 400, condition: 'body is not a readable JSON object (invalid UTF-8)', endpoints: ['D1', 'D2', 'D7', 'D8', 'D9', 'D13'], mods: () => ({ rawBody: new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]) }), words: ['utf-8'] },
    { status: 400, condition: 'body is not a readable JSON object (empty)', endpoints: ['D1', 'D2', 'D7', 'D8', 'D9', 'D13'], mods: () => ({ rawBody: '' }), words: ['empty'] },
    { status: 400, condition: 'iOS gateway token missing', endpoints: ['D1'], mods: () => ({ body: { bundleIdentifier: 'com.example.app' } }), words: ['device token missing', 'ios'] },
    { status: 400, condition: 'bundle identifier missing', endpoints: ['D1'], mods: () => ({ body: { token: apnsToken('no-bundle') } }), words: ['bundle identifier missing'] },
    { status: 400, condition: 'Android gateway token missing', endpoints: ['D2'], mods: () => ({ body: { metadata: { sdkVersion: '1' } } }), words: ['device token missing', 'android'] },
    { status: 400, condition: 'token field missing', endpoints: ['D9'], mods: () => ({ body: {} }), words: ['token', 'missing'] },
    { status: 400, condition: 'exp missing in user token', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ exp: undefined })}` }), words: ['exp'] },
    { status: 400, condition: 'sub missing in user token', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ sub: undefined })}` }), words: ['sub'] },
    { status: 400, condition: 'sub longer than 164 characters', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ sub: 'u'.repeat(165) })}` }), words: ['sub', '164'] },
    { status: 400, condition: 'sub empty', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ sub: '' })}` }), words: ['sub', '1 to 164'] },
    { status: 400, condition: 'iss missing in user token', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ iss: undefined })}` }), words: ['iss'] },
    { status: 400, condition: 'limit not valid (0)', endpoints: ['D12'], mods: () => ({ query: '?limit=0' }), words: ['limit'] },
    { status: 400, condition: 'limit not valid (101)', endpoints: ['D12'], mods: () => ({ query: '?limit=101' }), words: ['limit', '100'] },
    { status: 400, condition: 'limit not valid (not an integer)', endpoints: ['D12'], mods: () => ({ query: '?limit=1.5' }), words: ['limit'] },
    { status: 400, condition: 'limit not valid (text)', endpoints: ['D12'], mods: () => ({ query: '?limit=ten' }), words: ['limit'] },
    { status: 400, condition: 'cursor not valid', endpoints: ['D12'], mods: () => ({ query: '?cursor=garbage!' }), words: ['cursor'] },
    { status: 400, condition: 'cursor not valid (base64 of something else)', endpoints: ['D12'], mods: () => ({ query: `?cursor=${Buffer.from('{"v":9}').toString('base64url')}` }), words: ['cursor'] },
    { status: 400, condition: 'interest name not valid', endpoints: ['D13', 'D14'], mods: (e) => (e === 'D13' ? { body: { interests: ['ok', 'not ok'] } } : { interest: 'not%20ok' }), words: ['interest name', '"not ok"'] },
    { status: 400, condition: 'interest name too long', endpoints: ['D13', 'D14'], mods: (e) => (e === 'D13' ? { body: { interests: ['z'.repeat(165)] } } : { interest: 'z'.repeat(165) }), words: ['interest name', '164'] },
    { status: 400, condition: 'interests not an array', endpoints: ['D13'], mods: () => ({ body: { interests: 'a' } }), words: ['interests', 'array'] },
    { status: 400, condition: 'more than 5000 interests in the set', endpoints: ['D13'], mods: () => ({ body: { interests: Array.from({ length: 5001 }, (_, i) => `i${i}`) } }), words: ['5001', '5000'] },
    { status: 400, condition: 'interest name missing from path', endpoints: ['D14', 'D15'], mods: () => ({ interest: '' }), words: ['interest name missing'] },
    { status: 401, condition: 'incorrect instance credentials', endpoints: ['D1', 'D2'], mods: () => ({ authorization: 'Bearer not-the-secret' }), words: ['instance credentials'] },
    { status: 401, condition: 'incorrect gateway token', endpoints: ['D1', 'D2'], mods: (e) => ({ body: e === 'D1' ? { token: 'abc', bundleIdentifier: 'com.example.app' } : { token: 'has spaces in it' } }), words: ['device token'] },
    { status: 401, condition: 'Authorization token missing', endpoints: ['D10', 'D11'], mods: () => ({ authorization: null }), words: ['authorization token missing'] },
    { status: 401, condition: 'Authorization token malformed (not a JWT)', endpoints: ['D10', 'D11'], mods: () => ({ authorization: 'Bearer not.a.jwt' }), words: ['malformed', 'jwt'] },
    { status: 401, condition: 'Authorization token malformed (wrong scheme)', endpoints: ['D10', 'D11'], mods: () => ({ authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }), words: ['malformed', 'bearer'] },
    { status: 401, condition: 'Authorization token malformed (signed with another key)', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({}, 'another-secret')}` }), words: ['malformed', 'signature'] },
    { status: 401, condition: 'Authorization token malformed (expired)', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ exp: Math.floor(Date.now() / 1000) - 60 })}` }), words: ['malformed', 'expired'] },
    { status: 401, condition: 'Authorization token malformed (HS512, algorithm pinned)', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({}, DEFAULT_PUSH.secretKey, 'HS512')}` }), words: ['malformed', 'hs256'] },
    { status: 401, condition: 'Authorization token malformed (alg none)', endpoints: ['D10', 'D11'], mods: () => ({ authorization: `Bearer ${unsignedJwt()}` }), words: ['malformed'] },
    { status: 403, condition: 'issuer of user token invalid', endpoints: ['D10', 'D11'], mods: async () => ({ authorization: `Bearer ${await jwt({ iss: 'https://evil.example.com' })}` }), words: ['issuer', `https://${DEFAULT_PUSH.instanceId}.pushnotifications.pusher.com`] },
    { status: 404, condition: 'instance not found', endpoints: all, mods: () => ({ instanceId: '00000000-0000-4000-8000-000000000000' }), words: ['instance'] },
    { status: 404, condition: 'device not found', endpoints: ['D3', 'D4', ...range(7, 13)], mods: (e) => ({ deviceId: `${spec[e].platform}-00000000000000000000000000000000` }), words: ['could not find', 'device'] },
    { status: 404, condition: 'device not found (id Herald never issues)', endpoints: ['D3', 'D4', 'D7', 'D8', 'D9', 'D12', 'D13'], mods: () => ({ deviceId: 'no-such-device' }), words: ['device'] },
  ];

  const cases = rows.flatMap((row) => row.endpoints.map((endpoint) => ({ ...row, endpoint, name: `${row.status} ${row.condition}: ${endpoint}` })));

  it.each(cases)('$name', async ({ endpoint, status, mods, words }) => {
    const res = await send(endpoint, await mods(endpoint));
    expectPushError(res, status, ...words);
    // A user-token problem must never read as a device token problem (the iOS SDK keys on those words).
    if (spec[endpoint].user) expect(res.body.description.toLowerCase()).not.toContain('device token');
  });

  it('the defaults of the table succeed, so each row above fails for its own reason', async () => {
    // Deletes last: D5/D6 remove the devices the others use.
    for (const endpoint of [...all.filter((e) => e !== 'D5' && e !== 'D6'), 'D5', 'D6'] as Endpoint[]) {
      const res = await send(endpoint);
      expect(res.status, `${endpoint}: ${JSON.stringify(res.body)}`).toBe(200);
    }
  });

  it('400 a user id is already associated with the device (D10, D11)', async () => {
    for (const platform of ['apns', 'fcm'] as const) {
      const id = await api.registerOk(platform, tokenFor(platform, 'associated'));
      expect((await api.setUser(platform, id, await jwt({ sub: 'first-user' }))).status).toBe(200);
      expect((await api.setUser(platform, id, await jwt({ sub: 'first-user' }))).status).toBe(200);
      expectPushError(await api.setUser(platform, id, await jwt({ sub: 'second-user' })), 400, 'already associated');
      expect((await api.get(platform, id)).body.userId).toBe('first-user');
    }
  });

  it('404 device not found for a user association of a deleted device (D10, D11)', async () => {
    for (const platform of ['apns', 'fcm'] as const) {
      const id = await api.registerOk(platform, tokenFor(platform, 'unassociated'));
      await api.remove(platform, id);
      expectPushError(await api.setUser(platform, id, goodJwt), 404, 'device');
    }
  });

  it('answers unknown paths and methods under /device_api with push errors', async () => {
    expectPushError(await call(herald.baseUrl, 'GET', '/device_api/v1/nothing'), 404, 'no route');
    expectPushError(await call(herald.baseUrl, 'PATCH', `${api.prefix}/apns/${devices.apns}`), 405, 'PATCH');
  });
});

/** A JWT with `alg: none` and no signature. */
function unsignedJwt(): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part({ sub: 'u', exp: Math.floor(Date.now() / 1000) + 60, iss: `https://${DEFAULT_PUSH.instanceId}.pushnotifications.pusher.com` })}.`;
}
