/** Webhook signatures and timestamps, in the formats the Pusher and Beams receivers check. */
import { hmacSha1Hex, hmacSha256Hex } from '../crypto.js';

/** `X-Pusher-Signature`: hex HMAC-SHA256 of the exact body bytes with the app secret. */
export function channelWebhookSignature(appSecret: string, body: string): string {
  return hmacSha256Hex(appSecret, body);
}

/** `Webhook-Signature` (Beams): hex HMAC-SHA1 of the exact body bytes with the webhook's secret. */
export function pushWebhookSignature(webhookSecret: string, body: string): string {
  return hmacSha1Hex(webhookSecret, body);
}

/** Beams `metadata.created_at`: UTC, whole seconds, `+0000` offset, e.g. `2019-03-11T10:42:16+0000`. */
export function beamsTimestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, '+0000');
}
