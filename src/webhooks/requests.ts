/**
 * The HTTP requests of the three webhook kinds: channel webhooks (Pusher format, batched),
 * instance push webhooks (Beams format) and per-publish `webhookUrl` deliveries.
 */
import { randomUUID } from 'node:crypto';
import type { WebhookRequest } from './http-sender.js';
import type { OutboxEntry } from './outbox-store.js';
import { beamsTimestamp, channelWebhookSignature, pushWebhookSignature } from './signing.js';

/** Sent on every request so receivers can tell Herald's calls apart in their logs. */
export const USER_AGENT = 'herald-webhooks';
/** Header carrying the event id on push and per-publish requests (one event per request). */
export const EVENT_ID_HEADER = 'X-Herald-Event-Id';

/** A webhook request: JSON `body` with the headers every kind carries, then the kind's own `headers`. */
function jsonRequest(url: string, body: string, headers: Record<string, string>): WebhookRequest {
  return { url, body, headers: { 'Content-Type': 'application/json', 'User-Agent': USER_AGENT, ...headers } };
}

/**
 * `{"time_ms", "events"}` signed with the app secret. `time_ms` is when this request was
 * built (a retry carries a newer one); each event carries its own stable `id`.
 */
export function channelRequest(url: string, appKey: string, appSecret: string, batch: readonly OutboxEntry[], nowMs: number): WebhookRequest {
  const body = JSON.stringify({ time_ms: nowMs, events: batch.map((e) => e.event) });
  return jsonRequest(url, body, { 'X-Pusher-Key': appKey, 'X-Pusher-Signature': channelWebhookSignature(appSecret, body) });
}

/** Beams body `{payload, metadata}`, built once when the event happens (its bytes never change). */
export function pushWebhookBody(kind: string, payload: Record<string, unknown>, eventId: string, nowMs: number): string {
  return JSON.stringify({
    payload,
    metadata: { created_at: beamsTimestamp(nowMs), event_type: kind, event_id: eventId, product: 'beams' },
  });
}

/** An instance webhook: the stored body signed with the webhook's secret (HMAC-SHA1). */
export function pushRequest(url: string, secret: string, entry: OutboxEntry): WebhookRequest {
  const body = entry.body ?? '';
  return jsonRequest(url, body, {
    'Webhook-Event-Type': entry.eventType ?? '',
    'Webhook-Signature': pushWebhookSignature(secret, body),
    [EVENT_ID_HEADER]: entry.id,
  });
}

/** A per-publish `webhookUrl` delivery: the payload as-is, unsigned. */
export function publishRequest(url: string, entry: OutboxEntry): WebhookRequest {
  return jsonRequest(url, entry.body ?? '', { 'Webhook-Event-Type': entry.eventType ?? '', [EVENT_ID_HEADER]: entry.id });
}

/** A new event id: a random UUID (unique across shards and data dirs). */
export function newEventId(): string {
  return randomUUID();
}
