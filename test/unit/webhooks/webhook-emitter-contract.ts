/**
 * The contract every webhook emitter passes (undici's habit: one suite, every implementation):
 * what src/webhooks/emitter.ts promises on both a single node (the LMDB outbox) and a cluster
 * (the shared Redis outbox). `make` builds an outbox on a fresh store for a config; the suite
 * emits as the channel and push areas do and checks what real local receivers get. What only
 * one of them does (the LMDB outbox's leave debounce, its resume after a restart) is tested
 * beside it (outbox.test.ts).
 */
import { createHmac } from 'node:crypto';
import Pusher from 'pusher';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import type { HeraldConfig } from '../../../src/config/schema.js';
import type { ChannelEventBody, WebhookEmitter } from '../../../src/webhooks/emitter.js';
import type { WebhookStats } from '../../../src/webhooks/messages.js';
import { until } from '../../helpers/wait.js';
import { WebhookReceiver } from '../../helpers/webhook-receiver.js';

/** An outbox as the suite drives it: the emitter, and what the tests read of it. */
export interface EmitterHarness {
  emitter: WebhookEmitter;
  stats(): WebhookStats;
  close(): Promise<void>;
}

/** The config an outbox is made with: the one app and push instance of the suite. */
export type EmitterConfig = Readonly<Pick<HeraldConfig, 'apps' | 'push' | 'webhookDelivery' | 'outbound'>>;

const APP = { id: 'app-1', key: 'key-1', secret: 'secret-1' };
const INSTANCE = '0b6c9a1e-2f53-4c1b-9a55-8f0d2e7c4b11';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Setup {
  webhooks?: Array<Record<string, unknown>>;
  pushWebhooks?: Array<{ url: string; secret: string }>;
  delivery?: Record<string, unknown>;
}

export function webhookEmitterContract(name: string, make: (config: EmitterConfig) => Promise<EmitterHarness>): void {
  describe(`webhook emitter contract: ${name}`, () => {
    const cleanups: Array<() => Promise<void>> = [];
    afterEach(async () => {
      for (const c of cleanups.splice(0).reverse()) await c();
    }, 30_000);

    async function receiver(): Promise<WebhookReceiver> {
      const r = await WebhookReceiver.start();
      cleanups.push(() => r.close());
      return r;
    }

    async function open(setup: Setup): Promise<EmitterHarness> {
      const config = parseConfig({
        apps: [{ ...APP, webhooks: setup.webhooks ?? [] }],
        push: [{ instanceId: INSTANCE, secretKey: 'push-secret', webhooks: setup.pushWebhooks ?? [] }],
        // A leave debounce of a minute: an event held by it would not arrive during a test.
        webhookDelivery: { batchWindowMs: 30, pageReloadDebounceMs: 60_000, maxAttempts: 5, timeoutMs: 2000, retryBaseMs: 50, concurrencyPerUrl: 4, ...setup.delivery },
        // The receivers are on loopback.
        outbound: { allowPrivateAddresses: ['127.0.0.1'] },
      });
      const h = await make(config);
      cleanups.push(() => h.close());
      return h;
    }

    const emit = (h: EmitterHarness, event: ChannelEventBody): void => h.emitter.channelEvent({ appId: APP.id, event });

    it('delivers channel events signed with the app credentials, in the order emitted, each with an id', async () => {
      const r = await receiver();
      const h = await open({ webhooks: [{ url: r.url() }] });
      emit(h, { name: 'channel_occupied', channel: 'presence-room' });
      emit(h, { name: 'member_added', channel: 'presence-room', user_id: 'u1' });
      emit(h, { name: 'client_event', channel: 'presence-room', event: 'client-typing', data: '{"a":1}', socket_id: '1.2', user_id: 'u1' });
      emit(h, { name: 'subscription_count', channel: 'presence-room', subscription_count: 3 });
      await until(() => r.deliveredEvents().length === 4, () => `four events delivered: ${JSON.stringify(r.deliveredEvents())}`, 10_000);
      const events = r.deliveredEvents();
      expect(events.map((e) => e.name)).toEqual(['channel_occupied', 'member_added', 'client_event', 'subscription_count']);
      expect(events[2]).toMatchObject({ channel: 'presence-room', event: 'client-typing', data: '{"a":1}', socket_id: '1.2', user_id: 'u1' });
      for (const e of events) expect(e.id).toMatch(UUID);
      expect(new Set(events.map((e) => e.id)).size).toBe(4);
      const pusher = new Pusher({ appId: APP.id, key: APP.key, secret: APP.secret, host: '127.0.0.1' });
      for (const req of r.requests) {
        expect(req.headers['x-pusher-key']).toBe(APP.key);
        expect(pusher.webhook({ headers: req.headers, rawBody: req.rawBody }).isValid()).toBe(true);
      }
      await until(() => h.stats().pending === 0, 'nothing pending');
      expect(h.stats()).toMatchObject({ sent: 4, failedAttempts: 0, deadLettered: 0 });
    });

    it("applies each receiver's events list and channel-name prefix filter; one event has one id at every receiver", async () => {
      const all = await receiver();
      const some = await receiver();
      const h = await open({
        webhooks: [{ url: all.url() }, { url: some.url(), events: ['channel_occupied', 'channel_vacated'], filter: { channelNamePrefix: 'private-' } }],
      });
      emit(h, { name: 'channel_occupied', channel: 'private-a' });
      emit(h, { name: 'channel_occupied', channel: 'public-b' });
      emit(h, { name: 'cache_miss', channel: 'private-a' });
      await until(() => all.deliveredEvents().length === 3 && some.deliveredEvents().length === 1, 'every receiver served', 10_000);
      expect(some.deliveredEvents().map((e) => `${e.name}:${e.channel}`)).toEqual(['channel_occupied:private-a']);
      expect(some.deliveredEvents()[0]!.id).toBe(all.deliveredEvents()[0]!.id);
    });

    it('sends an event emitted debounced or retired at once, whatever the leave debounce', async () => {
      const r = await receiver();
      const h = await open({ webhooks: [{ url: r.url() }] });
      h.emitter.channelEvent({ appId: APP.id, event: { name: 'channel_vacated', channel: 'decided' } }, { debounced: true });
      h.emitter.channelEvent({ appId: APP.id, event: { name: 'member_removed', channel: 'presence-gone', user_id: 'u1' } }, { retired: true });
      await until(() => r.deliveredEvents().length === 2, 'both delivered well within the minute of the debounce', 10_000);
      // Two emits may leave in two batches, sent concurrently (concurrencyPerUrl): no order between them.
      expect(r.deliveredEvents().map((e) => e.name).sort()).toEqual(['channel_vacated', 'member_removed']);
    });

    it('retries a failing receiver until it succeeds, with the same ids', async () => {
      const r = await receiver();
      r.failNext(2, 503);
      const h = await open({ webhooks: [{ url: r.url() }] });
      emit(h, { name: 'channel_occupied', channel: 'a' });
      await until(() => r.delivered().length === 1, 'the delivery after two failures', 10_000);
      expect(r.requests.length).toBe(3);
      const ids = r.requests.map((q) => (JSON.parse(q.rawBody) as { events: Array<{ id: string }> }).events.map((e) => e.id).join());
      expect(new Set(ids).size).toBe(1);
      await until(() => h.stats().pending === 0, 'nothing pending');
      expect(h.stats()).toMatchObject({ sent: 1, failedAttempts: 2, deadLettered: 0 });
    });

    it('dead-letters after maxAttempts, counted and stored', async () => {
      const r = await receiver();
      r.failAll(502);
      const h = await open({ webhooks: [{ url: r.url() }], delivery: { maxAttempts: 2, retryBaseMs: 20 } });
      emit(h, { name: 'channel_occupied', channel: 'doomed' });
      await until(() => h.stats().deadLettered === 1 && h.stats().deadLetterStored === 1, () => `one dead letter stored: ${JSON.stringify(h.stats())}`, 10_000);
      expect(r.requests).toHaveLength(2);
      expect(h.stats()).toMatchObject({ sent: 0, failedAttempts: 2, pending: 0 });
    });

    it('push: instance webhooks signed per receiver (HMAC-SHA1), per-publish URLs as is and unsigned, a non-http URL dropped', async () => {
      const a = await receiver();
      const publish = await receiver();
      const h = await open({ pushWebhooks: [{ url: a.url('/a'), secret: 'secret-a' }] });
      const payload = { instance_id: INSTANCE, publish_id: 'pubid-1', user_id: 'u1' };
      h.emitter.pushEvent({ instanceId: INSTANCE, kind: 'v1.UserNotificationOpen', payload });
      const finished = { publishId: 'pubid-1', status: 'FINISHED' };
      h.emitter.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload: finished, url: 'ftp://example.invalid/' });
      h.emitter.pushEvent({ instanceId: INSTANCE, kind: 'publish.FINISHED', payload: finished, url: publish.url('/publish') });
      await until(() => a.delivered().length === 1 && publish.delivered().length === 1, 'both delivered', 10_000);
      const req = a.requests[0]!;
      expect(req.headers['webhook-event-type']).toBe('v1.UserNotificationOpen');
      expect(req.headers['webhook-signature']).toBe(createHmac('sha1', 'secret-a').update(req.rawBody).digest('hex'));
      const body = JSON.parse(req.rawBody) as { payload: unknown; metadata: Record<string, string> };
      expect(body.payload).toEqual(payload);
      expect(body.metadata).toMatchObject({ event_type: 'v1.UserNotificationOpen', product: 'beams' });
      expect(req.headers['x-herald-event-id']).toBe(body.metadata.event_id);
      const sent = publish.requests[0]!;
      expect(JSON.parse(sent.rawBody)).toEqual(finished);
      expect(sent.headers['webhook-signature']).toBeUndefined();
      await until(() => h.stats().pending === 0, 'nothing pending');
      expect(h.stats()).toMatchObject({ sent: 2, deadLettered: 0 });
    });
  });
}
