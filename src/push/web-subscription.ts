/**
 * The one parser of a Beams web device token, with one set of rules for the device API
 * (registration, D9 refresh: refuse what can never work) and the web push client (send time).
 *
 * A web token is base64 (or base64url) of the browser's PushSubscription JSON, as the web SDK
 * sends it (`btoa(JSON.stringify(subscription))`): `{endpoint: https URL, keys: {p256dh,
 * auth}}` with a 65-byte uncompressed P-256 key and an auth secret of at least 16 bytes, as
 * RFC 8291 needs.
 *
 * Endpoint hosts (SSRF): registration needs no credentials and Herald then POSTs to the
 * endpoint, so an endpoint whose host is a literal address that is not public (any range of
 * net/outbound-guard.ts, in any form the URL parser normalises: `127.1`, `0x7f.1`,
 * `[::ffff:127.0.0.1]`) or a `localhost` name is refused here, unless the operator allowed the
 * address (`outbound.allowPrivateAddresses`) or lifted the rule for the instance
 * (`push[].web.allowPrivateEndpoints`). A DNS name is resolved only when Herald connects: the web
 * push client's OutboundGuard checks the address connected to then.
 */
import { isIP } from 'node:net';
import { OutboundGuard } from '../net/outbound-guard.js';

/** Longest web token accepted: base64 of a PushSubscription JSON (real ones are about 400-800). */
export const MAX_WEB_TOKEN_LENGTH = 8192;

/** A browser PushSubscription as `JSON.stringify` renders it (the fields Herald uses). */
export interface PushSubscriptionJson {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** What the rules allow beyond the defaults. */
export interface SubscriptionRules {
  /** Accept endpoints on any address that is not public and localhost names (tests, a private push service). */
  allowPrivateEndpoints?: boolean;
  /** Addresses and CIDR ranges accepted though not public (`outbound.allowPrivateAddresses`). */
  allowPrivateAddresses?: readonly string[];
}

/**
 * A usable subscription, or why not. `privateEndpoint`: the only problem is the endpoint host
 * rule (the token is otherwise well-formed).
 */
export type SubscriptionParse =
  | { ok: true; subscription: PushSubscriptionJson }
  | { ok: false; reason: string; privateEndpoint?: true };

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** Guards by allowlist, built once per list (the config's lists are frozen and reused). */
const guards = new WeakMap<readonly string[], OutboundGuard>();
const NO_ALLOWLIST: readonly string[] = Object.freeze([]);

/**
 * Why a URL hostname (as `new URL().hostname` gives it) may not be an endpoint host: a localhost
 * name, or a literal address that is not public and not allowed; undefined when it may.
 */
export function endpointHostRefusal(hostname: string, allowPrivateAddresses: readonly string[] = NO_ALLOWLIST): string | undefined {
  const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return `the web push endpoint host ${hostname} is a localhost name`;
  if (isIP(host) === 0) return undefined;
  let guard = guards.get(allowPrivateAddresses);
  if (!guard) {
    guard = new OutboundGuard({ allowPrivateAddresses });
    guards.set(allowPrivateAddresses, guard);
  }
  const refused = guard.refusalFor(host, host);
  return refused ? `the web push endpoint host ${hostname} is ${refused.reason === 'unspecified' ? 'an unspecified' : `a ${refused.reason}`} address, not a public one` : undefined;
}

/** Parses and checks a web device token; the reason reads after "Incorrect device token: ". */
export function parseSubscriptionToken(token: string, rules: SubscriptionRules = {}): SubscriptionParse {
  const bad = (why: string): SubscriptionParse => ({ ok: false, reason: `a web device token must be base64 of a PushSubscription JSON: ${why}` });
  if (token.length > MAX_WEB_TOKEN_LENGTH) return bad(`longer than ${MAX_WEB_TOKEN_LENGTH} characters`);
  if (!BASE64.test(token)) return bad('not base64');
  let subscription: unknown;
  try {
    // Node's base64 decoder also takes the base64url alphabet and missing padding.
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
  const refusal = rules.allowPrivateEndpoints ? undefined : endpointHostRefusal(url.hostname, rules.allowPrivateAddresses);
  if (refusal !== undefined) {
    return {
      ok: false,
      privateEndpoint: true,
      reason: `${refusal} (allowed only in outbound.allowPrivateAddresses or with push[].web.allowPrivateEndpoints)`,
    };
  }
  return { ok: true, subscription: { endpoint, keys: { p256dh, auth } } };
}

/** Decoded length of a base64url (or base64) string, or undefined when it is not one. */
function base64UrlBytes(value: string): number | undefined {
  if (!BASE64.test(value)) return undefined;
  return Buffer.from(value, 'base64url').length;
}
