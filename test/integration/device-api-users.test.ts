/**
 * Users of the device API against the built server: tokens from the official server SDK's
 * generateToken (D10/D11 and web), the 100-devices-per-user limit across shards, and deleting
 * a user with the SDK's deleteUser and the documented customer_api path.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type PushNotifications from '@pusher/push-notifications-server';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { call, DeviceApi, expectPushError, tokenFor, userToken, WEB_INSTANCE, type Platform } from './device-api-helpers.js';

let herald: HeraldProcess;
let api: DeviceApi;
let sdk: PushNotifications;

beforeAll(async () => {
  // A pushDomain of its own: the official SDK's tokens (issuer on pushnotifications.pusher.com) must still work.
  herald = await startHerald({ config: { push: [DEFAULT_PUSH, WEB_INSTANCE], pushDomain: 'push.example.com' } });
  api = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
  sdk = beamsSdk(herald.port, DEFAULT_PUSH.instanceId, DEFAULT_PUSH.secretKey);
});
afterAll(() => herald?.dispose());

/** Registers `count` devices of `platform` with distinct tokens, in parallel. */
function registerMany(platform: Platform, prefix: string, count: number): Promise<string[]> {
  return Promise.all(Array.from({ length: count }, (_, i) => api.registerOk(platform, tokenFor(platform, `${prefix}-${i}`))));
}

describe('user association with SDK tokens (D10, D11, web)', () => {
  it('accepts tokens from the official SDK generateToken on every platform', async () => {
    const { token } = sdk.generateToken('alice@example.com');
    for (const platform of ['apns', 'fcm', 'web'] as const) {
      const id = await api.registerOk(platform, tokenFor(platform, 'alice'));
      // The Android and web SDKs send no Content-Type on this request; iOS sends application/json.
      const res = await api.setUser(platform, id, token, { noContentType: platform !== 'apns' });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect((await api.get(platform, id)).body).toMatchObject({ id, userId: 'alice@example.com' });
    }
  });

  it('refuses an SDK token of another instance (wrong secret) and a token for another issuer', async () => {
    const id = await api.registerOk('fcm', tokenFor('fcm', 'mallory'));
    const otherSdk = beamsSdk(herald.port, WEB_INSTANCE.instanceId, WEB_INSTANCE.secretKey);
    expectPushError(await api.setUser('fcm', id, otherSdk.generateToken('mallory').token), 401, 'signature');
    // Signed with this instance's key but issued for the other instance: 403.
    const crossIssuer = await userToken(DEFAULT_PUSH.secretKey, WEB_INSTANCE.instanceId, { sub: 'mallory' });
    expectPushError(await api.setUser('fcm', id, crossIssuer), 403, 'issuer');
    expect((await api.get('fcm', id)).body.userId).toBe('');
  });

  it('accepts a token issued for the configured pushDomain as well as the SDK\'s', async () => {
    const id = await api.registerOk('fcm', tokenFor('fcm', 'own-domain'));
    const own = await userToken(DEFAULT_PUSH.secretKey, DEFAULT_PUSH.instanceId, { sub: 'own-domain', iss: `https://${DEFAULT_PUSH.instanceId}.push.example.com` });
    expect((await api.setUser('fcm', id, own)).status).toBe(200);
    expect((await api.get('fcm', id)).body.userId).toBe('own-domain');
  });

  it('re-registering a token clears its user (another person on the same device can associate theirs) and keeps its interests', async () => {
    const token = tokenFor('fcm', 'shared-tablet');
    const id = await api.registerOk('fcm', token);
    expect((await api.addInterest('fcm', id, 'family-news')).status).toBe(200);
    expect((await api.setUser('fcm', id, sdk.generateToken('alice-tablet').token)).status).toBe(200);
    expect((await api.get('fcm', id)).body.userId).toBe('alice-tablet');

    // Bob signs in on the same tablet: the app registers the same token again.
    const again = await api.register('fcm', { token });
    expect(again.body).toEqual({ id, initialInterestSet: ['family-news'] });
    expect((await api.get('fcm', id)).body.userId).toBe('');
    const bob = await api.setUser('fcm', id, sdk.generateToken('bob-tablet').token);
    expect(bob.status, JSON.stringify(bob.body)).toBe(200);
    expect((await api.get('fcm', id)).body.userId).toBe('bob-tablet');
  });

  it('takes user ids of any characters, up to 164', async () => {
    const id = await api.registerOk('apns', tokenFor('apns', 'unicode'));
    const userId = `ユーザー/${'é'.repeat(150)} ?#&`;
    expect((await api.setUser('apns', id, sdk.generateToken(userId).token)).status).toBe(200);
    expect((await api.get('apns', id)).body.userId).toBe(userId);
  });
});

describe('100 devices per user', () => {
  it('allows 100 devices spread over the shards, refuses the 101st with 422, frees a slot on delete', async () => {
    const platforms: Platform[] = ['apns', 'fcm', 'web'];
    const ids = (await Promise.all(platforms.map((p) => registerMany(p, 'limit', 34)))).flat(); // 102 devices
    const devicePlatform = (id: string) => id.slice(0, id.indexOf('-')) as Platform;
    const { token } = sdk.generateToken('busy-user');

    // Associate 100 of them in sequential waves of 25 parallel requests (no cross-shard race inside the limit).
    const first100 = ids.slice(0, 100);
    for (let i = 0; i < first100.length; i += 25) {
      const wave = await Promise.all(first100.slice(i, i + 25).map((id) => api.setUser(devicePlatform(id), id, token)));
      for (const res of wave) expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const extra = ids[100]!;
    expectPushError(await api.setUser(devicePlatform(extra), extra, token), 422, '100 devices');
    // Associating a device that already belongs to the user is still fine at the limit.
    expect((await api.setUser(devicePlatform(ids[0]!), ids[0]!, token)).status).toBe(200);

    expect((await api.remove(devicePlatform(ids[5]!), ids[5]!)).status).toBe(200);
    expect((await api.setUser(devicePlatform(extra), extra, token)).status).toBe(200);
    expectPushError(await api.setUser(devicePlatform(ids[101]!), ids[101]!, token), 422, '100 devices');
  }, 30_000);
});

describe('deleting a user', () => {
  it('deleteUser of the official SDK removes every device of the user on every shard', async () => {
    const victims = [...(await registerMany('fcm', 'victim', 6)), ...(await registerMany('apns', 'victim', 6))];
    const bystanders = await registerMany('fcm', 'bystander', 4);
    const victimToken = sdk.generateToken('victim').token;
    const bystanderToken = sdk.generateToken('bystander').token;
    await Promise.all(victims.map(async (id) => {
      const platform = id.startsWith('apns') ? 'apns' : 'fcm';
      await api.addInterest(platform, id, 'news');
      expect((await api.setUser(platform, id, victimToken)).status).toBe(200);
    }));
    await Promise.all(bystanders.map((id) => api.setUser('fcm', id, bystanderToken)));

    await sdk.deleteUser('victim'); // rejects on any non-2xx answer
    for (const id of victims) expectPushError(await api.get(id.startsWith('apns') ? 'apns' : 'fcm', id), 404, 'device');
    for (const id of bystanders) expect((await api.get('fcm', id)).body.userId).toBe('bystander');
    // Re-registering a deleted device starts it afresh: no interests, no user.
    const again = await api.register('fcm', { token: tokenFor('fcm', 'victim-0') });
    expect(again.body).toEqual({ id: victims[0], initialInterestSet: [] });
    expect((await api.get('fcm', victims[0]!)).body.userId).toBe('');
    // Deleting a user without devices is fine.
    await sdk.deleteUser('nobody');
  });

  it('DELETE /customer_api/v1/instances/<id>/users/<user> with the secret key', async () => {
    const id = await api.registerOk('web', tokenFor('web', 'customer-api'));
    await api.setUser('web', id, sdk.generateToken('customer user/1').token);
    const path = `/customer_api/v1/instances/${DEFAULT_PUSH.instanceId}/users/${encodeURIComponent('customer user/1')}`;
    const auth = { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` };

    expectPushError(await call(herald.baseUrl, 'DELETE', path, { noContentType: true }), 400, 'authorization header missing');
    expectPushError(await call(herald.baseUrl, 'DELETE', path, { noContentType: true, headers: { authorization: 'Bearer wrong' } }), 401, 'secret key');
    expectPushError(await call(herald.baseUrl, 'DELETE', path, { noContentType: true, headers: { authorization: `Bearer ${WEB_INSTANCE.secretKey}` } }), 401, 'secret key');
    expect((await api.get('web', id)).status).toBe(200);

    const res = await call(herald.baseUrl, 'DELETE', path, { noContentType: true, headers: auth });
    expect(res.status).toBe(200);
    expectPushError(await api.get('web', id), 404);

    const unknown = '/customer_api/v1/instances/00000000-0000-4000-8000-000000000000/users/u';
    expectPushError(await call(herald.baseUrl, 'DELETE', unknown, { noContentType: true, headers: auth }), 404, 'instance');
    expectPushError(await call(herald.baseUrl, 'DELETE', '/customer_api/v1/instances/bad/users/u', { noContentType: true, headers: auth }), 400, 'instance id');
    expectPushError(await call(herald.baseUrl, 'DELETE', `/customer_api/v1/instances/${DEFAULT_PUSH.instanceId}/users/`, { noContentType: true, headers: auth }), 400, 'user id');
    expectPushError(await call(herald.baseUrl, 'DELETE', `/user_api/v1/instances/${DEFAULT_PUSH.instanceId}/users/${'u'.repeat(165)}`, { noContentType: true, headers: auth }), 400, '164');
  });
});
