/**
 * Socket authorisation signatures of the Pusher protocol: `auth` is `<app key>:<hex
 * HMAC-SHA256>` with the app secret over `socket_id:channel` (private and encrypted channels),
 * `socket_id:channel:channel_data` (presence, and any channel subscribed with channel_data)
 * or `socket_id::user::user_data` (sign-in).
 * Comparisons are constant time over equal-length buffers, so a wrong signature reveals
 * nothing about the right one.
 */
import { constantTimeEqual, hmacSha256Hex } from '../crypto.js';

/** Hex HMAC-SHA256 of `message` with the app secret. */
export function sign(secret: string, message: string): string {
  return hmacSha256Hex(secret, message);
}

/**
 * The string a channel subscription signs: `channel_data` is part of it whenever the client
 * sent one (presence channels always do; private channels do when the auth endpoint gave one).
 */
export function channelSignatureInput(socketId: string, channel: string, channelData?: string): string {
  return channelData === undefined ? `${socketId}:${channel}` : `${socketId}:${channel}:${channelData}`;
}

/** The string a user sign-in signs. */
export function userSignatureInput(socketId: string, userData: string): string {
  return `${socketId}::user::${userData}`;
}

/**
 * Checks `auth` (`<key>:<hex sig>`) against the expected signature of `input`. The key must be
 * the app's own key; the hex signature is compared in constant time (a length mismatch or
 * a non-hex signature fails without comparing secrets byte by byte).
 */
export function verifyAuth(appKey: string, secret: string, auth: unknown, input: string): boolean {
  if (typeof auth !== 'string') return false;
  const colon = auth.lastIndexOf(':');
  if (colon <= 0) return false;
  if (auth.slice(0, colon) !== appKey) return false;
  return constantTimeEqual(sign(secret, input), auth.slice(colon + 1));
}
