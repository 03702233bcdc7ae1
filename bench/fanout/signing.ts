/**
 * Signatures exactly as the official `pusher` server SDK makes them: the channel HTTP API's
 * request signature (HMAC-SHA256 of `METHOD\npath\nsorted params`, with body_md5) and the
 * private/presence subscription auth (HMAC-SHA256 of `socket_id:channel[:channel_data]`).
 */
import { createHash, createHmac } from 'node:crypto';

/** The query string (with auth_signature) for a signed channel API request. */
export function signedQuery(method: string, path: string, body: string, key: string, secret: string, timestampSeconds: number): string {
  const params: Record<string, string> = {
    auth_key: key,
    auth_timestamp: String(timestampSeconds),
    auth_version: '1.0',
  };
  if (body.length > 0) params.body_md5 = createHash('md5').update(body).digest('hex');
  const sorted = Object.keys(params)
    .sort()
    .map((k) => `${k}=${params[k]}`)
    .join('&');
  const signature = createHmac('sha256', secret).update(`${method}\n${path}\n${sorted}`).digest('hex');
  return `${sorted}&auth_signature=${signature}`;
}

/** `auth` for a pusher:subscribe to a private or presence channel. */
export function subscriptionAuth(key: string, secret: string, socketId: string, channel: string, channelData?: string): string {
  const toSign = channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
  return `${key}:${createHmac('sha256', secret).update(toSign).digest('hex')}`;
}
