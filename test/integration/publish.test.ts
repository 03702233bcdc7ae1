/**
 * Publish API P1/P2 end to end: the built server with two shards, devices registered through
 * the device API, publishes made with the official server SDK, and the fake gateways (HTTP/2,
 * TLS, real auth and encryption) as the receiving end.
 */
import { createHmac } from 'node:crypto';
import type PushNotifications from '@pusher/push-notifications-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceShardFor } from '../../src/shards/hash.js';
import { APNS_TEAM_ID, confirmGatewayClients, startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
const BUNDLE = 'com.herald.publish-test';
const HOOK_SECRET = 'instance-hook-secret';

let fakes: FakeGateways;
let hooks: WebhookReceiver;
let herald: HeraldProcess;
let beams: PushNotifications;

beforeAll(async () => {
  fakes = await startFakeGateways();
  hooks = await WebhookReceiver.start();
  herald = await startHerald({
    shards: 2,
    config: {
      push: [fakes.instanceConfig({ ...DEFAULT_PUSH, webhooks: [{ url: `${hooks.origin}/instance`, secret: HOOK_SECRET }] })],
      pushDelivery: { retryBaseDelayMs: 20, retryAttempts: 3 },
      webhookDelivery: { batchWindowMs: 0, retryBaseMs: 100 },
      // The publishes' webhookUrls are on the local receiver: a private address Herald refuses unless allowed.
      outbound: { allowPrivateAddresses: ['127.0.0.1'] },
    },
  });
  beams = beamsSdk(herald.port);
  // Dead tokens below must be deleted: every shard's clients need an accepted send first.
  await confirmGatewayClients(fakes, { baseUrl: herald.baseUrl, instanceId: INSTANCE, secretKey: DEFAULT_PUSH.secretKey, shards: 2 });
});

afterAll(async () => {
  await herald?.dispose();
  await hooks?.close();
  await fakes?.stop();
});

// --- device API helpers --------------------------------------------------------------------

let tokenSeq = 0;
const apnsToken = () => (++tokenSeq).toString(16).padStart(64, 'a');

async function deviceApi(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${herald.baseUrl}/device_api/v1/instances/${INSTANCE}${path}`, {
    method,
    headers: { 'content-type': 'application/json', ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

interface Registered {
  id: string;
  platform: 'apns' | 'fcm' | 'web';
  token: string;
}

async function register(platform: Registered['platform'], token: string, interests: string[] = [], userId?: string): Promise<Registered> {
  const response = await deviceApi('POST', `/devices/${platform}`, { token, ...(platform === 'apns' ? { bundleIdentifier: BUNDLE } : {}) });
  expect(response.status, await response.clone().text()).toBe(200);
  const { id } = (await response.json()) as { id: string };
  if (interests.length > 0) {
    const set = await deviceApi('PUT', `/devices/${platform}/${encodeURIComponent(id)}/interests`, { interests });
    expect(set.status, await set.clone().text()).toBe(200);
  }
  if (userId !== undefined) {
    const { token: jwt } = beams.generateToken(userId);
    const set = await deviceApi('PUT', `/devices/${platform}/${encodeURIComponent(id)}/user`, undefined, { authorization: `Bearer ${jwt}` });
    expect(set.status, await set.clone().text()).toBe(200);
  }
  return { id, platform, token };
}

async function deviceStatus(device: Registered): Promise<number> {
  return (await deviceApi('GET', `/devices/${device.platform}/${encodeURIComponent(device.id)}`)).status;
}

function finishedHook(path: string, publishId: string) {
  return hooks.at(path).find((h) => (h.json as { publishId?: string; status?: string }).publishId === publishId && (h.json as { status: string }).status === 'FINISHED');
}

const sorted = (values: string[]) => [...values].sort();

const PAYLOAD = {
  apns: { aps: { alert: { title: 'Hello', body: 'from Herald' } }, data: { article: 42 } },
  fcm: { notification: { title: 'Hello', body: 'from Herald' }, data: { article: '42' } },
  web: { notification: { title: 'Hello', body: 'from Herald', deep_link: 'https://herald.test/a/42' } },
};

// --- tests ---------------------------------------------------------------------------------

describe('publish to interests (P1)', () => {
  it('reaches exactly the subscribed devices on both shards, once each, with each platform payload', async () => {
    // Device ids are an HMAC with the data dir's random secret, so the audience lands on both
    // shards only most of the time (all 9 on one shard: 1 in 256). Register it again (new APNs and
    // web tokens, so new ids) until both shards hold part of it; a discarded audience is deleted.
    let subscriptions: ReturnType<typeof fakes.web.createSubscription>[] = [];
    let devices: Registered[] = [];
    for (let attempt = 0; attempt < 8; attempt++) {
      for (const d of devices) {
        const gone = await deviceApi('DELETE', `/devices/${d.platform}/${encodeURIComponent(d.id)}`);
        expect(gone.status).toBe(200);
      }
      subscriptions = Array.from({ length: 4 }, () => fakes.web.createSubscription());
      devices = [
        await register('apns', apnsToken(), ['news', 'sport', 'weather']), // three of the interests: one notification
        await register('apns', apnsToken(), ['news']),
        await register('apns', apnsToken(), ['sport', 'unrelated']),
        await register('fcm', 'fcm-token-news-1', ['news', 'weather']),
        await register('fcm', 'fcm-token-news-2', ['weather']),
        await register('fcm', 'fcm-token-news-3', ['sport']),
        await register('web', subscriptions[0]!.token, ['news', 'sport']),
        await register('web', subscriptions[1]!.token, ['weather']),
        await register('web', subscriptions[2]!.token, ['news']),
      ];
      if (new Set(devices.map((d) => deviceShardFor(d.id, 2))).size === 2) break;
    }
    const outsiders = [
      await register('apns', apnsToken(), ['unrelated']),
      await register('fcm', 'fcm-token-outsider', []),
      await register('web', subscriptions[3]!.token, ['news-but-not-quite']),
    ];
    // Devices are spread by id: both shards hold part of the audience.
    expect(new Set(devices.map((d) => deviceShardFor(d.id, 2))).size).toBe(2);

    const hookPath = '/publish-p1';
    const { publishId } = await beams.publishToInterests(['news', 'sport', 'weather'], { ...PAYLOAD, webhookUrl: `${hooks.origin}${hookPath}` });
    expect(publishId).toMatch(/^pubid-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    const finished = await until(() => finishedHook(hookPath, publishId), 'FINISHED webhook', 15_000);
    const delivered = fakes.deliveredFor(publishId);
    const expected = (platform: Registered['platform']) => sorted(devices.filter((d) => d.platform === platform).map((d) => d.token));
    expect(sorted(delivered.apns)).toEqual(expected('apns'));
    expect(sorted(delivered.fcm)).toEqual(expected('fcm'));
    expect(sorted(delivered.web)).toEqual(expected('web'));
    for (const outsider of outsiders) expect([...delivered.apns, ...delivered.fcm, ...delivered.web]).not.toContain(outsider.token);

    // APNs: the fake verified the ES256 provider token and the topic; the body carries data.pusher.
    const apns = fakes.apns.delivered.find((r) => r.token === devices[0]!.token)!;
    expect(apns.topic).toBe(BUNDLE);
    expect(apns.pushType).toBe('alert');
    expect(apns.payload).toEqual({
      aps: PAYLOAD.apns.aps,
      data: { article: 42, pusher: { instanceId: INSTANCE, publishId, hasDisplayableContent: true, hasData: true } },
    });
    expect(JSON.parse(Buffer.from(apns.providerToken.split('.')[1]!, 'base64url').toString())).toMatchObject({ iss: APNS_TEAM_ID });
    // FCM v1: OAuth2 access token issued by the fake, data values strings, pusher as JSON text.
    const fcm = fakes.fcm.delivered.find((r) => r.token === 'fcm-token-news-1')!;
    expect(fakes.fcm.accessTokensIssued).toContain(fcm.accessToken);
    expect(fcm.message).toEqual({
      token: 'fcm-token-news-1',
      notification: PAYLOAD.fcm.notification,
      data: { article: '42', pusher: JSON.stringify({ instanceId: INSTANCE, publishId, hasDisplayableContent: true, hasData: true }) },
    });
    // Web push: decrypted by the fake with the subscription's keys.
    const web = fakes.web.delivered.find((r) => r.token === subscriptions[0]!.token)!;
    expect(JSON.parse(web.plaintext!)).toEqual({
      notification: PAYLOAD.web.notification,
      data: { pusher: { instanceId: INSTANCE, publishId, hasDisplayableContent: true, hasData: false } },
    });

    // webhookUrl: STARTED once, then FINISHED once with the counts of both shards.
    // (The outbox may send the two concurrently when a publish is this quick: STARTED may come
    // after FINISHED, and order is not asserted.)
    const forPublish = await until(() => {
      const got = hooks.at(hookPath).filter((h) => (h.json as { publishId: string }).publishId === publishId);
      return got.length >= 2 && got;
    }, 'STARTED and FINISHED webhooks', 15_000);
    expect(forPublish.map((h) => (h.json as { status: string }).status).sort()).toEqual(['FINISHED', 'STARTED']);
    expect(finished.json).toEqual({
      publishId,
      status: 'FINISHED',
      results: {
        apns: { recipients: 3, sent: 3, failed: 0, removed: 0 },
        fcm: { recipients: 3, sent: 3, failed: 0, removed: 0 },
        web: { recipients: 3, sent: 3, failed: 0, removed: 0 },
      },
    });
  });

  it('accepts the older /publishes path as P1', async () => {
    const device = await register('fcm', 'fcm-token-legacy-path', ['legacy']);
    const response = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes`, {
      method: 'POST',
      headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ interests: ['legacy'], fcm: { notification: { title: 'old path' } } }),
    });
    expect(response.status).toBe(200);
    const { publishId } = (await response.json()) as { publishId: string };
    await until(() => fakes.deliveredFor(publishId).fcm.length === 1, 'legacy delivery', 15_000);
    expect(fakes.deliveredFor(publishId).fcm).toEqual([device.token]);
  });
});

describe('publish to users (P2)', () => {
  it('reaches every device of the users and reports the per-user outcome as v1.PublishToUsersAttempt', async () => {
    const aliceWeb = fakes.web.createSubscription();
    const alice = [
      await register('apns', apnsToken(), [], 'alice'),
      await register('fcm', 'fcm-token-alice', [], 'alice'),
      await register('web', aliceWeb.token, [], 'alice'),
    ];
    const bob = await register('fcm', 'fcm-token-bob', [], 'bob');
    const carol = await register('apns', apnsToken(), [], 'carol');
    fakes.apns.deadTokens.add(carol.token);
    const erin = await register('web', fakes.web.createSubscription().token, [], 'erin'); // no web payload below
    const bystander = await register('fcm', 'fcm-token-not-targeted', [], 'mallory');

    const { publishId } = await beams.publishToUsers(['alice', 'bob', 'carol', 'dave', 'erin'], { apns: PAYLOAD.apns, fcm: PAYLOAD.fcm });
    const attempt = await until(() =>
      hooks.at('/instance').find((h) => (h.json as { payload?: { publish_id?: string } }).payload?.publish_id === publishId), 'v1.PublishToUsersAttempt', 15_000);

    const delivered = fakes.deliveredFor(publishId);
    expect(sorted(delivered.apns)).toEqual([alice[0]!.token]);
    expect(sorted(delivered.fcm)).toEqual(sorted([alice[1]!.token, bob.token]));
    expect(delivered.web).toEqual([]);
    expect(delivered.fcm).not.toContain(bystander.token);
    expect(erin.token).not.toBe('');

    expect(attempt.headers['webhook-event-type']).toBe('v1.PublishToUsersAttempt');
    expect(attempt.headers['webhook-signature']).toBe(createHmac('sha1', HOOK_SECRET).update(attempt.rawBody).digest('hex'));
    expect((attempt.json as { payload: unknown }).payload).toEqual({
      instance_id: INSTANCE,
      publish_id: publishId,
      users_delivered_to_gateway: ['alice', 'bob'],
      users_no_devices: ['dave', 'erin'],
      users_gateway_failed: ['carol'],
    });
    expect((attempt.json as { metadata: { event_type: string; product: string } }).metadata).toMatchObject({
      event_type: 'v1.PublishToUsersAttempt',
      product: 'beams',
    });
    // carol's only device had a dead token: it is gone.
    expect(await deviceStatus(carol)).toBe(404);
  });
});

describe('re-registration and users', () => {
  it('a re-registered token no longer gets its previous user\'s publishes', async () => {
    const token = apnsToken();
    const device = await register('apns', token, [], 'frank');
    const reRegistered = await register('apns', token); // another person signs in on the same phone
    expect(reRegistered.id).toBe(device.id);

    const { publishId } = await beams.publishToUsers(['frank'], { apns: PAYLOAD.apns });
    const attempt = await until(() =>
      hooks.at('/instance').find((h) => (h.json as { payload?: { publish_id?: string } }).payload?.publish_id === publishId), 'v1.PublishToUsersAttempt', 15_000);
    expect((attempt.json as { payload: { users_no_devices: string[] } }).payload.users_no_devices).toEqual(['frank']);
    expect(fakes.deliveredFor(publishId).apns).toEqual([]);
  });
});

describe('gateway answers', () => {
  it('deletes devices with dead tokens (D3/D4 then 404) and retries 429 and 5xx', async () => {
    const deadWeb = fakes.web.createSubscription();
    const flakyWeb = fakes.web.createSubscription();
    const dead = [
      await register('apns', apnsToken(), ['flaky']),
      await register('fcm', 'fcm-token-unregistered', ['flaky']),
      await register('web', deadWeb.token, ['flaky']),
    ];
    const flaky = [
      await register('apns', apnsToken(), ['flaky']),
      await register('fcm', 'fcm-token-quota', ['flaky']),
      await register('web', flakyWeb.token, ['flaky']),
    ];
    fakes.apns.deadTokens.add(dead[0]!.token);
    fakes.fcm.deadTokens.add(dead[1]!.token);
    fakes.web.deadTokens.add(dead[2]!.token);
    fakes.apns.failNext(flaky[0]!.token, 1, 503);
    fakes.fcm.failNext(flaky[1]!.token, 1, 429, { retryAfterSeconds: 1 });
    fakes.web.failNext(flaky[2]!.token, 2, 500);
    for (const device of [...dead, ...flaky]) expect(await deviceStatus(device)).toBe(200);

    const hookPath = '/publish-flaky';
    const { publishId } = await beams.publishToInterests(['flaky'], { ...PAYLOAD, webhookUrl: `${hooks.origin}${hookPath}` });
    const finished = await until(() => finishedHook(hookPath, publishId), 'FINISHED webhook', 15_000);

    expect((finished.json as { results: unknown }).results).toEqual({
      apns: { recipients: 2, sent: 1, failed: 1, removed: 1 },
      fcm: { recipients: 2, sent: 1, failed: 1, removed: 1 },
      web: { recipients: 2, sent: 1, failed: 1, removed: 1 },
    });
    expect(await deviceStatus(dead[0]!)).toBe(404);
    expect(await deviceStatus(dead[1]!)).toBe(404);
    const webGet = await fetch(`${herald.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/web/${encodeURIComponent(dead[2]!.id)}`);
    expect(webGet.status).toBe(404);
    for (const device of flaky) expect(await deviceStatus(device)).toBe(200);

    expect(fakes.apns.received.filter((r) => r.token === flaky[0]!.token).map((r) => r.status)).toEqual([503, 200]);
    const fcmAttempts = fakes.fcm.received.filter((r) => r.token === flaky[1]!.token);
    expect(fcmAttempts.map((r) => r.status)).toEqual([429, 200]);
    expect(fakes.web.received.filter((r) => r.token === flaky[2]!.token).map((r) => r.status)).toEqual([500, 500, 201]);
    expect(fakes.deliveredFor(publishId).web).toEqual([flaky[2]!.token]);
  });
});
