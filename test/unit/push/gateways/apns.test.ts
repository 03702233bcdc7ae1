import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApnsClient, buildApnsRequest, type ApnsClientOptions } from '../../../../src/push/gateways/apns.js';
import { ApnsFake } from '../../../fakes/apns-fake.js';
import { apnsKeys, fcmKeys, TEST_CA_FILE } from '../../../fakes/tls.js';
import { sleep, until } from '../../../helpers/wait.js';

const TEAM_ID = 'TEAM123456';
const KEY_ID = 'KEY1234567';
const BUNDLE = 'com.example.herald';
const TOKEN = 'ab'.repeat(32);
const keys = apnsKeys();

describe('ApnsClient against the fake APNs', () => {
  let fake: ApnsFake;
  let clients: ApnsClient[];
  let clock: number;

  beforeEach(async () => {
    clock = Date.now();
    fake = await new ApnsFake({ teamId: TEAM_ID, keyId: KEY_ID, publicKey: keys.publicKey, now: () => clock }).start();
    clients = [];
  });

  afterEach(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await fake.stop();
  });

  function makeClient(options: ApnsClientOptions = {}, keyId = KEY_ID): ApnsClient {
    const client = new ApnsClient(
      { endpoint: fake.origin, teamId: TEAM_ID, keyId, privateKey: keys.privateKey, caFile: TEST_CA_FILE },
      { retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 2_000 }, now: () => clock, ...options },
    );
    clients.push(client);
    return client;
  }

  it('delivers an alert with topic, push type, priority, header keys and a valid provider token', async () => {
    const payload = {
      aps: { alert: { title: 'Hi', body: 'there' } },
      data: { pusher: { publishId: 'pubid-1' } },
      'apns-collapse-id': 'thread-7',
      'apns-expiration': 1_900_000_000,
    };
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.delivered).toHaveLength(1);
    const [received] = fake.delivered;
    expect(received).toMatchObject({
      token: TOKEN, topic: BUNDLE, pushType: 'alert', priority: '10', collapseId: 'thread-7', expiration: '1900000000',
    });
    // Header keys are taken out of the body.
    expect(received!.payload).toEqual({ aps: payload.aps, data: payload.data });
    expect(decodeProtectedHeader(received!.providerToken)).toMatchObject({ alg: 'ES256', kid: KEY_ID });
    expect(decodeJwt(received!.providerToken)).toEqual({ iss: TEAM_ID, iat: Math.floor(clock / 1000) });
  });

  it('sends content-available-only pushes as background with priority 5', async () => {
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { 'content-available': 1 } } });
    expect(outcome.kind).toBe('sent');
    expect(fake.delivered[0]).toMatchObject({ pushType: 'background', priority: '5' });
  });

  it('reports dead tokens for 410 Unregistered and 400 BadDeviceToken once it has had an accepted send', async () => {
    const client = makeClient();
    const payload = { aps: { alert: 'x' } };
    expect(await client.send({ deviceId: 'd0', token: 'cd'.repeat(32), bundleIdentifier: BUNDLE, payload })).toEqual({ kind: 'sent' });
    fake.deadTokens.add(TOKEN);
    expect(await client.send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload })).toEqual({ kind: 'dead-token', reason: 'Unregistered' });
    expect(await client.send({ deviceId: 'd2', token: 'not-hex!', bundleIdentifier: BUNDLE, payload })).toEqual({ kind: 'dead-token', reason: 'BadDeviceToken' });
    expect(fake.received).toHaveLength(3);
  });

  it('keeps devices while it has accepted nothing: every BadDeviceToken (wrong environment) is failed, not dead', async () => {
    const client = makeClient();
    const payload = { aps: { alert: 'x' } };
    // What a sandbox endpoint answers to production tokens (and the other way round): BadDeviceToken to all of them.
    const outcomes = await Promise.all(Array.from({ length: 25 }, (_, i) => client.send({ deviceId: `d${i}`, token: `bad-${i}`, bundleIdentifier: BUNDLE, payload })));
    for (const outcome of outcomes) {
      expect(outcome.kind).toBe('failed');
      expect((outcome as { reason: string }).reason).toMatch(/^BadDeviceToken \(device kept: APNs https:\/\/127\.0\.0\.1:\d+ has accepted no send.*check the APNs endpoint\/environment/);
    }
    fake.deadTokens.add(TOKEN);
    expect((await client.send({ deviceId: 'd', token: TOKEN, bundleIdentifier: BUNDLE, payload })).kind).toBe('failed');
    // One accepted send confirms the endpoint: from then on a dead token is dead.
    expect(await client.send({ deviceId: 'ok', token: 'ef'.repeat(32), bundleIdentifier: BUNDLE, payload })).toEqual({ kind: 'sent' });
    expect(await client.send({ deviceId: 'd', token: TOKEN, bundleIdentifier: BUNDLE, payload })).toEqual({ kind: 'dead-token', reason: 'Unregistered' });
  });

  it('fails without retrying on MissingTopic and InvalidProviderToken', async () => {
    const payload = { aps: { alert: 'x' } };
    expect(await makeClient().send({ deviceId: 'd1', token: TOKEN, payload })).toEqual({ kind: 'failed', reason: 'MissingTopic', status: 400 });
    expect(await makeClient({}, 'WRONGKEY00').send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload }))
      .toEqual({ kind: 'failed', reason: 'InvalidProviderToken', status: 403 });
    expect(fake.rejected).toEqual([{ status: 400, reason: 'MissingTopic' }, { status: 403, reason: 'InvalidProviderToken' }]);
  });

  it('retries 429 and 503 with backoff, then delivers', async () => {
    fake.failNext(TOKEN, 1, 429);
    fake.failNext(TOKEN, 1, 503);
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.received.map((entry) => entry.status)).toEqual([429, 503, 200]);
  });

  it('waits for Retry-After (seconds) before retrying', async () => {
    fake.failNext(TOKEN, 1, 503, { retryAfterSeconds: 1 });
    const started = performance.now();
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    expect(outcome.kind).toBe('sent');
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
  });

  it('gives up at once when Retry-After exceeds the pause limit, and fails the other sends without requests until it is over', async () => {
    fake.failNext(TOKEN, 1, 429, { retryAfterSeconds: 61 });
    const client = makeClient();
    const outcome = await client.send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    expect(outcome).toMatchObject({ kind: 'failed', status: 429 });
    expect((outcome as { reason: string }).reason).toMatch(/Retry-After 61 s exceeds the 60 s pause limit/);
    const others = await Promise.all(Array.from({ length: 10 }, (_, i) => client.send({
      deviceId: `o${i}`, token: i.toString(16).padStart(64, '0'), bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } },
    })));
    for (const other of others) expect(other).toMatchObject({ kind: 'failed', status: 429, reason: expect.stringMatching(/^TooManyRequests: .*not sent$/) });
    expect(fake.received).toHaveLength(1);
  });

  it('a 503 with Retry-After pauses every send of the client until it is over', async () => {
    fake.failNext(TOKEN, 1, 503, { retryAfterSeconds: 1 });
    const client = makeClient();
    const payload = { aps: { alert: 'x' } };
    const first = client.send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload });
    await until(() => fake.received.length > 0, 'the fake got the request');
    // The fake has answered; give the client's session a moment to read the 503 and pause
    // (on a loaded machine the answer can still be in flight when the fake records it).
    // time: the client reads the 503 and pauses (the answer may be in flight when the fake records it).
    await sleep(100);
    const started = performance.now();
    const others = await Promise.all(Array.from({ length: 10 }, (_, i) => client.send({
      deviceId: `o${i}`, token: (i + 1).toString(16).padStart(64, '0'), bundleIdentifier: BUNDLE, payload,
    })));
    expect(others.every((o) => o.kind === 'sent')).toBe(true);
    expect(performance.now() - started).toBeGreaterThanOrEqual(800);
    expect(await first).toEqual({ kind: 'sent' });
    // Nothing reached the gateway during the pause: the 503, then eleven accepted sends.
    expect(fake.received.map((r) => r.status)).toEqual([503, ...Array<number>(11).fill(200)]);
  });

  it('fails after the configured attempts on a persistent 500', async () => {
    fake.failNext(TOKEN, Infinity, 500);
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    expect(outcome).toEqual({ kind: 'failed', reason: 'InternalServerError', status: 500 });
    expect(fake.received).toHaveLength(3);
  });

  it('reuses the provider token and signs a new one after 30 minutes', async () => {
    const client = makeClient();
    const payload = { aps: { alert: 'x' } };
    await Promise.all(Array.from({ length: 20 }, (_, i) => client.send({ deviceId: `d${i}`, token: TOKEN, bundleIdentifier: BUNDLE, payload })));
    expect(fake.providerTokens.size).toBe(1);
    clock += 29 * 60_000;
    await client.send({ deviceId: 'd', token: TOKEN, bundleIdentifier: BUNDLE, payload });
    expect(fake.providerTokens.size).toBe(1);
    clock += 2 * 60_000;
    await client.send({ deviceId: 'd', token: TOKEN, bundleIdentifier: BUNDLE, payload });
    expect(fake.providerTokens.size).toBe(2);
    expect(fake.delivered).toHaveLength(22);
  });

  it('refuses a provider token refresh interval outside 20–60 minutes, and a key that is not EC P-256', () => {
    expect(() => makeClient({ tokenRefreshMs: 10 * 60_000 })).toThrow(RangeError);
    expect(() => new ApnsClient({ endpoint: fake.origin, teamId: TEAM_ID, keyId: KEY_ID, privateKey: fcmKeys().privateKey, caFile: null }))
      .toThrow(TypeError);
  });

  it('carries 500 concurrent sends over two pooled sessions', async () => {
    const client = makeClient({ poolSize: 2 });
    const tokens = Array.from({ length: 500 }, (_, i) => i.toString(16).padStart(64, '0'));
    const outcomes = await Promise.all(tokens.map((token, i) => client.send({
      deviceId: `d${i}`, token, bundleIdentifier: BUNDLE, payload: { aps: { alert: `n${i}` } },
    })));
    expect(outcomes.every((outcome) => outcome.kind === 'sent')).toBe(true);
    expect(new Set(fake.delivered.map((entry) => entry.token)).size).toBe(500);
    expect(fake.connectionsAccepted).toBeLessThanOrEqual(2);
  });

  it('reconnects after the server sends GOAWAY', async () => {
    const client = makeClient({ poolSize: 1 });
    const message = { deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } };
    expect((await client.send(message)).kind).toBe('sent');
    fake.disconnectAll();
    // time: the client sees its sessions closed before the next send.
    await sleep(50);
    expect((await client.send(message)).kind).toBe('sent');
    expect(fake.connectionsAccepted).toBe(2);
  });

  it('resolves sends waiting on a retry as failed when closed', async () => {
    fake.failNext(TOKEN, 1, 503, { retryAfterSeconds: 1 });
    const client = makeClient();
    const pending = client.send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    await until(() => fake.received.length > 0, 'the fake got the request');
    // Let the client read the answer the fake has recorded (in flight on a loaded machine).
    // time: the client reads the answer the fake recorded (in flight on a loaded machine).
    await sleep(100);
    await client.close();
    expect(await pending).toEqual({ kind: 'failed', reason: 'gateway client closed' });
  });

  it('fails (after retries) when nothing listens', async () => {
    await fake.stop();
    const outcome = await makeClient({ retry: { attempts: 2, baseDelayMs: 1 } })
      .send({ deviceId: 'd1', token: TOKEN, bundleIdentifier: BUNDLE, payload: { aps: { alert: 'x' } } });
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/^network: /);
  });
});

describe('buildApnsRequest', () => {
  it('honours explicit apns-priority and apns-push-type keys and drops them from the body', () => {
    const request = buildApnsRequest({
      deviceId: 'd', token: 'ff', bundleIdentifier: 'b',
      payload: { aps: { alert: 'x' }, 'apns-priority': 5, 'apns-push-type': 'voip' },
    });
    expect(request.headers).toMatchObject({ ':path': '/3/device/ff', 'apns-priority': '5', 'apns-push-type': 'voip', 'apns-topic': 'b' });
    expect(JSON.parse(request.body)).toEqual({ aps: { alert: 'x' } });
  });
});
