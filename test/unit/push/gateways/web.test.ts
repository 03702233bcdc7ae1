import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decodeSubscriptionToken, WebPushClient, type WebPushClientOptions } from '../../../../src/push/gateways/web.js';
import { TEST_CA_FILE, vapidKeys } from '../../../fakes/tls.js';
import { WebPushFake } from '../../../fakes/webpush-fake.js';

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

  function makeClient(options: WebPushClientOptions = {}): WebPushClient {
    const client = new WebPushClient(
      { vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: SUBJECT, caFile: TEST_CA_FILE },
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

  it('reports 410 and 404 as dead tokens, and an undecodable token as dead without sending', async () => {
    const gone = fake.createSubscription();
    fake.deadTokens.add(gone.token);
    const client = makeClient();
    expect(await client.send({ deviceId: 'd1', token: gone.token, payload: {} })).toEqual({ kind: 'dead-token', reason: 'HTTP 410' });

    const unknown = Buffer.from(JSON.stringify({ ...gone.subscription, endpoint: `${fake.origin}/push/unknown` })).toString('base64');
    expect(await client.send({ deviceId: 'd2', token: unknown, payload: {} })).toEqual({ kind: 'dead-token', reason: 'HTTP 404' });

    expect(await client.send({ deviceId: 'd3', token: 'bm90IGpzb24=', payload: {} })).toEqual({ kind: 'dead-token', reason: 'InvalidSubscription' });
    expect(fake.received).toHaveLength(1);
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
    const client = makeClient({ maxSocketsPerOrigin: 8 });
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
    expect(() => new WebPushClient({ vapidPublicKey: vapid.publicKey, vapidPrivateKey: vapid.privateKey, subject: 'not a url' })).toThrow();
  });
});

describe('decodeSubscriptionToken', () => {
  const subscription = { endpoint: 'https://push.example/abc', keys: { p256dh: 'BPk', auth: 'xyz' } };

  it('decodes base64, base64url and raw JSON', () => {
    const json = JSON.stringify(subscription);
    expect(decodeSubscriptionToken(Buffer.from(json).toString('base64'))).toEqual(subscription);
    expect(decodeSubscriptionToken(Buffer.from(json).toString('base64url'))).toEqual(subscription);
    expect(decodeSubscriptionToken(json)).toEqual(subscription);
  });

  it('rejects tokens without keys or with a non-https endpoint', () => {
    expect(decodeSubscriptionToken(Buffer.from(JSON.stringify({ endpoint: subscription.endpoint })).toString('base64'))).toBeUndefined();
    expect(decodeSubscriptionToken(JSON.stringify({ ...subscription, endpoint: 'http://push.example/abc' }))).toBeUndefined();
    expect(decodeSubscriptionToken('!!!')).toBeUndefined();
  });
});
