/**
 * Format checks of gateway tokens at registration (D1/D2) and refresh (D9). Herald does not ask
 * the gateway whether a token is live at registration: a dead token is found, and its device
 * deleted, the first time a publish reaches the gateway. These checks only refuse tokens that
 * can never work, and normalise the ones that can (so the device id, derived from the token,
 * is stable).
 */
import type { Platform } from '../gateways/gateway.js';

/** Longest FCM registration token accepted, characters (real ones are about 160). */
const MAX_FCM_TOKEN_LENGTH = 4096;
/** Longest web token accepted: base64 of a PushSubscription JSON (real ones are about 400-800). */
const MAX_WEB_TOKEN_LENGTH = 8192;

/** A token ready to store, or why it is not one (text for an error description). */
export type TokenCheck = { ok: true; token: string } | { ok: false; reason: string };

/** Checks and normalises a gateway token of `platform`. */
export function checkGatewayToken(platform: Platform, token: string): TokenCheck {
  switch (platform) {
    case 'apns':
      return checkApnsToken(token);
    case 'fcm':
      return checkFcmToken(token);
    case 'web':
      return checkWebToken(token);
  }
}

/** APNs device tokens are binary (32 bytes today, up to 100 by Apple's word), sent as hex; stored lower-case. */
function checkApnsToken(token: string): TokenCheck {
  if (!/^[0-9a-fA-F]+$/.test(token) || token.length % 2 !== 0 || token.length < 64 || token.length > 200) {
    return { ok: false, reason: 'an APNs device token must be 64 to 200 hexadecimal digits' };
  }
  return { ok: true, token: token.toLowerCase() };
}

/** FCM registration tokens are opaque printable ASCII without spaces. */
function checkFcmToken(token: string): TokenCheck {
  if (token.length > MAX_FCM_TOKEN_LENGTH || !/^[\x21-\x7e]+$/.test(token)) {
    return { ok: false, reason: `an FCM device token must be 1 to ${MAX_FCM_TOKEN_LENGTH} printable ASCII characters without spaces` };
  }
  return { ok: true, token };
}

/**
 * A web device token is base64 of the browser's PushSubscription JSON (what the web SDK sends:
 * `btoa(JSON.stringify(subscription))`): `{endpoint: https URL, keys: {p256dh, auth}}` with a
 * 65-byte uncompressed P-256 key and an auth secret of at least 16 bytes, as RFC 8291 needs.
 */
function checkWebToken(token: string): TokenCheck {
  const bad = (why: string): TokenCheck => ({ ok: false, reason: `a web device token must be base64 of a PushSubscription JSON: ${why}` });
  if (token.length > MAX_WEB_TOKEN_LENGTH) return bad(`longer than ${MAX_WEB_TOKEN_LENGTH} characters`);
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(token)) return bad('not base64');
  let subscription: unknown;
  try {
    subscription = JSON.parse(Buffer.from(token, 'base64').toString('utf8'));
  } catch {
    return bad('does not decode to JSON');
  }
  if (typeof subscription !== 'object' || subscription === null) return bad('does not decode to a JSON object');
  const { endpoint, keys } = subscription as { endpoint?: unknown; keys?: unknown };
  if (typeof endpoint !== 'string') return bad('endpoint missing');
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return bad('endpoint is not a URL');
  }
  if (url.protocol !== 'https:') return bad('endpoint must be an https URL');
  if (typeof keys !== 'object' || keys === null) return bad('keys missing');
  const { p256dh, auth } = keys as { p256dh?: unknown; auth?: unknown };
  if (typeof p256dh !== 'string' || base64UrlBytes(p256dh) !== 65) return bad('keys.p256dh must be a 65-byte P-256 public key in base64url');
  if (typeof auth !== 'string' || (base64UrlBytes(auth) ?? 0) < 16) return bad('keys.auth must be at least 16 bytes in base64url');
  return { ok: true, token };
}

/** Decoded length of a base64url (or base64) string, or undefined when it is not one. */
function base64UrlBytes(value: string): number | undefined {
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) return undefined;
  return Buffer.from(value, 'base64url').length;
}
