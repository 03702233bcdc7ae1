/**
 * Channel webhooks end to end: official `pusher-js` clients subscribe and unsubscribe on the
 * built server, a real local HTTP receiver records what Herald posts, and the official
 * `pusher` SDK checks every signature. Covers every event kind, batching, retries, the reload
 * debounce, and a kill -9 with undelivered events.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import type { Channel } from 'pusher-js';
import { channelShardFor } from '../../src/shards/hash.js';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient as PusherClient } from '../helpers/sdk-clients.js';
import { WebhookReceiver, type ReceivedRequest } from '../helpers/webhook-receiver.js';
import { flushedBy, until } from '../helpers/wait.js';
import { committedOnShards } from './device-api-helpers.js';

const APP = { id: 'hook-app', key: 'hook-key', secret: 'hook-secret' };
const SDK = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1' });
/** Shards of the servers that do not run with one. */
const SHARDS = 2;
/** Small timings so the tests run in seconds. */
const DELIVERY = { batchWindowMs: 50, pageReloadDebounceMs: 300, retryBaseMs: 50, maxAttempts: 30, timeoutMs: 2000 };

type WebhookEvent = Record<string, unknown> & { name: string; channel: string; id: string };

function heraldConfig(receiver: WebhookReceiver, delivery: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apps: [{ ...APP, clientEvents: true, subscriptionCount: true, webhooks: [{ url: receiver.url('/pusher') }] }],
    webhookDelivery: { ...DELIVERY, ...delivery },
  };
}

/** Events of the receiver's 2xx requests, each request checked with the official SDK first. */
function verifiedEvents(receiver: WebhookReceiver): WebhookEvent[] {
  return receiver.delivered().flatMap((req) => verified(req));
}

function verified(req: ReceivedRequest): WebhookEvent[] {
  const hook = SDK.webhook({ headers: req.headers, rawBody: req.rawBody });
  expect(hook.isValid(), `signature of ${req.rawBody}`).toBe(true);
  expect(req.headers['x-pusher-key']).toBe(APP.key);
  return hook.getEvents() as unknown as WebhookEvent[];
}

const label = (e: WebhookEvent): string => `${e.name}:${e.channel}${e.user_id !== undefined ? `:${String(e.user_id)}` : ''}`;


/** A connected pusher-js client whose presence subscriptions are user `userId`. */
async function connect(herald: HeraldProcess, clients: PusherClient[], userId = 'u1'): Promise<PusherClient> {
  const pusher = pusherJsClient(herald.port, APP.key, {
    channelAuthorization: {
      customHandler: ({ socketId, channelName }, callback) =>
        callback(null, SDK.authorizeChannel(socketId, channelName, channelName.startsWith('presence-') ? { user_id: userId, user_info: { name: userId } } : undefined)),
    },
  });
  clients.push(pusher);
  await until(() => pusher.connection.state === 'connected', 'connection');
  return pusher;
}

async function subscribe(pusher: PusherClient, channel: string): Promise<Channel> {
  const ch = pusher.subscribe(channel);
  await until(() => ch.subscribed, `subscription to ${channel}`);
  return ch;
}

/**
 * For "nothing (more) arrives" past the leave debounce: `pusher` occupies and leaves a channel
 * of the same shard as `channel` (so of the same outbox queue); its channel_vacated is held by
 * the debounce after anything held before it, so it is delivered after whatever they release.
 */
async function debouncedMarker(receiver: WebhookReceiver, pusher: PusherClient, channel: string, name: string, timeoutMs: number): Promise<void> {
  let marker = name;
  for (let n = 0; channelShardFor(APP.id, marker, SHARDS) !== channelShardFor(APP.id, channel, SHARDS); n++) marker = `${name}-${n}`;
  await subscribe(pusher, marker);
  await flushedBy(() => pusher.unsubscribe(marker), () => verifiedEvents(receiver).some((e) => label(e) === `channel_vacated:${marker}`), `the marker channel_vacated:${marker}`, timeoutMs);
}

async function metrics(herald: HeraldProcess): Promise<Record<string, number>> {
  const res = await fetch(`${herald.baseUrl}/metrics?format=json`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { webhooks: Record<string, number> }).webhooks;
}

describe('channel webhooks through the server', () => {
  let receiver: WebhookReceiver;
  let herald: HeraldProcess;
  const clients: PusherClient[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    herald = await startHerald({ shards: SHARDS, config: heraldConfig(receiver) });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await herald?.dispose();
    await receiver?.close();
  });

  it('delivers all seven kinds, each request signed as the official SDK checks', async () => {
    const alice = await connect(herald, clients, 'alice');
    const bob = await connect(herald, clients, 'bob');
    const room = await subscribe(alice, 'presence-kinds');
    await subscribe(bob, 'presence-kinds');
    await subscribe(alice, 'cache-kinds');
    await subscribe(alice, 'kinds-public');
    expect(room.trigger('client-hello', { hi: 1 })).toBe(true);
    bob.unsubscribe('presence-kinds');
    await until(() => verifiedEvents(receiver).some((e) => e.name === 'member_removed' && e.channel === 'presence-kinds'), 'member_removed', 5000);
    alice.unsubscribe('kinds-public');
    await until(() => verifiedEvents(receiver).some((e) => label(e) === 'channel_vacated:kinds-public'), 'channel_vacated', 5000);

    const events = verifiedEvents(receiver);
    const labels = events.map(label);
    expect(labels).toEqual(expect.arrayContaining([
      'channel_occupied:presence-kinds',
      'member_added:presence-kinds:alice',
      'member_added:presence-kinds:bob',
      'member_removed:presence-kinds:bob',
      'channel_occupied:cache-kinds',
      'cache_miss:cache-kinds',
      'channel_occupied:kinds-public',
      'channel_vacated:kinds-public',
    ]));
    const clientEvent = events.find((e) => e.name === 'client_event');
    expect(clientEvent).toMatchObject({ channel: 'presence-kinds', event: 'client-hello', data: JSON.stringify({ hi: 1 }), socket_id: alice.connection.socket_id, user_id: 'alice' });
    const counts = events.filter((e) => e.name === 'subscription_count' && e.channel === 'kinds-public');
    expect(counts.map((e) => e.subscription_count)).toEqual([1, 0]);
    for (const e of events) expect(e.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
    // Within one channel, events arrive in the order they happened.
    expect(labels.filter((l) => l.includes('kinds-public') && !l.startsWith('subscription_count'))).toEqual(['channel_occupied:kinds-public', 'channel_vacated:kinds-public']);
  });

  it('holds a vacated channel for pageReloadDebounceMs: a reload (leave and rejoin) sends nothing', async () => {
    const first = await connect(herald, clients, 'carol');
    await subscribe(first, 'presence-reload');
    await until(() => verifiedEvents(receiver).some((e) => label(e) === 'member_added:presence-reload:carol'), 'first join');
    const before = verifiedEvents(receiver).filter((e) => e.channel === 'presence-reload').map(label);

    // The page reloads: the old connection goes, a new one for the same user joins within 300 ms.
    const users = async (): Promise<unknown[]> =>
      ((await (await channelsSdk(herald.port, APP).get({ path: '/channels/presence-reload/users' })).json()) as { users: unknown[] }).users;
    first.disconnect();
    await until(async () => (await users()).length === 0, 'the leave applied');
    const second = await connect(herald, clients, 'carol');
    await subscribe(second, 'presence-reload');
    // Had the join not cancelled them, the held leave events would go out before the marker's.
    await debouncedMarker(receiver, second, 'presence-reload', 'reload-marker', 5000);
    const after = verifiedEvents(receiver).filter((e) => e.channel === 'presence-reload').map(label);
    expect(after).toEqual(before);

    // A real leave is sent, once the debounce has passed.
    const left = Date.now();
    second.disconnect();
    await until(() => verifiedEvents(receiver).some((e) => label(e) === 'channel_vacated:presence-reload'), 'vacated after leave', 3000);
    expect(Date.now() - left).toBeGreaterThanOrEqual(280);
    expect(verifiedEvents(receiver).filter((e) => e.channel === 'presence-reload').map(label).slice(before.length)).toEqual([
      'member_removed:presence-reload:carol',
      'channel_vacated:presence-reload',
    ]);
  });

  it('a receiver failing N times then succeeding gets every event, with the same ids', async () => {
    const pusher = await connect(herald, clients);
    const sentBefore = (await metrics(herald)).failedAttempts;
    receiver.failNext(3, 500);
    const seen = receiver.requests.length;
    await subscribe(pusher, 'retry-one');
    await subscribe(pusher, 'retry-two');
    await until(() => ['retry-one', 'retry-two'].every((c) => verifiedEvents(receiver).some((e) => label(e) === `channel_occupied:${c}`)), 'retried events', 8000);
    const failed = receiver.requests.slice(seen).filter((r) => r.status === 500);
    expect(failed).toHaveLength(3);
    const delivered = new Map(verifiedEvents(receiver).map((e) => [e.id, e]));
    for (const req of failed) {
      for (const e of verified(req)) expect(delivered.get(e.id), `event ${e.id} delivered after failures`).toEqual(e);
    }
    const m = await metrics(herald);
    expect(m.failedAttempts - sentBefore).toBeGreaterThanOrEqual(3);
    expect(m.sent).toBeGreaterThan(0);
  });
});

describe('channel webhooks: batching', () => {
  let receiver: WebhookReceiver;
  let herald: HeraldProcess;
  const clients: PusherClient[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    // One shard, so every channel's events share one outbox queue; a wide window.
    herald = await startHerald({ shards: 1, config: heraldConfig(receiver, { batchWindowMs: 300 }) });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await herald?.dispose();
    await receiver?.close();
  });

  it('events of one app and URL within the batch window go in one request, in order', async () => {
    const pusher = await connect(herald, clients);
    const names = ['batch-a', 'batch-b', 'batch-c', 'batch-d', 'batch-e'];
    const channels = names.map((n) => pusher.subscribe(n));
    await until(() => channels.every((c) => c.subscribed), 'subscriptions');
    await until(() => verifiedEvents(receiver).filter((e) => e.name === 'channel_occupied').length === 5, 'occupied events');
    expect(receiver.requests).toHaveLength(1);
    const events = verified(receiver.requests[0]!);
    expect(events.filter((e) => e.name === 'channel_occupied').map((e) => e.channel)).toEqual(names);
    expect(events.filter((e) => e.name === 'subscription_count')).toHaveLength(5);
  });
});

/** Resolves once the shards report at least `n` webhook events pending (they happened). */
async function pendingAtLeast(herald: HeraldProcess, n: number): Promise<void> {
  let pending = 0;
  await until(
    async () => (pending = (await metrics(herald)).pending ?? 0) >= n,
    () => `${n} webhook events pending, /metrics says ${pending}`,
    5000,
  );
}

describe('channel webhooks: kill -9 with events pending', () => {
  let receiver: WebhookReceiver;
  let herald: HeraldProcess;
  const clients: PusherClient[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    herald = await startHerald({ shards: SHARDS, config: heraldConfig(receiver) });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await herald?.dispose();
    await receiver?.close();
  });

  it('loses no event when killed while the receiver fails, nor while it is down', async () => {
    // Phase 1: the receiver answers 503, so events are attempted and stay pending.
    receiver.failAll(503);
    const pusher = await connect(herald, clients);
    await subscribe(pusher, 'kill-a');
    await subscribe(pusher, 'kill-b');
    pusher.unsubscribe('kill-b'); // channel_vacated is held by the debounce at the kill
    await until(() => receiver.requests.some((r) => verified(r).some((e) => label(e) === 'channel_occupied:kill-b')), 'failed attempts');
    const attemptedIds = new Set(receiver.requests.flatMap((r) => verified(r).map((e) => e.id)));
    // occupied a, b; subscription_count a, b (1), b (0); vacated b (held).
    await pendingAtLeast(herald, 6);
    await committedOnShards(herald.baseUrl, SHARDS, 'all', 'kill-phase-1');
    await herald.kill9();

    // Phase 2: the receiver is down (connection refused) while new events happen, and Herald
    // is killed as soon as they are on disk.
    await receiver.down();
    await herald.restart();
    const again = await connect(herald, clients);
    await subscribe(again, 'kill-c');
    again.unsubscribe('kill-c');
    await pendingAtLeast(herald, 6 + 4);
    await committedOnShards(herald.baseUrl, SHARDS, 'all', 'kill-phase-2');
    await herald.kill9();

    // Phase 3: receiver healthy, Herald back: everything arrives.
    receiver.failAll(false);
    await receiver.up();
    await herald.restart();
    const expected = ['channel_occupied:kill-a', 'channel_occupied:kill-b', 'channel_vacated:kill-b', 'channel_occupied:kill-c', 'channel_vacated:kill-c'];
    await until(() => expected.every((l) => verifiedEvents(receiver).some((e) => label(e) === l)), `events after restart: ${expected.join(', ')}`, 10_000);
    const delivered = verifiedEvents(receiver);
    for (const id of attemptedIds) expect(delivered.some((e) => e.id === id), `attempted event ${id} delivered`).toBe(true);
    const vacatedB = delivered.filter((e) => label(e) === 'channel_vacated:kill-b');
    expect(new Set(vacatedB.map((e) => e.id)).size).toBe(1);
  });
});

describe('channel webhooks: channels occupied at a kill -9', () => {
  let receiver: WebhookReceiver;
  let herald: HeraldProcess;
  const clients: PusherClient[] = [];
  /** Long enough for a reconnect to fall inside it. */
  const LEAVE_DEBOUNCE_MS = 2500;
  /**
   * Every start is slower than the debounce between the shards' start and listening: the
   * debounce of the leaves found at start counts from when clients can come back, not before.
   */
  const SLOW_START_MS = LEAVE_DEBOUNCE_MS + 300;

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    herald = await startHerald({
      shards: SHARDS,
      config: heraldConfig(receiver, { pageReloadDebounceMs: LEAVE_DEBOUNCE_MS }),
      env: { HERALD_TEST_HOOKS: '1', HERALD_TEST_LISTEN_DELAY_MS: String(SLOW_START_MS) },
    });
  });
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await herald?.dispose();
    await receiver?.close();
  });

  /** Subscribes `user` to both channels, waits until the receiver has their occupied events, then kills Herald. */
  async function occupyThenKill(user: string, presence: string, plain: string): Promise<void> {
    const pusher = await connect(herald, clients, user);
    await subscribe(pusher, presence);
    await subscribe(pusher, plain);
    const occupied = [`channel_occupied:${presence}`, `member_added:${presence}:${user}`, `channel_occupied:${plain}`];
    await until(() => occupied.every((l) => verifiedEvents(receiver).some((e) => label(e) === l)), 'occupied events');
    await committedOnShards(herald.baseUrl, SHARDS, 'all', `occupied-${user}`);
    await herald.kill9();
    pusher.disconnect();
  }

  it('sends member_removed and channel_vacated after the restart when nobody comes back', async () => {
    await occupyThenKill('dana', 'presence-gone', 'gone-plain');
    const before = receiver.requests.length;
    const restarted = Date.now();
    await herald.restart();
    const expected = ['member_removed:presence-gone:dana', 'channel_vacated:presence-gone', 'channel_vacated:gone-plain'];
    await until(() => expected.every((l) => verifiedEvents(receiver).some((e) => label(e) === l)), expected.join(', '), LEAVE_DEBOUNCE_MS + 5000);
    // Through the leave debounce, like any leave.
    const firstVacated = receiver.requests.slice(before).find((r) => r.status === 200 && verified(r).some((e) => e.name === 'channel_vacated'));
    expect(firstVacated!.receivedAt - restarted).toBeGreaterThanOrEqual(LEAVE_DEBOUNCE_MS - 200);
    const presenceEvents = verifiedEvents(receiver).filter((e) => e.channel === 'presence-gone').map(label);
    expect(presenceEvents.slice(-2)).toEqual(['member_removed:presence-gone:dana', 'channel_vacated:presence-gone']);
  });

  it('sends nothing when the client subscribes again within pageReloadDebounceMs', async () => {
    await occupyThenKill('erin', 'presence-back', 'back-plain');
    const seen = verifiedEvents(receiver).length;
    await herald.restart();
    // The client reconnects (to the new port) and subscribes again, as pusher-js does.
    const again = await connect(herald, clients, 'erin');
    await subscribe(again, 'presence-back');
    await subscribe(again, 'back-plain');
    // The restarted shards held the leaves they found; had the joins not cancelled them, they would
    // go out before these markers' (held after them, on the same shards).
    await Promise.all([
      debouncedMarker(receiver, again, 'presence-back', 'back-marker-a', LEAVE_DEBOUNCE_MS + 5000),
      debouncedMarker(receiver, again, 'back-plain', 'back-marker-b', LEAVE_DEBOUNCE_MS + 5000),
    ]);
    // subscription_count follows every join and is not debounced: only occupancy events count here.
    const after = verifiedEvents(receiver)
      .slice(seen)
      .filter((e) => (e.channel === 'presence-back' || e.channel === 'back-plain') && e.name !== 'subscription_count');
    expect(after.map(label)).toEqual([]);
    expect((await metrics(herald)).suppressed).toBeGreaterThanOrEqual(3);
  });
});
