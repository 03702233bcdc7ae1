import { generateKeyPairSync } from 'node:crypto';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { buildFcmMessage, FcmClient, type FcmClientOptions } from '../../../../src/push/gateways/fcm.js';
import { FcmFake } from '../../../fakes/fcm-fake.js';
import { apnsKeys, fcmKeys, serverTlsOptions, TEST_CA_FILE } from '../../../fakes/tls.js';

const PROJECT = 'herald-test';
const CLIENT_EMAIL = 'herald@herald-test.iam.gserviceaccount.com';
const TOKEN = 'fcm-registration-token-1';
const keys = fcmKeys();

describe('FcmClient against the fake FCM', () => {
  let fake: FcmFake;
  let clients: FcmClient[];
  let clock: number;

  beforeEach(async () => {
    clock = Date.now();
    fake = await new FcmFake({ projectId: PROJECT, clientEmail: CLIENT_EMAIL, publicKey: keys.publicKey, now: () => clock }).start();
    clients = [];
  });

  afterEach(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await fake.stop();
  });

  function makeClient(options: FcmClientOptions = {}): FcmClient {
    const client = new FcmClient(
      {
        endpoint: fake.origin, tokenUri: fake.tokenUri, projectId: PROJECT,
        clientEmail: CLIENT_EMAIL, privateKey: keys.privateKey, caFile: TEST_CA_FILE,
      },
      { retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 2_000 }, now: () => clock, ...options },
    );
    clients.push(client);
    return client;
  }

  it('delivers a v1 message with notification and string-only data', async () => {
    const payload = {
      notification: { title: 'Hi', body: 'there' },
      data: { pusher: { publishId: 'pubid-1', hasData: true }, count: 3, text: 'plain' },
    };
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, payload });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.delivered).toHaveLength(1);
    const { message, accessToken } = fake.delivered[0]!;
    expect(message).toEqual({
      token: TOKEN,
      notification: { title: 'Hi', body: 'there' },
      data: { pusher: '{"publishId":"pubid-1","hasData":true}', count: '3', text: 'plain' },
    });
    expect(accessToken).toBe(fake.accessTokensIssued[0]);
  });

  it('reports dead tokens for 404 UNREGISTERED and 400 INVALID_ARGUMENT on the token, once it has had an accepted send', async () => {
    fake.deadTokens.add('gone');
    fake.invalidTokens.add('garbage');
    const client = makeClient();
    const payload = { notification: { title: 'x' } };
    const unconfirmed = await client.send({ deviceId: 'd1', token: 'gone', payload });
    expect(unconfirmed.kind).toBe('failed');
    expect((unconfirmed as { reason: string }).reason).toMatch(/^UNREGISTERED \(device kept: FCM .* has accepted no send/);
    expect(await client.send({ deviceId: 'd0', token: TOKEN, payload })).toEqual({ kind: 'sent' });
    expect(await client.send({ deviceId: 'd1', token: 'gone', payload })).toEqual({ kind: 'dead-token', reason: 'UNREGISTERED' });
    expect(await client.send({ deviceId: 'd2', token: 'garbage', payload })).toEqual({ kind: 'dead-token', reason: 'INVALID_ARGUMENT' });
    expect(fake.received).toHaveLength(4);
  });

  it('fails, without condemning the token, when INVALID_ARGUMENT is about the payload', async () => {
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, payload: { bogus_field: 1 } });
    expect(outcome).toMatchObject({ kind: 'failed', status: 400 });
    expect((outcome as { reason: string }).reason).toMatch(/^INVALID_ARGUMENT: .*bogus_field/);
  });

  it('retries QUOTA_EXCEEDED and UNAVAILABLE, honouring Retry-After, then delivers', async () => {
    fake.failNext(TOKEN, 1, 429, { retryAfterSeconds: 0 });
    fake.failNext(TOKEN, 1, 503);
    const outcome = await makeClient().send({ deviceId: 'd1', token: TOKEN, payload: { notification: { title: 'x' } } });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.received.map((entry) => entry.status)).toEqual([429, 503, 200]);
  });

  it('fails after the configured attempts on a persistent 500', async () => {
    fake.failNext(TOKEN, Infinity, 500);
    const outcome = await makeClient({ retry: { attempts: 4, baseDelayMs: 1 } }).send({ deviceId: 'd1', token: TOKEN, payload: {} });
    expect(outcome).toEqual({ kind: 'failed', reason: 'INTERNAL', status: 500 });
    expect(fake.received).toHaveLength(4);
  });

  it('fetches one access token for many concurrent sends and reuses it', async () => {
    const client = makeClient();
    const send = (i: number) => client.send({ deviceId: `d${i}`, token: `t${i}`, payload: { data: { i } } });
    await Promise.all(Array.from({ length: 50 }, (_, i) => send(i)));
    await Promise.all(Array.from({ length: 50 }, (_, i) => send(i)));
    expect(fake.accessTokensIssued).toHaveLength(1);
    expect(fake.delivered).toHaveLength(100);
  });

  it('refreshes the access token 5 minutes before it expires', async () => {
    const client = makeClient();
    await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    clock += 54 * 60_000;
    await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    expect(fake.accessTokensIssued).toHaveLength(1);
    clock += 2 * 60_000;
    await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    expect(fake.accessTokensIssued).toHaveLength(2);
    expect(fake.delivered).toHaveLength(3);
  });

  it('on 401 fetches a new access token once and retries', async () => {
    const client = makeClient();
    await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    fake.revokeAccessTokens();
    const outcome = await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.accessTokensIssued).toHaveLength(2);
    expect(fake.rejected).toEqual([{ status: 401, reason: 'UNAUTHENTICATED' }]);
  });

  it('fails without retrying when the token endpoint refuses the assertion', async () => {
    const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const client = new FcmClient(
      { endpoint: fake.origin, tokenUri: fake.tokenUri, projectId: PROJECT, clientEmail: CLIENT_EMAIL, privateKey: otherKey, caFile: TEST_CA_FILE },
      { retry: { baseDelayMs: 1 } },
    );
    clients.push(client);
    const outcome = await client.send({ deviceId: 'd', token: TOKEN, payload: {} });
    expect(outcome).toMatchObject({ kind: 'failed', status: 400 });
    expect((outcome as { reason: string }).reason).toMatch(/invalid_grant/);
    expect(fake.rejected).toHaveLength(1);
  });

  it('remembers a refused token fetch for 30 s: later sends fail at once without asking the token endpoint', async () => {
    const otherKey = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    const client = new FcmClient(
      { endpoint: fake.origin, tokenUri: fake.tokenUri, projectId: PROJECT, clientEmail: CLIENT_EMAIL, privateKey: otherKey, caFile: TEST_CA_FILE },
      { retry: { baseDelayMs: 1 }, now: () => clock },
    );
    clients.push(client);
    const send = (i: number) => client.send({ deviceId: `d${i}`, token: `t${i}`, payload: {} });
    expect((await send(0)).kind).toBe('failed');
    const later = await Promise.all(Array.from({ length: 20 }, (_, i) => send(i + 1)));
    for (const outcome of later) {
      expect(outcome).toMatchObject({ kind: 'failed', status: 400 });
      expect((outcome as { reason: string }).reason).toMatch(/invalid_grant.*asked again in 30 s/);
    }
    expect(fake.rejected).toHaveLength(1);
    clock += 31_000;
    expect((await send(99)).kind).toBe('failed');
    expect(fake.rejected).toHaveLength(2);
    expect(fake.received).toHaveLength(0);
  });

  it('remembers a transient token failure for 2 s: sends wait it out (not failing at once) and fetch again once', async () => {
    let fetches = 0;
    const tokenEndpoint = createServer(serverTlsOptions(), (req, res) => {
      fetches++;
      req.resume();
      res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"backend_error"}');
    });
    await new Promise<void>((resolve) => tokenEndpoint.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = tokenEndpoint.address() as AddressInfo;
      const client = new FcmClient(
        { endpoint: fake.origin, tokenUri: `https://127.0.0.1:${port}/token`, projectId: PROJECT, clientEmail: CLIENT_EMAIL, privateKey: keys.privateKey, caFile: TEST_CA_FILE },
        { retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 10 } },
      );
      clients.push(client);
      const started = performance.now();
      const outcomes = await Promise.all(Array.from({ length: 20 }, (_, i) => client.send({ deviceId: `d${i}`, token: `t${i}`, payload: {} })));
      for (const outcome of outcomes) expect(outcome).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^oauth: token endpoint answered 503/) });
      // Attempt 1: one shared fetch. Attempt 2: the remembered failure, waited out (2 s). Attempt 3: one fetch again.
      expect(fetches).toBe(2);
      expect(performance.now() - started).toBeGreaterThanOrEqual(1_800);
      expect(fake.received).toHaveLength(0);
    } finally {
      tokenEndpoint.closeAllConnections();
      await new Promise((resolve) => tokenEndpoint.close(resolve));
    }
  });

  it('refuses a key that is not RSA at construction', () => {
    expect(() => new FcmClient({
      endpoint: fake.origin, tokenUri: fake.tokenUri, projectId: PROJECT, clientEmail: CLIENT_EMAIL, privateKey: apnsKeys().privateKey, caFile: null,
    })).toThrow(TypeError);
  });

  it('carries 500 concurrent sends over two pooled sessions', async () => {
    const client = makeClient({ poolSize: 2 });
    const outcomes = await Promise.all(Array.from({ length: 500 }, (_, i) => client.send({
      deviceId: `d${i}`, token: `token-${i}`, payload: { notification: { title: `n${i}` } },
    })));
    expect(outcomes.every((outcome) => outcome.kind === 'sent')).toBe(true);
    expect(new Set(fake.delivered.map((entry) => entry.token)).size).toBe(500);
    // Two HTTP/2 sessions for messages plus one HTTP/1.1 connection for the token endpoint.
    expect(fake.connectionsAccepted).toBeLessThanOrEqual(3);
  });
});

describe('buildFcmMessage', () => {
  it('moves legacy-only fields where FCM v1 expects them', () => {
    const message = buildFcmMessage('tok', {
      notification: { title: 'T', body: 'B', icon: 'ic', android_channel_id: 'news', click_action: 'OPEN' },
      data: { a: 1, b: null },
      priority: 'high',
      time_to_live: 60,
      collapse_key: 'k',
    });
    expect(message).toEqual({
      token: 'tok',
      notification: { title: 'T', body: 'B' },
      data: { a: '1' },
      android: { priority: 'HIGH', ttl: '60s', collapse_key: 'k', notification: { icon: 'ic', channel_id: 'news', click_action: 'OPEN' } },
    });
  });

  it('passes v1 fields through untouched', () => {
    const android = { priority: 'NORMAL', notification: { tag: 't' } };
    expect(buildFcmMessage('tok', { android, fcm_options: { analytics_label: 'l' } }))
      .toEqual({ token: 'tok', android, fcm_options: { analytics_label: 'l' } });
  });
});
