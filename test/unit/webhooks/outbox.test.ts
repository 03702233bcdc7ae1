/**
 * The webhook outbox driven directly, with a real LMDB environment in a temp dir and real
 * local HTTP receivers: batching, order, retries, per-URL isolation, dead letters, the reload
 * debounce, resume after a restart, and the push webhook formats.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHmac } from 'node:crypto';
import Pusher from 'pusher';
import type { RootDatabase } from 'lmdb';
import { parseConfig } from '../../../src/config/load.js';
import { openShardDatabase } from '../../../src/shards/storage.js';
import { WebhookOutbox } from '../../../src/webhooks/outbox.js';
import type { ChannelEventBody } from '../../../src/webhooks/emitter.js';
import { WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ManualClock } from '../../helpers/manual-clock.js';
import { until } from '../../helpers/wait.js';

const APP = { id: 'app-1', key: 'key-1', secret: 'secret-1' };
const INSTANCE = '0b6c9a1e-2f53-4c1b-9a55-8f0d2e7c4b11';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function receiver(): Promise<WebhookReceiver> {
  const r = await WebhookReceiver.start();
  cleanups.push(() => r.close());
  return r;
}

interface Setup {
  webhooks?: Array<Record<string, unknown>>;
  pushWebhooks?: Array<{ url: string; secret: string }>;
  delivery?: Record<string, unknown>;
  dir?: string;
  /** `outbound.allowPrivateAddresses`; default the test receivers' 127.0.0.1. */
  allowPrivateAddresses?: string[];
  /** The delivery engine's clock; real time by default. */
  clock?: ManualClock;
}

/** An outbox on a (new or given) data dir; closed and removed after the test. */
function openOutbox(setup: Setup): { outbox: WebhookOutbox; root: RootDatabase; dir: string; close: () => Promise<void> } {
  const config = parseConfig({
    apps: [{ ...APP, webhooks: setup.webhooks ?? [] }],
    push: [{ instanceId: INSTANCE, secretKey: 'push-secret', webhooks: setup.pushWebhooks ?? [] }],
    webhookDelivery: { batchWindowMs: 30, pageReloadDebounceMs: 300, maxAttempts: 5, timeoutMs: 2000, retryBaseMs: 50, concurrencyPerUrl: 4, ...setup.delivery },
    // Per-publish webhookUrls reach public addresses only, unless allowed: the receivers here are on loopback.
    outbound: { allowPrivateAddresses: setup.allowPrivateAddresses ?? ['127.0.0.1'] },
  });
  const dir = setup.dir ?? mkdtempSync(join(tmpdir(), 'herald-outbox-'));
  if (!setup.dir) cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const root = openShardDatabase(join(dir, 'shard-0'));
  const outbox = new WebhookOutbox({ root, config, shardIndex: 0, ...(setup.clock ? { clock: setup.clock } : {}) });
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    await outbox.close();
    await root.close();
  };
  cleanups.push(close);
  return { outbox, root, dir, close };
}

function emit(outbox: WebhookOutbox, event: ChannelEventBody): void {
  outbox.channelEvent({ appId: APP.id, event });
}

/** The official server SDK, used here only to check webhook signatures. */
const sdk = (secret: string): Pusher => new Pusher({ appId: APP.id, key: APP.key, secret, host: '127.0.0.1' });

/**
 * Fires the outbox's timers on `clock` one at a time, each once the requests before it were
 * answered (the retry or release it sets is then in place), until `done` holds.
 */
async function runTimers(clock: ManualClock, outbox: WebhookOutbox, done: () => boolean, what: string): Promise<void> {
  await until(() => {
    if (done()) return true;
    if (outbox.stats().inFlight === 0 && clock.pending > 0) clock.advanceToNext();
    return false;
  }, what);
}

/** Every timer fired and every request answered: nothing more will be sent. */
const idle = (clock: ManualClock, outbox: WebhookOutbox) => (): boolean => clock.pending === 0 && outbox.stats().inFlight === 0;

describe('channel webhooks: format and batching', () => {
  it('sends events of one window in one signed request, in order, each with an id', async () => {
    const r = await receiver();
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], clock });
    emit(outbox, { name: 'channel_occupied', channel: 'presence-room' });
    emit(outbox, { name: 'member_added', channel: 'presence-room', user_id: 'u1' });
    emit(outbox, { name: 'client_event', channel: 'presence-room', event: 'client-typing', data: '{"a":1}', socket_id: '1.2', user_id: 'u1' });
    emit(outbox, { name: 'cache_miss', channel: 'cache-news' });
    emit(outbox, { name: 'subscription_count', channel: 'news', subscription_count: 3 });
    // Nothing goes out before the batch window (30 ms) has passed.
    clock.advance(29);
    expect(outbox.stats().inFlight).toBe(0);
    await runTimers(clock, outbox, idle(clock, outbox), 'the batch sent and answered');
    expect(r.requests).toHaveLength(1);
    const req = r.requests[0]!;
    expect(req.method).toBe('POST');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['x-pusher-key']).toBe(APP.key);
    expect(req.headers['x-pusher-signature']).toBe(createHmac('sha256', APP.secret).update(req.rawBody).digest('hex'));
    const pusher = sdk(APP.secret);
    const hook = pusher.webhook({ headers: req.headers, rawBody: req.rawBody });
    expect(hook.isValid()).toBe(true);
    expect(Math.abs(hook.getTime().getTime() - Date.now())).toBeLessThan(5000);
    const events = hook.getEvents() as unknown as Array<Record<string, unknown>>;
    expect(events.map((e) => e.name)).toEqual(['channel_occupied', 'member_added', 'client_event', 'cache_miss', 'subscription_count']);
    expect(events[1]).toMatchObject({ channel: 'presence-room', user_id: 'u1' });
    expect(events[2]).toMatchObject({ event: 'client-typing', data: '{"a":1}', socket_id: '1.2', user_id: 'u1' });
    expect(events[4]).toMatchObject({ channel: 'news', subscription_count: 3 });
    for (const e of events) expect(e.id).toMatch(UUID);
    expect(new Set(events.map((e) => e.id)).size).toBe(5);
    // A wrong secret does not validate.
    expect(sdk('other').webhook({ headers: req.headers, rawBody: req.rawBody }).isValid()).toBe(false);
    expect(outbox.stats()).toMatchObject({ sent: 5, requests: 1, failedAttempts: 0, pending: 0 });
  });

  it('applies each receiver\'s events list and channel-name prefix filter', async () => {
    const all = await receiver();
    const some = await receiver();
    const { outbox } = openOutbox({
      webhooks: [
        { url: all.url() },
        { url: some.url(), events: ['channel_occupied', 'channel_vacated'], filter: { channelNamePrefix: 'private-' } },
      ],
      delivery: { pageReloadDebounceMs: 0 },
    });
    emit(outbox, { name: 'channel_occupied', channel: 'private-a' });
    emit(outbox, { name: 'channel_occupied', channel: 'public-b' });
    emit(outbox, { name: 'cache_miss', channel: 'private-a' });
    emit(outbox, { name: 'channel_vacated', channel: 'private-a' });
    await until(() => all.deliveredEvents().length === 4, 'all.deliveredEvents().length === 4', 5000);
    await until(() => some.deliveredEvents().length === 2, 'some.deliveredEvents().length === 2', 5000);
    expect(some.deliveredEvents().map((e) => `${e.name}:${e.channel}`)).toEqual(['channel_occupied:private-a', 'channel_vacated:private-a']);
    // The same event carries the same id at every receiver.
    expect(some.deliveredEvents()[0]!.id).toBe(all.deliveredEvents()[0]!.id);
  });

  it('sends the credentials of a receiver URL as Basic authorization', async () => {
    const r = await receiver();
    const url = r.url('/auth').replace('http://', 'http://hook:pa%24s@');
    const { outbox } = openOutbox({ webhooks: [{ url }] });
    emit(outbox, { name: 'channel_occupied', channel: 'auth' });
    await until(() => r.delivered().length === 1, 'r.delivered().length === 1', 5000);
    expect(r.requests[0]!.path).toBe('/auth');
    expect(r.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from('hook:pa$s').toString('base64')}`);
  });

  it('splits a large backlog into requests of at most 100 events, keeping the order (one connection)', async () => {
    const r = await receiver();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], delivery: { concurrencyPerUrl: 1 } });
    for (let i = 0; i < 250; i++) emit(outbox, { name: 'subscription_count', channel: 'c', subscription_count: i });
    await until(() => r.deliveredEvents().length === 250, 'r.deliveredEvents().length === 250', 5000);
    expect(r.requests.map((q) => (JSON.parse(q.rawBody) as { events: unknown[] }).events.length)).toEqual([100, 100, 50]);
    expect(r.deliveredEvents().map((e) => e.subscription_count)).toEqual([...Array(250).keys()]);
  });

  it('keeps at most concurrencyPerUrl requests open to one URL', async () => {
    const r = await receiver();
    r.setDelay(200);
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], delivery: { concurrencyPerUrl: 2 } });
    for (let i = 0; i < 500; i++) emit(outbox, { name: 'subscription_count', channel: 'c', subscription_count: i });
    await until(() => r.deliveredEvents().length === 500, 'r.deliveredEvents().length === 500', 5000);
    expect(r.requests).toHaveLength(5);
    expect(r.maxConcurrent).toBe(2);
  });
});

describe('channel webhooks: retries, isolation and dead letters', () => {
  it('retries a failing receiver with backoff until it succeeds; every event arrives with the same id', async () => {
    const r = await receiver();
    r.failNext(3, 500);
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], clock });
    emit(outbox, { name: 'channel_occupied', channel: 'a' });
    emit(outbox, { name: 'channel_occupied', channel: 'b' });
    clock.advance(30);
    // The wait before each retry, read from the clock once the failed attempt is settled.
    const gaps: number[] = [];
    for (let failed = 1; failed <= 3; failed++) {
      await until(() => outbox.stats().failedAttempts === failed && outbox.stats().inFlight === 0, `failed attempt ${failed}`);
      gaps.push(clock.nextDue() - clock.now());
      clock.advanceToNext();
    }
    await until(() => r.delivered().length >= 1, 'the delivery after three failures');
    expect(r.requests.length).toBe(4);
    const failedBodies = r.requests.slice(0, 3).map((q) => JSON.parse(q.rawBody) as { events: Array<{ id: string }> });
    const delivered = r.deliveredEvents();
    expect(delivered.map((e) => e.channel)).toEqual(['a', 'b']);
    for (const body of failedBodies) expect(body.events.map((e) => e.id)).toEqual(delivered.map((e) => e.id));
    // Backoff: base 50 ms, doubled with each attempt, jittered between half and all of it.
    expect(gaps[0]).toBeGreaterThanOrEqual(25);
    expect(gaps[0]).toBeLessThanOrEqual(50);
    expect(gaps[1]).toBeGreaterThanOrEqual(50);
    expect(gaps[1]).toBeLessThanOrEqual(100);
    expect(gaps[2]).toBeGreaterThanOrEqual(100);
    expect(gaps[2]).toBeLessThanOrEqual(200);
    // Every retried request is signed again (time_ms changes with each attempt).
    const pusher = sdk(APP.secret);
    for (const q of r.requests) expect(pusher.webhook({ headers: q.headers, rawBody: q.rawBody }).isValid()).toBe(true);
    await until(() => outbox.stats().pending === 0, 'the delivered entries removed');
    expect(outbox.stats()).toMatchObject({ sent: 2, requests: 1, failedAttempts: 3, deadLettered: 0, pending: 0 });
  });

  it('treats a timeout as a failed attempt and retries', async () => {
    const r = await receiver();
    r.setDelay(400);
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], delivery: { timeoutMs: 150 } });
    emit(outbox, { name: 'channel_occupied', channel: 'slow' });
    await until(() => outbox.stats().failedAttempts >= 1, 'the first attempt timed out');
    r.setDelay(0);
    await until(() => r.delivered().length >= 1, 'r.delivered().length >= 1', 5000);
    expect(outbox.stats().failedAttempts).toBeGreaterThanOrEqual(1);
    expect(r.deliveredEvents()[0]).toMatchObject({ name: 'channel_occupied', channel: 'slow' });
  });

  it('a slow or failing receiver does not delay another one', async () => {
    const slow = await receiver();
    const failing = await receiver();
    const healthy = await receiver();
    // The slow receiver answers nothing during the test (one request open at a time).
    slow.setDelay(60_000);
    failing.failAll(503);
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: slow.url() }, { url: failing.url() }, { url: healthy.url() }], delivery: { concurrencyPerUrl: 1 }, clock });
    for (let round = 0; round < 5; round++) {
      emit(outbox, { name: 'channel_occupied', channel: `c${round}` });
      clock.advance(60);
      // Each healthy request goes out one batch window after its event, not behind the others.
      await until(() => healthy.deliveredEvents().length === round + 1, `healthy delivery ${round + 1}`);
    }
    expect(healthy.requests.length).toBe(5);
    expect(slow.delivered().length).toBe(0);
    expect(failing.delivered().length).toBe(0);
  });

  it('dead-letters after maxAttempts: kept in LMDB, logged with url and attempts, counted', async () => {
    const r = await receiver();
    r.failAll(502);
    const warnings: string[] = [];
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      if (String(chunk).includes('"level":"warn"')) warnings.push(String(chunk));
      return true;
    });
    cleanups.push(() => spy.mockRestore());
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], delivery: { maxAttempts: 3, retryBaseMs: 20 }, clock });
    emit(outbox, { name: 'channel_occupied', channel: 'doomed' });
    emit(outbox, { name: 'cache_miss', channel: 'doomed' });
    await runTimers(clock, outbox, () => outbox.stats().deadLettered === 2, 'two dead letters');
    expect(r.requests).toHaveLength(3);
    expect(outbox.stats()).toMatchObject({ failedAttempts: 3, deadLettered: 2, pending: 0, deadLetterStored: 2, sent: 0 });
    await outbox.flushed();
    const dead = outbox.deadLetters();
    expect(dead.map((d) => d.entry.event?.name).sort()).toEqual(['cache_miss', 'channel_occupied']);
    expect(dead[0]).toMatchObject({ reason: 'HTTP 502', entry: { attempts: 3, target: { kind: 'channel', url: r.url() } } });
    const line = warnings.find((w) => w.includes('webhook dead-lettered'));
    expect(line).toBeDefined();
    expect(JSON.parse(line!)).toMatchObject({ url: r.url(), attempts: 3, events: 2, appId: APP.id });
    expect(line).not.toContain(APP.secret);
    // Nothing more is tried: no timer is left.
    expect(clock.pending).toBe(0);
    expect(r.requests).toHaveLength(3);
  });
});

describe('channel webhooks: leave debounce', () => {
  it('holds channel_vacated for pageReloadDebounceMs, then sends it', async () => {
    const r = await receiver();
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], clock });
    const at = clock.now();
    emit(outbox, { name: 'channel_vacated', channel: 'gone' });
    expect(outbox.stats()).toMatchObject({ pending: 1, held: 1 });
    clock.advance(299);
    expect(outbox.stats()).toMatchObject({ pending: 1, inFlight: 0 });
    await runTimers(clock, outbox, () => r.delivered().length === 1, 'the vacate delivered');
    expect(clock.now() - at).toBeGreaterThanOrEqual(300);
    expect(r.deliveredEvents()[0]).toMatchObject({ name: 'channel_vacated', channel: 'gone' });
  });

  it('a re-occupy (same user re-added) within the window sends neither event', async () => {
    const r = await receiver();
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], clock });
    emit(outbox, { name: 'member_removed', channel: 'presence-p', user_id: 'u1' });
    emit(outbox, { name: 'channel_vacated', channel: 'presence-p' });
    clock.advance(100);
    emit(outbox, { name: 'channel_occupied', channel: 'presence-p' });
    emit(outbox, { name: 'member_added', channel: 'presence-p', user_id: 'u1' });
    emit(outbox, { name: 'client_event', channel: 'presence-p', event: 'client-x', data: '1', socket_id: '1.1', user_id: 'u1' });
    await runTimers(clock, outbox, idle(clock, outbox), 'every timer fired');
    expect(r.deliveredEvents().map((e) => e.name)).toEqual(['client_event']);
    expect(outbox.stats()).toMatchObject({ suppressed: 2, pending: 0, held: 0 });
  });

  it('a different user, or a re-occupy after the window, is not suppressed', async () => {
    const r = await receiver();
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], clock });
    const at = clock.now();
    emit(outbox, { name: 'member_removed', channel: 'presence-q', user_id: 'u1' });
    emit(outbox, { name: 'member_added', channel: 'presence-q', user_id: 'u2' });
    emit(outbox, { name: 'channel_vacated', channel: 'late' });
    // Past the 300 ms window, each request answered before the next timer fires.
    await runTimers(clock, outbox, () => clock.now() - at >= 300 && idle(clock, outbox)(), 'the window over');
    clock.advance(150);
    emit(outbox, { name: 'channel_occupied', channel: 'late' });
    await runTimers(clock, outbox, () => r.deliveredEvents().length === 4, 'four events delivered');
    expect(r.deliveredEvents().map((e) => `${e.name}:${String(e.user_id ?? e.channel)}`)).toEqual([
      'member_added:u2',
      'member_removed:u1',
      'channel_vacated:late',
      'channel_occupied:late',
    ]);
  });

  it('a hold cancels the re-occupy even for a receiver that does not want channel_vacated', async () => {
    const r = await receiver();
    const clock = new ManualClock();
    const { outbox } = openOutbox({ webhooks: [{ url: r.url(), events: ['channel_occupied', 'cache_miss'] }], clock });
    emit(outbox, { name: 'channel_occupied', channel: 'x' });
    emit(outbox, { name: 'channel_vacated', channel: 'x' });
    emit(outbox, { name: 'channel_occupied', channel: 'x' });
    emit(outbox, { name: 'cache_miss', channel: 'marker' });
    await runTimers(clock, outbox, idle(clock, outbox), 'every timer fired');
    expect(r.deliveredEvents().map((e) => e.name)).toEqual(['channel_occupied', 'cache_miss']);
  });
});

describe('durability: resume after a restart', () => {
  it('entries written before a stop are delivered by the next outbox on the same data, with the same ids', async () => {
    const r = await receiver();
    r.failAll(503);
    const first = openOutbox({ webhooks: [{ url: r.url() }], delivery: { maxAttempts: 50 } });
    emit(first.outbox, { name: 'channel_occupied', channel: 'kept' });
    emit(first.outbox, { name: 'channel_vacated', channel: 'held' });
    await until(() => r.requests.length >= 1, 'r.requests.length >= 1', 5000);
    const failedIds = (JSON.parse(r.requests[0]!.rawBody) as { events: Array<{ id: string }> }).events.map((e) => e.id);
    await first.outbox.flushed();
    await first.close();

    r.failAll(false);
    const second = openOutbox({ webhooks: [{ url: r.url() }], dir: first.dir });
    expect(second.outbox.stats()).toMatchObject({ pending: 2 });
    await until(() => r.deliveredEvents().length === 2, 'r.deliveredEvents().length === 2', 3000);
    const delivered = r.deliveredEvents();
    expect(delivered.map((e) => e.name)).toEqual(['channel_occupied', 'channel_vacated']);
    expect(delivered[0]!.id).toBe(failedIds[0]);
    await second.outbox.flushed();
    await second.close();

    // Delivered entries are gone from LMDB: a third start sends nothing.
    const third = openOutbox({ webhooks: [{ url: r.url() }], dir: first.dir });
    expect(third.outbox.stats().pending).toBe(0);
  });

  it('events emitted while closing are stored and sent after the next start', async () => {
    const r = await receiver();
    r.setDelay(300);
    const first = openOutbox({ webhooks: [{ url: r.url() }] });
    emit(first.outbox, { name: 'channel_occupied', channel: 'before-close' });
    await until(() => first.outbox.stats().inFlight === 1, 'the first request open');
    const closing = first.close();
    emit(first.outbox, { name: 'channel_occupied', channel: 'while-closing' });
    await closing;
    expect(r.deliveredEvents().map((e) => e.channel)).toEqual(['before-close']);

    r.setDelay(0);
    const second = openOutbox({ webhooks: [{ url: r.url() }], dir: first.dir });
    await until(() => r.deliveredEvents().length === 2, 'r.deliveredEvents().length === 2', 5000);
    expect(r.deliveredEvents().map((e) => e.channel)).toEqual(['before-close', 'while-closing']);
    await until(() => second.outbox.stats().pending === 0, 'nothing pending');
  });

  it('entries for a receiver no longer in the config are dead-lettered on start', async () => {
    const r = await receiver();
    r.failAll(503);
    const first = openOutbox({ webhooks: [{ url: r.url() }], delivery: { maxAttempts: 50 } });
    emit(first.outbox, { name: 'channel_occupied', channel: 'orphan' });
    await first.outbox.flushed();
    await first.close();
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    cleanups.push(() => spy.mockRestore());
    const second = openOutbox({ webhooks: [], dir: first.dir });
    expect(second.outbox.stats()).toMatchObject({ pending: 0, deadLettered: 1, deadLetterStored: 1 });
    await second.outbox.flushed();
    expect(second.outbox.deadLetters()[0]!.reason).toBe('receiver no longer configured');
  });
});

describe('push webhooks', () => {
  it('instance webhooks: Beams body, HMAC-SHA1 signature per webhook secret, event type header', async () => {
    const a = await receiver();
    const b = await receiver();
    const { outbox } = openOutbox({ pushWebhooks: [{ url: a.url('/a'), secret: 'secret-a' }, { url: b.url('/b'), secret: 'secret-b' }] });
    const payload = { instance_id: INSTANCE, publish_id: 'pubid-1', users_delivered_to_gateway: ['u1'], users_no_devices: [], users_gateway_failed: [] };
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'v1.PublishToUsersAttempt', payload });
    await until(() => a.delivered().length === 1, 'a.delivered().length === 1', 5000);
    await until(() => b.delivered().length === 1, 'b.delivered().length === 1', 5000);
    const ids = new Set<string>();
    for (const [r, secret, path] of [[a, 'secret-a', '/a'], [b, 'secret-b', '/b']] as const) {
      const req = r.requests[0]!;
      expect(req.path).toBe(path);
      expect(req.headers['content-type']).toBe('application/json');
      expect(req.headers['webhook-event-type']).toBe('v1.PublishToUsersAttempt');
      expect(req.headers['webhook-signature']).toBe(createHmac('sha1', secret).update(req.rawBody).digest('hex'));
      const body = JSON.parse(req.rawBody) as { payload: unknown; metadata: Record<string, string> };
      expect(body.payload).toEqual(payload);
      expect(body.metadata).toMatchObject({ event_type: 'v1.PublishToUsersAttempt', product: 'beams' });
      expect(body.metadata.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000$/);
      expect(body.metadata.event_id).toMatch(UUID);
      expect(req.headers['x-herald-event-id']).toBe(body.metadata.event_id);
      ids.add(body.metadata.event_id!);
    }
    expect(ids.size).toBe(1);
  });

  it('retries an instance webhook with the same bytes, and sends one request per event', async () => {
    const r = await receiver();
    r.failNext(2, 500);
    const { outbox } = openOutbox({ pushWebhooks: [{ url: r.url(), secret: 's' }] });
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'v1.UserNotificationOpen', payload: { instance_id: INSTANCE, publish_id: 'p1', user_id: 'u1' } });
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'v1.UserNotificationAcknowledgement', payload: { instance_id: INSTANCE, publish_id: 'p1', user_id: 'u1' } });
    await until(() => r.delivered().length === 2, 'r.delivered().length === 2', 5000);
    const types = r.delivered().map((q) => q.headers['webhook-event-type']).sort();
    expect(types).toEqual(['v1.UserNotificationAcknowledgement', 'v1.UserNotificationOpen']);
    const byId = new Map<string, Set<string>>();
    for (const q of r.requests) {
      const id = q.headers['x-herald-event-id']!;
      byId.set(id, (byId.get(id) ?? new Set()).add(q.rawBody));
    }
    expect(byId.size).toBe(2);
    for (const bodies of byId.values()) expect(bodies.size).toBe(1);
  });

  it('per-publish webhookUrl: the payload as-is, unsigned', async () => {
    const r = await receiver();
    const { outbox } = openOutbox({});
    const payload = { publishId: 'pubid-9', status: 'FINISHED', results: { apns: { sent: 1, failed: 0 } } };
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload, url: r.url('/publish') });
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload, url: 'ftp://example.invalid/' });
    await until(() => r.delivered().length === 1, 'r.delivered().length === 1', 5000);
    const req = r.requests[0]!;
    expect(JSON.parse(req.rawBody)).toEqual(payload);
    expect(req.headers['webhook-signature']).toBeUndefined();
    expect(req.headers['content-type']).toBe('application/json');
    await until(() => outbox.stats().pending === 0, 'nothing pending');
    expect(outbox.stats()).toMatchObject({ sent: 1, pending: 0 });
  });

  it('per-publish webhookUrl on a loopback address: never connected to, dead-lettered at the first attempt; receivers from the config still are', async () => {
    const publishReceiver = await receiver();
    const configured = await receiver();
    const { outbox } = openOutbox({ allowPrivateAddresses: [], pushWebhooks: [{ url: configured.url('/instance'), secret: 'hook-secret' }] });
    const payload = { publishId: 'pubid-ssrf', status: 'FINISHED' };
    // By address and by name (localhost resolves to loopback: refused when Herald connects).
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload, url: publishReceiver.url('/by-address') });
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload, url: `http://localhost:${publishReceiver.port}/by-name` });
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'v1.UserNotificationAcknowledgement', payload: { publishId: 'pubid-ssrf', userId: 'u' } });
    await until(() => configured.delivered().length === 1, 'configured.delivered().length === 1', 5000);
    // The configured receiver's answer is read a moment after it recorded the request.
    await until(() => outbox.stats().deadLettered === 2 && outbox.stats().pending === 0, () => `two dead letters, nothing pending: ${JSON.stringify(outbox.stats())}`, 5000);
    expect(outbox.stats()).toMatchObject({ deadLettered: 2, failedAttempts: 2, pending: 0 });
    await outbox.flushed();
    const reasons = outbox.deadLetters().map((d) => d.reason).sort();
    expect(reasons[0]).toMatch(/^refused: address 127\.0\.0\.1 is a loopback address, not a public one/);
    expect(reasons[1]).toMatch(/^refused: localhost resolves to (127\.0\.0\.1|::1), which is a loopback address/);
    expect(outbox.deadLetters().every((d) => d.entry.attempts === 1)).toBe(true);
    expect(publishReceiver.requests).toHaveLength(0);
  });

  it('does not follow a redirect: a 3xx is a failed attempt and the Location is never asked', async () => {
    const target = await receiver();
    const redirecting = createServer((req, res) => {
      req.resume();
      res.writeHead(307, { location: target.url('/moved') }).end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => redirecting.close(() => resolve())));
    const { outbox } = openOutbox({ delivery: { maxAttempts: 1 } });
    const url = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/hook`;
    outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload: { publishId: 'pubid-redirect' }, url });
    await until(() => outbox.stats().deadLettered === 1, 'the dead letter', 5000);
    await outbox.flushed();
    expect(outbox.deadLetters()[0]!.reason).toBe('HTTP 307');
    expect(target.requests).toHaveLength(0);
  });

  it('forgets a receiver once its queue is empty (one-off webhookUrls do not pile up)', async () => {
    const r = await receiver();
    const { outbox } = openOutbox({});
    for (let i = 0; i < 20; i++) {
      outbox.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload: { publishId: `p${i}` }, url: r.url(`/publish/${i}`) });
    }
    expect(outbox.stats()).toMatchObject({ pending: 20, receivers: 20 });
    await until(() => r.delivered().length === 20, 'r.delivered().length === 20', 5000);
    await until(() => outbox.stats().receivers === 0, 'every receiver forgotten');
    expect(outbox.stats()).toMatchObject({ sent: 20, pending: 0, receivers: 0, inFlight: 0 });
  });
});

describe('drain: what a stopping node sends before it goes', () => {
  it('resolves once every due event had its first attempt; held events stay for the next start', async () => {
    const r = await receiver();
    r.setDelay(200);
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }], delivery: { pageReloadDebounceMs: 5000 } });
    emit(outbox, { name: 'channel_occupied', channel: 'due' });
    // Held by the leave debounce (5 s): not waited for.
    emit(outbox, { name: 'channel_vacated', channel: 'held' });
    const started = Date.now();
    expect(await outbox.drain(5000)).toBe(0);
    // The answer took 200 ms: drain waited for it, and not for the held vacate.
    expect(r.delivered().map((q) => JSON.parse(q.rawBody).events.map((e: { name: string }) => e.name))).toEqual([['channel_occupied']]);
    expect(Date.now() - started).toBeLessThan(4000);
    expect(outbox.stats().pending).toBe(1);
  });

  it('gives up after waitMs, with how many due events had no finished attempt', async () => {
    const r = await receiver();
    r.setDelay(1500);
    const { outbox } = openOutbox({ webhooks: [{ url: r.url() }] });
    emit(outbox, { name: 'channel_occupied', channel: 'slow' });
    const started = Date.now();
    expect(await outbox.drain(300)).toBe(1);
    expect(Date.now() - started).toBeLessThan(1200);
  });
});
