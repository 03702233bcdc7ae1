/**
 * Format checks of gateway tokens at registration (D1/D2) and refresh (D9). Herald does not ask
 * the gateway whether a token is live at registration: a dead token is found, and its device
 * deleted, the first time a publish reaches the gateway. These checks only refuse tokens that
 * can never work, and normalise the ones that can (so the device id, derived from the token,
 * is stable).
 */
import type { Platform } from '../../platform.js';
import { parseSubscriptionToken, type SubscriptionRules } from '../../web-subscription.js';

/** Longest FCM registration token accepted, characters (real ones are about 160). */
const MAX_FCM_TOKEN_LENGTH = 4096;

/** A token ready to store, or why it is not one (text for an error description). */
export type TokenCheck = { ok: true; token: string } | { ok: false; reason: string };

/**
 * Checks and normalises a gateway token of `platform`. `web` rules come from the instance's
 * `push[].web` config (the endpoint host rule, see ../../web-subscription.ts).
 */
export function checkGatewayToken(platform: Platform, token: string, web: SubscriptionRules = {}): TokenCheck {
  switch (platform) {
    case 'apns':
      return checkApnsToken(token);
    case 'fcm':
      return checkFcmToken(token);
    case 'web': {
      // The same parser and rules as the web push client uses at send time.
      const parsed = parseSubscriptionToken(token, web);
      return parsed.ok ? { ok: true, token } : { ok: false, reason: parsed.reason };
    }
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
