import { createECDH } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebPushClient, type WebPushClientOptions } from '../../../../src/push/gateways/web.js';
import { parseSubscriptionToken } from '../../../../src/push/web-subscription.js';
import { TEST_CA_FILE, vapidKeys } from '../../../fakes/tls.js';
import { WebPushFake } from '../../../fakes/webpush-fake.js';
import type { FakeResponse } from '../../../fakes/fake-server.js';
import { sleep, until } from '../../../helpers/wait.js';

const vapid = vapidKeys();
const SUBJECT = 'mailto:push@herald.test';

describe('WebPushClient against the fake push service', () => {
  let fake: WebPushFake;
  let clients: WebPushClient[];

  beforeEach(async () => {
    fake = await new WebPushFake({ vapidPublicKey: vapid.publicKey }).start();
    clients = [];
  });

  afterEach(async () => {
    await Promise.all(clients.map((client) => client.close()));
    await fake.stop();
  });

  function makeClient(options: WebPushClientOptions = {}, allowPrivateEndpoints = true): WebPushClient {
    const client = new WebPushClient(
      { vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: SUBJECT, caFile: TEST_CA_FILE, allowPrivateEndpoints },
      { retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 2_000 }, ...options },
    );
    clients.push(client);
    return client;
  }

  it('delivers an encrypted payload that decrypts to the payload JSON, with VAPID for the endpoint origin', async () => {
    const subscription = fake.createSubscription();
    const payload = { notification: { title: 'Hi', body: 'there' }, data: { pusher: { publishId: 'pubid-1' } } };
    const outcome = await makeClient().send({ deviceId: 'd1', token: subscription.token, payload });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.delivered).toHaveLength(1);
    const [received] = fake.delivered;
    expect(received!.plaintext).toBe(JSON.stringify(payload));
    expect(received!.vapid).toMatchObject({ aud: fake.origin, sub: SUBJECT });
    expect(received!.ttl).toBe('2419200');
  });

  it('accepts base64url tokens and takes time_to_live as the TTL header', async () => {
    const subscription = fake.createSubscription();
    const token = Buffer.from(JSON.stringify(subscription.subscription)).toString('base64url');
    const outcome = await makeClient().send({ deviceId: 'd1', token, payload: { notification: { title: 'x' }, time_to_live: 60 } });
    expect(outcome.kind).toBe('sent');
    expect(fake.delivered[0]).toMatchObject({ ttl: '60', plaintext: '{"notification":{"title":"x"}}' });
  });

  it('reports 410 and 404 as dead tokens once the push service has accepted a send, and an undecodable token as dead without sending', async () => {
    const gone = fake.createSubscription();
    fake.deadTokens.add(gone.token);
    const client = makeClient();
    expect(await client.send({ deviceId: 'd0', token: fake.createSubscription().token, payload: {} })).toEqual({ kind: 'sent' });
    expect(await client.send({ deviceId: 'd1', token: gone.token, payload: {} })).toEqual({ kind: 'dead-token', reason: 'HTTP 410' });

    const unknown = Buffer.from(JSON.stringify({ ...gone.subscription, endpoint: `${fake.origin}/push/unknown` })).toString('base64');
    expect(await client.send({ deviceId: 'd2', token: unknown, payload: {} })).toEqual({ kind: 'dead-token', reason: 'HTTP 404' });

    expect(await client.send({ deviceId: 'd3', token: 'bm90IGpzb24=', payload: {} })).toEqual({ kind: 'dead-token', reason: 'InvalidSubscription' });
    expect(fake.received).toHaveLength(2);
  });

  it('keeps devices (failed, not dead) while a push service has accepted nothing: one guard per origin', async () => {
    const client = makeClient();
    const gone = fake.createSubscription();
    fake.deadTokens.add(gone.token);
    const outcome = await client.send({ deviceId: 'd1', token: gone.token, payload: {} });
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/^HTTP 410 \(device kept: .*has accepted no send/);

    // Another push service that accepted a send does not vouch for this one.
    const other = await new WebPushFake({ vapidPublicKey: vapid.publicKey }).start();
    try {
      expect(await client.send({ deviceId: 'd2', token: other.createSubscription().token, payload: {} })).toEqual({ kind: 'sent' });
      expect((await client.send({ deviceId: 'd1', token: gone.token, payload: {} })).kind).toBe('failed');
    } finally {
      await other.stop();
    }
    expect(await client.send({ deviceId: 'd3', token: fake.createSubscription().token, payload: {} })).toEqual({ kind: 'sent' });
    expect(await client.send({ deviceId: 'd1', token: gone.token, payload: {} })).toEqual({ kind: 'dead-token', reason: 'HTTP 410' });
  });

  it('does not send to a private endpoint unless allowPrivateEndpoints (tokens registered before the rule)', async () => {
    const subscription = fake.createSubscription();
    const outcome = await makeClient({}, false).send({ deviceId: 'd1', token: subscription.token, payload: {} });
    expect(outcome.kind).toBe('failed');
    expect((outcome as { reason: string }).reason).toMatch(/^EndpointNotAllowed: .*127\.0\.0\.1.*allowPrivateEndpoints/);
    expect(fake.received).toHaveLength(0);
  });

  it('does not follow a redirect: a 3xx fails the send and the Location is never asked', async () => {
    const target = await new WebPushFake({ vapidPublicKey: vapid.publicKey }).start();
    const moved = target.createSubscription();
    class RedirectingFake extends WebPushFake {
      protected override async handle(): Promise<FakeResponse> {
        return { status: 301, headers: { location: moved.subscription.endpoint } };
      }
    }
    const redirecting = await new RedirectingFake({ vapidPublicKey: vapid.publicKey }).start();
    try {
      const outcome = await makeClient().send({ deviceId: 'd1', token: redirecting.createSubscription().token, payload: {} });
      expect(outcome).toMatchObject({ kind: 'failed', reason: 'HTTP 301' });
      expect(target.received).toHaveLength(0);
    } finally {
      await redirecting.stop();
      await target.stop();
    }
  });

  it('allows private push services the operator names (allowPrivateAddresses), checked on the address connected to', async () => {
    const subscription = fake.createSubscription();
    // A localhost name is refused as such; names that resolve to loopback: test/integration/outbound-guard.test.ts.
    const byName = Buffer.from(JSON.stringify({ ...subscription.subscription, endpoint: subscription.subscription.endpoint.replace('127.0.0.1', 'localhost') })).toString('base64');
    const refused = await makeClient({}, false).send({ deviceId: 'd1', token: byName, payload: {} });
    expect(refused).toMatchObject({ kind: 'failed', reason: expect.stringMatching(/^EndpointNotAllowed: .*localhost/) });
    const allowed = makeClient({ allowPrivateAddresses: ['127.0.0.0/8', '::1'] }, false);
    expect(await allowed.send({ deviceId: 'd1', token: subscription.token, payload: {} })).toEqual({ kind: 'sent' });
    expect(fake.delivered).toHaveLength(1);
  });

  it('a 429 with Retry-After pauses every send to that push service, not to others', async () => {
    const client = makeClient();
    const throttled = fake.createSubscription();
    fake.failNext(throttled.token, 1, 429, { retryAfterSeconds: 1 });
    const first = client.send({ deviceId: 'd1', token: throttled.token, payload: {} });
    await until(() => fake.received.length > 0, 'the fake got the request');
    // Let the client read the answer the fake has recorded (in flight on a loaded machine).
    // time: the client reads the answer the fake recorded (in flight on a loaded machine).
    await sleep(100);
    const other = await new WebPushFake({ vapidPublicKey: vapid.publicKey }).start();
    try {
      const started = performance.now();
      const elsewhere = await client.send({ deviceId: 'd3', token: other.createSubscription().token, payload: {} });
      expect(elsewhere).toEqual({ kind: 'sent' });
      expect(performance.now() - started).toBeLessThan(700);
      const sameService = await client.send({ deviceId: 'd2', token: fake.createSubscription().token, payload: {} });
      expect(sameService).toEqual({ kind: 'sent' });
      expect(performance.now() - started).toBeGreaterThanOrEqual(800);
      expect(await first).toEqual({ kind: 'sent' });
    } finally {
      await other.stop();
    }
  });

  it('a Retry-After above the pause limit fails the sends to that service at once, without requests', async () => {
    const client = makeClient({ retry: { attempts: 3, baseDelayMs: 5, maxDelayMs: 2_000, maxPauseMs: 60_000 } });
    const throttled = fake.createSubscription();
    fake.failNext(throttled.token, 1, 429, { retryAfterSeconds: 120 });
    const started = performance.now();
    const first = await client.send({ deviceId: 'd1', token: throttled.token, payload: {} });
    expect(first).toMatchObject({ kind: 'failed', status: 429 });
    const outcomes = await Promise.all(Array.from({ length: 5 }, (_, i) => client.send({ deviceId: `d${i}`, token: fake.createSubscription().token, payload: {} })));
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({ kind: 'failed', status: 429 });
      expect((outcome as { reason: string }).reason).toMatch(/Retry-After.*pause limit; not sent/);
    }
    expect(fake.received).toHaveLength(1);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('retries 429 and 503, then delivers', async () => {
    const subscription = fake.createSubscription();
    fake.failNext(subscription.token, 1, 429, { retryAfterSeconds: 0 });
    fake.failNext(subscription.token, 1, 503);
    const outcome = await makeClient().send({ deviceId: 'd1', token: subscription.token, payload: { n: 1 } });
    expect(outcome).toEqual({ kind: 'sent' });
    expect(fake.received.map((entry) => entry.status)).toEqual([429, 503, 201]);
    expect(fake.delivered[0]!.plaintext).toBe('{"n":1}');
  });

  it('fails after the configured attempts on a persistent 500, and at once on other statuses', async () => {
    const broken = fake.createSubscription();
    fake.failNext(broken.token, Infinity, 500);
    const client = makeClient();
    expect(await client.send({ deviceId: 'd1', token: broken.token, payload: {} })).toEqual({ kind: 'failed', reason: 'HTTP 500', status: 500 });
    expect(fake.received).toHaveLength(3);

    const tooBig = fake.createSubscription();
    fake.failNext(tooBig.token, 1, 413);
    expect(await client.send({ deviceId: 'd2', token: tooBig.token, payload: {} })).toEqual({ kind: 'failed', reason: 'HTTP 413', status: 413 });
    expect(fake.received).toHaveLength(4);
  });

  it('is refused by a push service bound to another VAPID key', async () => {
    const other = await new WebPushFake({ vapidPublicKey: 'B' + 'A'.repeat(86) }).start();
    try {
      const subscription = other.createSubscription();
      const outcome = await makeClient().send({ deviceId: 'd1', token: subscription.token, payload: {} });
      expect(outcome).toEqual({ kind: 'failed', reason: 'HTTP 403', status: 403 });
    } finally {
      await other.stop();
    }
  });

  it('delivers 500 concurrent pushes over keep-alive connections', async () => {
    // A generous deadline: under CPU load a send timed out after 10 s was retried and delivered twice.
    const client = makeClient({ maxSocketsPerOrigin: 8, requestTimeoutMs: 120_000 });
    const subscriptions = Array.from({ length: 500 }, () => fake.createSubscription());
    const outcomes = await Promise.all(subscriptions.map((subscription, i) => client.send({
      deviceId: `d${i}`, token: subscription.token, payload: { i },
    })));
    expect(outcomes.every((outcome) => outcome.kind === 'sent')).toBe(true);
    expect(fake.delivered).toHaveLength(500);
    const bySubscription = new Map(fake.delivered.map((entry) => [entry.subscriptionId, entry.plaintext]));
    subscriptions.forEach((subscription, i) => expect(bySubscription.get(subscription.id)).toBe(JSON.stringify({ i })));
    expect(fake.connectionsAccepted).toBeLessThanOrEqual(8);
  });

  it('rejects unusable VAPID settings at construction', () => {
    expect(() => new WebPushClient({ vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: 'not a url', caFile: null, allowPrivateEndpoints: false })).toThrow();
  });
});

describe('parseSubscriptionToken (the rules of registration and of send time)', () => {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  const subscription = {
    endpoint: 'https://push.example/abc',
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: Buffer.alloc(16, 1).toString('base64url') },
  };

  it('decodes base64 and base64url', () => {
    const json = JSON.stringify({ ...subscription, expirationTime: null });
    expect(parseSubscriptionToken(Buffer.from(json).toString('base64'))).toEqual({ ok: true, subscription });
    expect(parseSubscriptionToken(Buffer.from(json).toString('base64url'))).toEqual({ ok: true, subscription });
  });

  it('refuses raw JSON, tokens without usable keys and non-https endpoints', () => {
    const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
    expect(parseSubscriptionToken(JSON.stringify(subscription)).ok).toBe(false);
    expect(parseSubscriptionToken(encode({ endpoint: subscription.endpoint })).ok).toBe(false);
    expect(parseSubscriptionToken(encode({ ...subscription, keys: { p256dh: 'BPk', auth: 'xyz' } })).ok).toBe(false);
    expect(parseSubscriptionToken(encode({ ...subscription, endpoint: 'http://push.example/abc' })).ok).toBe(false);
    expect(parseSubscriptionToken('!!!').ok).toBe(false);
  });
});
