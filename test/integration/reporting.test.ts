/**
 * Reporting API R1/R2 and the per-publish statistics endpoint against the built server, with
 * real publishes through the official server SDK to the fake gateways: every documented error,
 * the documented choices (unknown instance 404; reports of unknown devices or publishes
 * accepted and ignored), duplicates counted once, the statistics after a publish, and the push
 * webhooks (acknowledgement, open, publish-to-users attempt) with their HMAC-SHA1 signature.
 * Raw fetch for the reporting API, as the client SDKs send it.
 */
import { createHmac } from 'node:crypto';
import type PushNotifications from '@pusher/push-notifications-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_PUSH, HeraldProcess, pushConfig, startHerald } from '../helpers/herald-process.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { confirmGatewayClients, startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';
import { flushedBy, until } from '../helpers/wait.js';

const INSTANCE = DEFAULT_PUSH.instanceId;
const OTHER_INSTANCE = { instanceId: '5b0e7f21-3c4d-4e5f-8a9b-0c1d2e3f4a5b', secretKey: 'other-secret' };
const WEBHOOK_SECRET = 'reporting-webhook-secret';
const BUNDLE_ID = 'com.example.herald';

let herald: HeraldProcess;
let receiver: WebhookReceiver;
let gateways: FakeGateways;
let sdk: PushNotifications;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
  gateways = await startFakeGateways();
  herald = await startHerald({
    config: {
      push: [
        gateways.instanceConfig({ ...DEFAULT_PUSH, webhooks: [{ url: receiver.url('/push'), secret: WEBHOOK_SECRET }] }),
        pushConfig(OTHER_INSTANCE),
      ],
    },
  });
  sdk = beamsSdk(herald.port, INSTANCE, DEFAULT_PUSH.secretKey);
  // The statistics test needs a dead token deleted: every shard's clients need an accepted send first.
  await confirmGatewayClients(gateways, { baseUrl: herald.baseUrl, instanceId: INSTANCE, secretKey: DEFAULT_PUSH.secretKey, shards: 2 });
});

afterAll(async () => {
  await herald?.dispose();
  await gateways?.stop();
  await receiver?.close();
});

function eventsUrl(instanceId: string = INSTANCE): string {
  return `${herald.baseUrl}/reporting_api/v2/instances/${instanceId}/events`;
}

/** POSTs a report body (an object is JSON-encoded) with `Content-Type: application/json` unless told otherwise. */
async function report(body: unknown, options: { contentType?: string | null; instanceId?: string } = {}) {
  const headers: Record<string, string> = {};
  const contentType = options.contentType === undefined ? 'application/json' : options.contentType;
  if (contentType !== null) headers['content-type'] = contentType;
  const res = await fetch(eventsUrl(options.instanceId), {
    method: 'POST',
    headers,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text === '' ? undefined : (JSON.parse(text) as Record<string, unknown>) };
}

/** Reports and asserts the 200 every accepted report gets (counted or not). */
async function reportOk(body: Record<string, unknown>): Promise<void> {
  const res = await report({ timestampSecs: Math.floor(Date.now() / 1000), ...body });
  expect(res.status, JSON.stringify(body)).toBe(200);
}

function reportBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { event: 'delivery', publishId: 'pubid-validation', deviceId: 'fcm-00000000000000000000000000000000', timestampSecs: Math.floor(Date.now() / 1000), ...overrides };
}

let tokenCounter = 0;
/** A gateway token in the platform's real format, unique within this run. */
function newToken(platform: 'fcm' | 'apns'): string {
  const n = ++tokenCounter;
  return platform === 'apns' ? (process.pid.toString(16) + n.toString(16).padStart(8, '0')).padEnd(64, 'a') : `reporting-test-token-${process.pid}-${n}`;
}

/** Registers a device through the device API (D1/D2), optionally subscribed to interests (D14); returns its id. */
async function registerDevice(platform: 'fcm' | 'apns' = 'fcm', options: { token?: string; interests?: string[] } = {}): Promise<string> {
  const token = options.token ?? newToken(platform);
  const base = `${herald.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/${platform}`;
  const res = await fetch(base, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ token, bundleIdentifier: BUNDLE_ID, metadata: { sdkVersion: '1.0.0' } }),
  });
  expect(res.status).toBe(200);
  const { id } = (await res.json()) as { id: string };
  for (const interest of options.interests ?? []) {
    expect((await fetch(`${base}/${id}/interests/${interest}`, { method: 'POST' })).status).toBe(200);
  }
  return id;
}

/** Associates an FCM device with a user (D11) with a user token issued by the official server SDK. */
async function associateUser(deviceId: string, userId: string): Promise<void> {
  const { token } = sdk.generateToken(userId);
  const res = await fetch(`${herald.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/fcm/${deviceId}/user`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}` },
  });
  expect(res.status).toBe(200);
}

const FCM_PAYLOAD = { notification: { title: 'Hello', body: 'From Herald' } };
const APNS_PAYLOAD = { aps: { alert: { title: 'Hello', body: 'From Herald' } } };

/** GET the statistics of a publish. */
async function stats(publishId: string, options: { instanceId?: string; secretKey?: string | null } = {}) {
  const headers: Record<string, string> = {};
  const secretKey = options.secretKey === undefined ? DEFAULT_PUSH.secretKey : options.secretKey;
  if (secretKey !== null) headers.authorization = `Bearer ${secretKey}`;
  const res = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${options.instanceId ?? INSTANCE}/publishes/${publishId}`, { headers });
  return { status: res.status, body: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The statistics once the publish is finished (every shard done); any answer but 200 fails at once. */
async function finishedStats(publishId: string) {
  let last: Awaited<ReturnType<typeof stats>> | undefined;
  const res = await until(
    async () => {
      last = await stats(publishId);
      return (last.status !== 200 || last.body.state === 'finished') && last;
    },
    () => `publish ${publishId} to finish: ${JSON.stringify(last?.body)}`,
    15_000,
  );
  expect(res.status).toBe(200);
  return res.body;
}

/**
 * For "no (more) webhook" after reports of `deviceId`: a marker publish to `userId`, acknowledged
 * by that device; its acknowledgement webhook is queued on the device's shard after any webhook
 * the earlier reports caused.
 */
async function markerAcknowledged(deviceId: string, userId: string): Promise<void> {
  const { publishId } = await sdk.publishToUsers([userId], { fcm: FCM_PAYLOAD });
  await finishedStats(publishId);
  await flushedBy(
    () => reportOk({ event: 'delivery', publishId, deviceId, userId }),
    () => webhooksFor(publishId).some(({ body }) => body.metadata.event_type === 'v1.UserNotificationAcknowledgement'),
    `the marker acknowledgement of ${publishId}`,
    10_000,
  );
}

function validSignature(request: ReceivedRequest): boolean {
  const expected = createHmac('sha1', WEBHOOK_SECRET).update(request.rawBody).digest('hex');
  return request.headers['webhook-signature'] === expected;
}

interface PushWebhookBody {
  payload: Record<string, unknown> & { instance_id: string; publish_id: string };
  metadata: { created_at: string; event_type: string; event_id: string; product: string };
}

function webhooksFor(publishId: string): { request: ReceivedRequest; body: PushWebhookBody }[] {
  return receiver
    .requests.filter((r) => r.path === '/push' && r.status === 200)
    .map((request) => ({ request, body: JSON.parse(request.rawBody) as PushWebhookBody }))
    .filter(({ body }) => body.payload?.publish_id === publishId);
}

function expectWellFormedWebhook(request: ReceivedRequest, webhook: PushWebhookBody): void {
  expect(request.method).toBe('POST');
  expect(validSignature(request)).toBe(true);
  expect(request.headers['webhook-event-type']).toBe(webhook.metadata.event_type);
  expect(webhook.metadata.product).toBe('beams');
  expect(typeof webhook.metadata.event_id).toBe('string');
  expect(Number.isNaN(Date.parse(webhook.metadata.created_at))).toBe(false);
}

describe('R1/R2: every documented error', () => {
  it('400: content type is not application/json', async () => {
    for (const contentType of [null, 'text/plain', 'application/x-www-form-urlencoded', 'application/jsonx']) {
      const res = await report(reportBody(), { contentType });
      expect(res.status, String(contentType)).toBe(400);
      expect(res.body).toMatchObject({ error: 'Bad Request' });
      expect(String(res.body?.description)).toContain('Content-Type');
    }
    expect((await report(reportBody(), { contentType: 'application/json; charset=utf-8' })).status).toBe(200);
  });

  it('400: instance id missing from path', async () => {
    const res = await fetch(`${herald.baseUrl}/reporting_api/v2/instances//events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(reportBody()),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: 'Bad Request', description: 'Instance id missing from path' });
  });

  it('400: instance id is not in UUID format', async () => {
    for (const id of ['not-a-uuid', '8d1c0b3e5a574d3c9d0c2f1e6c1b7a10', '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a1z']) {
      const res = await report(reportBody(), { instanceId: id });
      expect(res.status, id).toBe(400);
      expect(String(res.body?.description)).toMatch(/Instance id .* is not valid/);
    }
  });

  it('400: body is not a readable JSON object', async () => {
    for (const body of ['', '{"event":', 'not json', '[]', '"delivery"', 'null', '42']) {
      const res = await report(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ error: 'Bad Request' });
      expect(String(res.body?.description)).toMatch(/JSON/);
    }
  });

  it('400: event, publishId, deviceId and timestampSecs missing, each its own error', async () => {
    const descriptions = new Set<string>();
    for (const field of ['event', 'publishId', 'deviceId', 'timestampSecs']) {
      const body = reportBody();
      delete body[field];
      const res = await report(body);
      expect(res.status, field).toBe(400);
      expect(res.body).toEqual({ error: 'Bad Request', description: `Missing required field ${field}` });
      descriptions.add(String(res.body?.description));
    }
    expect(descriptions.size).toBe(4);
  });

  it('accepts event in any letter case and refuses other values and wrongly typed fields', async () => {
    for (const event of ['delivery', 'Delivery', 'DELIVERY', 'open', 'Open', 'OPEN']) {
      expect((await report(reportBody({ event }))).status, event).toBe(200);
    }
    const bad: [string, unknown][] = [
      ['event', 'clicked'], ['event', true], ['publishId', 1], ['deviceId', 5], ['timestampSecs', '1700000000'],
      ['timestampSecs', -1], ['userId', 12], ['appInBackground', 'yes'], ['hasDisplayableContent', 0], ['hasData', {}],
    ];
    for (const [field, value] of bad) {
      const res = await report(reportBody({ [field]: value }));
      expect(res.status, `${field}=${JSON.stringify(value)}`).toBe(400);
      expect(String(res.body?.description)).toContain(field);
    }
  });

  it('answers 200 with {} and CORS headers, and answers the preflight (browsers send reports)', async () => {
    const res = await report(reportBody({ userId: 'someone', appInBackground: false, hasDisplayableContent: true, hasData: false }));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({});
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    const preflight = await fetch(eventsUrl(), {
      method: 'OPTIONS',
      headers: { origin: 'https://example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/content-type/i);
  });

  it('400: a body over 16 KiB (a report is a few hundred bytes)', async () => {
    const res = await report(reportBody({ padding: 'x'.repeat(17 * 1024) }));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: 'Bad Request' });
    expect(String(res.body?.description)).toMatch(/larger than 16384 bytes/);
  });

  it('404: an instance id in UUID format that is not configured (documented choice)', async () => {
    const res = await report(reportBody(), { instanceId: '00000000-0000-4000-8000-000000000000' });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'Instance not found' });
  });

  it('answers 405 for another method and 404 for another path under /reporting_api/, with push error bodies', async () => {
    const get = await fetch(eventsUrl());
    expect(get.status).toBe(405);
    expect(await get.json()).toMatchObject({ error: 'Method Not Allowed' });
    const other = await fetch(`${herald.baseUrl}/reporting_api/v1/instances/${INSTANCE}/events`, { method: 'POST' });
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ error: 'Not Found' });
  });

  it('needs no authentication', async () => {
    const res = await fetch(eventsUrl(), {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer wrong' },
      body: JSON.stringify(reportBody()),
    });
    expect(res.status).toBe(200);
  });
});

describe('statistics endpoint after a real publish', () => {
  it('counts recipients, sent and failed per gateway, deliveries and opens once each, and the state', async () => {
    const interest = `stats-${process.pid}`;
    const [a, b] = [await registerDevice('fcm', { interests: [interest] }), await registerDevice('fcm', { interests: [interest] })];
    const deadToken = newToken('fcm');
    const dead = await registerDevice('fcm', { token: deadToken, interests: [interest] });
    const ios = await registerDevice('apns', { interests: [interest] });
    gateways.fcm.deadTokens.add(deadToken);

    gateways.setDelay(300);
    const { publishId } = await sdk.publishToInterests([interest], { fcm: FCM_PAYLOAD, apns: APNS_PAYLOAD });
    const early = await stats(publishId);
    gateways.setDelay(0);
    expect(early.status).toBe(200);
    expect(['queued', 'sending']).toContain(early.body.state);

    const done = await finishedStats(publishId);
    expect(done).toMatchObject({
      publishId,
      kind: 'interests',
      state: 'finished',
      recipients: 4,
      gateways: {
        fcm: { recipients: 3, sent: 2, failed: 1, removed: 1, errors: { UNREGISTERED: 1 } },
        apns: { recipients: 1, sent: 1, failed: 0, removed: 0, errors: {} },
        web: { recipients: 0, sent: 0, failed: 0, removed: 0, errors: {} },
      },
      delivered: 0,
      opened: 0,
    });
    expect(Date.parse(done.finishedAt)).toBeGreaterThanOrEqual(Date.parse(done.acceptedAt));

    // Every report twice or more, in the case variants the SDKs use: each (device, kind) counts once.
    for (const event of ['Delivery', 'delivery', 'DELIVERY']) await reportOk({ event, publishId, deviceId: a, appInBackground: true, hasDisplayableContent: true, hasData: false });
    await Promise.all([reportOk({ event: 'delivery', publishId, deviceId: b }), reportOk({ event: 'delivery', publishId, deviceId: b })]);
    // Some web SDK versions send Date.now() / 1000: a fractional timestampSecs counts like any other.
    await reportOk({ event: 'Delivery', publishId, deviceId: ios, timestampSecs: Math.floor(Date.now() / 1000) + 0.25 });
    for (const event of ['open', 'Open', 'OPEN']) await reportOk({ event, publishId, deviceId: a });
    // Ignored: the dead-token device was deleted by the publish, and a device id nobody registered.
    await reportOk({ event: 'delivery', publishId, deviceId: dead });
    await reportOk({ event: 'open', publishId, deviceId: 'fcm-0123456789abcdef0123456789abcdef' });

    const after = await stats(publishId);
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({ delivered: 3, opened: 1, recipients: 4, state: 'finished' });
  });

  it('answers 404 PUBLISH_NOT_FOUND for a publish no shard knows or of another instance, and checks the secret key', async () => {
    const device = await registerDevice('fcm', { interests: [`isolation-${process.pid}`] });
    const { publishId } = await sdk.publishToInterests([`isolation-${process.pid}`], { fcm: FCM_PAYLOAD });
    await finishedStats(publishId);
    await reportOk({ event: 'delivery', publishId, deviceId: device });

    const unknown = await stats('pubid-00000000-0000-4000-8000-000000000000');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: 'Not Found' });
    const elsewhere = await stats(publishId, { instanceId: OTHER_INSTANCE.instanceId, secretKey: OTHER_INSTANCE.secretKey });
    expect(elsewhere.status).toBe(404);
    expect((await stats(publishId, { secretKey: null })).status).toBe(400);
    expect((await stats(publishId, { secretKey: 'wrong' })).status).toBe(401);
    expect((await stats(publishId, { secretKey: OTHER_INSTANCE.secretKey })).status).toBe(401);
    expect((await stats(publishId, { instanceId: 'not-a-uuid' })).status).toBe(400);
    expect((await stats(publishId, { instanceId: '00000000-0000-4000-8000-000000000000' })).status).toBe(404);
    expect((await stats(publishId)).body).toMatchObject({ delivered: 1, opened: 0 });
  });

  it('ignores a report for a publish the device\'s shard does not know (documented choice)', async () => {
    const interest = `unknown-publish-${process.pid}`;
    const device = await registerDevice('fcm', { interests: [interest] });
    await associateUser(device, 'dave');
    const { publishId } = await sdk.publishToInterests([interest], { fcm: FCM_PAYLOAD });
    await finishedStats(publishId);
    const invented = 'pubid-11111111-2222-4333-8444-555555555555';
    await reportOk({ event: 'delivery', publishId: invented, deviceId: device, userId: 'dave' });
    expect((await stats(invented)).status).toBe(404);
    // The same device reporting the real publish: counted, with a webhook; none for the invented one
    // (it would be queued before this one, on the device's shard).
    await flushedBy(
      () => reportOk({ event: 'delivery', publishId, deviceId: device, userId: 'dave' }),
      () => webhooksFor(publishId).length >= 1,
      'the acknowledgement webhook',
      10_000,
    );
    expect(webhooksFor(invented)).toEqual([]);
    expect((await stats(publishId)).body).toMatchObject({ delivered: 1 });
  });
});

describe('push webhooks', () => {
  it('sends v1.PublishToUsersAttempt after a user publish, then v1.UserNotificationAcknowledgement and v1.UserNotificationOpen once each, signed', async () => {
    const device = await registerDevice('fcm');
    await associateUser(device, 'alice');
    const { publishId } = await sdk.publishToUsers(['alice', 'nobody'], { fcm: FCM_PAYLOAD });
    await finishedStats(publishId);

    const body = { publishId, deviceId: device, userId: 'alice' };
    await reportOk({ ...body, event: 'Delivery', appInBackground: true, hasDisplayableContent: true, hasData: false });
    await reportOk({ ...body, event: 'delivery' }); // duplicate
    await reportOk({ ...body, event: 'open' });
    await reportOk({ ...body, event: 'OPEN' }); // duplicate

    await until(() => webhooksFor(publishId).length >= 3, 'the attempt, acknowledgement and open webhooks', 10_000);
    // A wrongly sent duplicate would be queued on the device's shard before the marker's webhook.
    await markerAcknowledged(device, 'alice');
    const received = webhooksFor(publishId);
    expect(received.map(({ body: b }) => b.metadata.event_type).sort()).toEqual([
      'v1.PublishToUsersAttempt',
      'v1.UserNotificationAcknowledgement',
      'v1.UserNotificationOpen',
    ]);
    for (const { request, body: webhook } of received) {
      expectWellFormedWebhook(request, webhook);
      if (webhook.metadata.event_type === 'v1.PublishToUsersAttempt') {
        expect(webhook.payload).toEqual({
          instance_id: INSTANCE,
          publish_id: publishId,
          users_delivered_to_gateway: ['alice'],
          users_no_devices: ['nobody'],
          users_gateway_failed: [],
        });
      } else {
        expect(webhook.payload).toEqual({ instance_id: INSTANCE, publish_id: publishId, user_id: 'alice' });
      }
    }
    expect((await stats(publishId)).body).toMatchObject({ kind: 'users', delivered: 1, opened: 1, users: { deliveredToGateway: ['alice'], noDevices: ['nobody'], gatewayFailed: [] } });
  });

  it('sends no user webhook for a report without a user id, with another user id than the device has, or from an unknown device', async () => {
    const interest = `no-webhook-${process.pid}`;
    const bobs = await registerDevice('fcm', { interests: [interest] });
    await associateUser(bobs, 'bob');
    const unassociated = await registerDevice('fcm', { interests: [interest] });
    const carols = await registerDevice('fcm', { interests: [interest] });
    await associateUser(carols, 'carol');
    const { publishId } = await sdk.publishToInterests([interest], { fcm: FCM_PAYLOAD });
    await finishedStats(publishId);

    await reportOk({ event: 'delivery', publishId, deviceId: bobs });
    await reportOk({ event: 'open', publishId, deviceId: bobs, userId: 'mallory' });
    await reportOk({ event: 'open', publishId, deviceId: unassociated, userId: 'bob' });
    await reportOk({ event: 'open', publishId, deviceId: 'fcm-ffffffffffffffffffffffffffffffff', userId: 'bob' });
    // A control report that does produce a webhook, sent last: once it is in, the others had their chance.
    await flushedBy(
      () => reportOk({ event: 'delivery', publishId, deviceId: carols, userId: 'carol' }),
      () => webhooksFor(publishId).length >= 1,
      'the control webhook',
      10_000,
    );
    expect(webhooksFor(publishId).map(({ body }) => body.payload.user_id)).toEqual(['carol']);
    // Counted all the same (known devices): deliveries of bob and carol, opens of bob and the unassociated device.
    expect((await stats(publishId)).body).toMatchObject({ delivered: 2, opened: 2 });
  });
});

describe('R1/R2: 500 when the storage shard fails to answer', () => {
  const processes: HeraldProcess[] = [];
  afterAll(async () => {
    // The last one borrows the first one's data dir: stop it before that dir is removed.
    for (const h of processes.reverse()) await h.dispose();
  });

  it('answers 500 with a push error body', async () => {
    // One shard, so the report (a synced LMDB write) queues behind a heavy write on the same
    // worker; a 1 ms shard timeout then expires before the worker has answered the report.
    const normal = await startHerald({ shards: 1 });
    processes.push(normal);
    const devices = `${normal.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/fcm`;
    const res = await fetch(devices, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ token: `reporting-500-${process.pid}` }),
    });
    const { id: deviceId } = (await res.json()) as { id: string };
    expect((await fetch(`${devices}/${deviceId}/interests/news`, { method: 'POST' })).status).toBe(200);
    const { publishId } = await beamsSdk(normal.port, INSTANCE, DEFAULT_PUSH.secretKey).publishToInterests(['news'], { fcm: FCM_PAYLOAD });
    await normal.stop();

    const impatient = new HeraldProcess({ shards: 1, dataDir: normal.dataDir, config: { shardRequestTimeoutMs: 1 } });
    processes.push(impatient);
    await impatient.start();
    const interests = Array.from({ length: 5000 }, (_, i) => `interest-${i}`);
    const heavy = fetch(`${impatient.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/fcm/${deviceId}/interests`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ interests }),
    });
    const answer = await fetch(`${impatient.baseUrl}/reporting_api/v2/instances/${INSTANCE}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ event: 'delivery', publishId, deviceId, timestampSecs: 1_700_000_000 }),
    });
    await heavy;
    expect(answer.status).toBe(500);
    expect(await answer.json()).toMatchObject({ error: 'Internal Server Error' });
  });
});
