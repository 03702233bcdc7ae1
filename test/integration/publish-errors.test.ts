/**
 * Every error of the publish API P1/P2 (docs/errors.md, "Publish API") against the built server, with plain
 * fetch: status, and the push error body `{"error", "description"}`.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceShardFor } from '../../src/shards/hash.js';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { sleep, until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const LIMITED = { instanceId: '2f0c8a51-3b6d-4e7f-8a9b-0c1d2e3f4a5b', secretKey: 'limited-secret' };
const QUOTA = { instanceId: '7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d', secretKey: 'quota-secret' };
const UNKNOWN_INSTANCE = '11111111-2222-4333-8444-555555555555';

let fakes: FakeGateways;
let hooks: WebhookReceiver;
let herald: HeraldProcess;

beforeAll(async () => {
  fakes = await startFakeGateways();
  hooks = await WebhookReceiver.start();
  herald = await startHerald({
    shards: 2,
    config: {
      push: [
        fakes.instanceConfig({ ...DEFAULT_PUSH }),
        { ...LIMITED, maxPublishesPerSecond: 3 },
        fakes.instanceConfig({ ...QUOTA, notificationQuota: 2 }),
      ],
      webhookDelivery: { batchWindowMs: 0 },
      // The publishes' webhookUrls are on the local receiver: a private address Herald refuses unless allowed.
      outbound: { allowPrivateAddresses: ['127.0.0.1'] },
    },
  });
});

afterAll(async () => {
  await herald?.dispose();
  await hooks?.close();
  await fakes?.stop();
});

const VALID_P1 = { interests: ['nobody-here'], fcm: { notification: { title: 't' } } };

interface PublishOptions {
  instanceId?: string;
  kind?: 'interests' | 'users' | '';
  key?: string | null;
  authorization?: string;
  contentType?: string | null;
  body?: string | Buffer;
}

async function publish(options: PublishOptions = {}): Promise<{ status: number; headers: Headers; body: { error?: string; description?: string; publishId?: string } }> {
  const instanceId = options.instanceId ?? DEFAULT_PUSH.instanceId;
  const kind = options.kind ?? 'interests';
  const headers: Record<string, string> = {};
  if (options.authorization !== undefined) headers['authorization'] = options.authorization;
  else if (options.key !== null) headers['authorization'] = `Bearer ${options.key ?? DEFAULT_PUSH.secretKey}`;
  if (options.contentType !== null) headers['content-type'] = options.contentType ?? 'application/json';
  const body = options.body ?? JSON.stringify(VALID_P1);
  const response = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${instanceId}/publishes${kind ? `/${kind}` : ''}`, {
    method: 'POST',
    headers,
    body,
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : {} };
}

function expectError(result: { status: number; body: { error?: string; description?: string } }, status: number, description: RegExp): void {
  expect(result.status, JSON.stringify(result.body)).toBe(status);
  expect(typeof result.body.error).toBe('string');
  expect(result.body.description).toMatch(description);
}

describe('publish API errors (every row)', () => {
  it('answers 200 with a publishId to a valid request (the baseline the rows below break)', async () => {
    const result = await publish();
    expect(result.status).toBe(200);
    expect(result.body.publishId).toMatch(/^pubid-/);
  });

  it('400: content type is not application/json', async () => {
    expectError(await publish({ contentType: 'text/plain' }), 400, /Content-Type must be application\/json/);
    expectError(await publish({ contentType: null }), 400, /Content-Type/);
    expect((await publish({ contentType: 'application/json; charset=utf-8' })).status).toBe(200);
  });

  it('400: instance id missing from path', async () => {
    expectError(await publish({ instanceId: '' }), 400, /Instance id missing from path/);
    expectError(await publish({ instanceId: '', kind: 'users' }), 400, /Instance id missing from path/);
    expectError(await publish({ instanceId: '', kind: '' }), 400, /Instance id missing from path/);
  });

  it('400: Authorization header missing; 401: incorrect key', async () => {
    expectError(await publish({ key: null }), 400, /Authorization header missing/);
    expectError(await publish({ authorization: 'Bearer ' }), 400, /Authorization header missing/);
    expectError(await publish({ key: 'wrong-secret' }), 401, /Incorrect secret key/);
    expectError(await publish({ key: `${DEFAULT_PUSH.secretKey}x` }), 401, /Incorrect secret key/);
    expectError(await publish({ authorization: `Basic ${DEFAULT_PUSH.secretKey}` }), 401, /Incorrect secret key/);
    // Another instance's key does not open this one.
    expectError(await publish({ key: LIMITED.secretKey }), 401, /Incorrect secret key/);
  });

  it('400: body too large (10 KiB for P1, 200 KiB for P2), also when streamed without a length', async () => {
    const padding = (bytes: number) => ({ fcm: { data: { pad: 'x'.repeat(bytes) } } });
    const p1 = JSON.stringify({ interests: ['a'], ...padding(10 * 1024) });
    expectError(await publish({ body: p1 }), 400, /Request body is larger than 10240 bytes/);
    const justUnder = JSON.stringify({ interests: ['a'], ...padding(10 * 1024 - 100) });
    expect(Buffer.byteLength(justUnder)).toBeLessThanOrEqual(10 * 1024);
    expect((await publish({ body: justUnder })).status).toBe(200);

    const p2 = JSON.stringify({ users: ['u'], ...padding(200 * 1024) });
    expectError(await publish({ kind: 'users', body: p2 }), 400, /larger than 204800 bytes/);
    const p2Ok = JSON.stringify({ users: ['u'], ...padding(150 * 1024) });
    expect((await publish({ kind: 'users', body: p2Ok })).status).toBe(200);

    // Chunked: no Content-Length, the cap applies while reading. The body never ends: the
    // answer has to come from the cap, not from the end of the body.
    const streamed = await new Promise<{ status: number; body: { error?: string; description?: string } }>((resolve, reject) => {
      const req = httpRequest(`${herald.baseUrl}/publish_api/v1/instances/${DEFAULT_PUSH.instanceId}/publishes/interests`, {
        method: 'POST',
        headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}`, 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString()) });
          req.destroy();
        });
      });
      req.on('error', (err) => reject(err));
      req.write('{"interests": ["a"], "fcm": {"data": {"pad": "');
      for (let i = 0; i < 3; i++) req.write('x'.repeat(4096));
    });
    expectError(streamed, 400, /larger than 10240 bytes/);
  });

  it('400: body is not a readable JSON object', async () => {
    expectError(await publish({ body: '{"interests": ["a"], ' }), 400, /not readable JSON/);
    expectError(await publish({ body: '[1, 2]' }), 400, /must be a JSON object, got an array/);
    expectError(await publish({ body: '' }), 400, /empty/);
    expectError(await publish({ body: Buffer.from([0x7b, 0xff, 0x7d]) }), 400, /not valid UTF-8/);
  });

  it('404: instance not found', async () => {
    expectError(await publish({ instanceId: UNKNOWN_INSTANCE }), 404, /Could not find the instance/);
  });

  it('422: JSON does not match the schema, naming the field', async () => {
    const body = (value: unknown) => JSON.stringify(value);
    expectError(await publish({ body: body({ interests: [], fcm: {} }) }), 422, /interests: interests must name at least 1 interest/);
    expectError(await publish({ body: body({ interests: ['ok', 'bad name!'], fcm: {} }) }), 422, /interests\[1\]: "bad name!" is not a valid interest name/);
    expectError(await publish({ body: body({ interests: Array.from({ length: 101 }, (_, i) => `i${i}`), fcm: {} }) }), 422, /at most 100 interests/);
    expectError(await publish({ body: body({ interests: ['a'] }) }), 422, /at least one of apns, fcm or web/);
    expectError(await publish({ body: body({ interests: ['a'], apns: 'not an object' }) }), 422, /apns: apns must be a JSON object/);
    expectError(await publish({ body: body({ interests: ['a'], fcm: {}, webhookUrl: 'not a url' }) }), 422, /webhookUrl/);
    expectError(await publish({ kind: 'users', body: body({ users: ['x'.repeat(165)], fcm: {} }) }), 422, /users\[0\]: user id is 165 bytes/);
    expectError(await publish({ kind: 'users', body: body({ users: Array.from({ length: 1001 }, (_, i) => `u${i}`), fcm: {} }) }), 422, /at most 1000 users/);
    expectError(await publish({ kind: 'users', body: body({ interests: ['a'], fcm: {} }) }), 422, /users: users must be an array/);
  });

  it('429: more than maxPublishesPerSecond requests in a second', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, () => publish({ instanceId: LIMITED.instanceId, key: LIMITED.secretKey })),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
    for (const limited of results.filter((r) => r.status === 429)) {
      expectError(limited, 429, /at most 3 per second/);
      // As channel 429s do: when to come back, in whole seconds.
      expect(limited.headers.get('retry-after')).toBe('1');
    }
    // time: the limit is per second: the next second takes publishes again.
    await sleep(1100);
    expect((await publish({ instanceId: LIMITED.instanceId, key: LIMITED.secretKey })).status).toBe(200);
  });

  it('402: over the monthly notification quota', async () => {
    const register = async (token: string) => {
      const base = `${herald.baseUrl}/device_api/v1/instances/${QUOTA.instanceId}/devices/fcm`;
      const created = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
      const { id } = (await created.json()) as { id: string };
      const set = await fetch(`${base}/${encodeURIComponent(id)}/interests`, {
        method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ interests: ['quota'] }),
      });
      expect(set.status).toBe(200);
    };
    await register('fcm-quota-1');
    await register('fcm-quota-2');
    const first = await publish({
      instanceId: QUOTA.instanceId,
      key: QUOTA.secretKey,
      body: JSON.stringify({ interests: ['quota'], fcm: { notification: { title: 'q' } }, webhookUrl: `${hooks.origin}/quota` }),
    });
    expect(first.status).toBe(200);
    // Two notifications sent: the quota of 2 is used up once the publish has finished.
    await until(() => hooks.at('/quota').some((h) => (h.json as { status: string }).status === 'FINISHED'), 'the publish FINISHED');
    expectError(await publish({ instanceId: QUOTA.instanceId, key: QUOTA.secretKey }), 402, /has sent 2 of its 2 notifications/);
    // Other instances are not affected.
    expect((await publish()).status).toBe(200);
  });
});

describe('a publish that a shard failed to store', () => {
  it('answers 500 and is not sent by the shards that did store it (publish.cancel)', async () => {
    const crashing = await startHerald({
      shards: 2,
      env: { HERALD_TEST_HOOKS: '1' },
      config: {
        push: [fakes.instanceConfig({ ...DEFAULT_PUSH })],
        pushDelivery: { concurrency: 1 },
        webhookDelivery: { batchWindowMs: 0 },
        shardRequestTimeoutMs: 20_000,
        outbound: { allowPrivateAddresses: ['127.0.0.1'] },
      },
    });
    try {
      // Ten devices on shard 0 subscribed to the interest; one send at a time, 300 ms each: 3 s in all.
      const devices = `${crashing.baseUrl}/device_api/v1/instances/${DEFAULT_PUSH.instanceId}/devices/fcm`;
      const tokens: string[] = [];
      for (let n = 0; tokens.length < 10; n++) {
        const token = `fcm-cancel-${process.pid}-${n}`;
        const created = await fetch(devices, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token }) });
        const { id } = (await created.json()) as { id: string };
        if (deviceShardFor(id, 2) !== 0) continue;
        expect((await fetch(`${devices}/${id}/interests/doomed`, { method: 'POST' })).status).toBe(200);
        tokens.push(token);
      }
      const sent = () => fakes.fcm.received.filter((r) => tokens.includes(r.token!)).length;
      fakes.fcm.delayMs = 300;

      // Shard 1 blocks for 1.5 s, then dies: the publish's start, sent meanwhile, dies with it.
      const crash = fetch(`${crashing.baseUrl}/debug/shards/1/crash?stall_ms=1500`, { method: 'POST' });
      // The crash request has to reach shard 1 before the publish does; the server gives no signal
      // that a shard is stalled (the 1.5 s stall leaves the publish most of it).
      // time: a head start for the crash request, not a wait for an event (none to wait for).
      await sleep(200);
      const hookPath = '/cancelled-publish';
      const response = await fetch(`${crashing.baseUrl}/publish_api/v1/instances/${DEFAULT_PUSH.instanceId}/publishes/interests`, {
        method: 'POST',
        headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ interests: ['doomed'], fcm: { notification: { title: 'never mind' } }, webhookUrl: `${hooks.origin}${hookPath}` }),
      });
      expect(response.status).toBe(500);
      expect(((await response.json()) as { error: string }).error).toBe('Internal Server Error');
      await crash;

      // Shard 0 had started sending; the cancel stopped it at the send in flight.
      const sentAtAnswer = sent();
      // time: the whole publish would have taken 3 s: nothing more is sent in that window.
      await sleep(3_500);
      expect(sent()).toBeLessThanOrEqual(sentAtAnswer + 1);
      expect(sent()).toBeLessThan(tokens.length);
      expect(hooks.at(hookPath).filter((h) => (h.json as { status?: string }).status === 'FINISHED')).toEqual([]);
    } finally {
      fakes.fcm.delayMs = 0;
      await crashing.dispose();
    }
  }, 30_000);
});
