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
 * endpoint, so by default an endpoint whose host is a loopback, private (RFC 1918, fc00::/7),
 * link-local (169.254/16, fe80::/10) or unspecified address, or a `localhost` name, is
 * refused; `push[].web.allowPrivateEndpoints` lifts the rule (tests, a push service on a
 * private network). Only literal addresses (in any form the URL parser normalises: `127.1`,
 * `0x7f.1`, `[::ffff:127.0.0.1]`) and localhost names are recognised: a DNS name that
 * resolves to a private address is not caught.
 */
import { BlockList, isIP } from 'node:net';

/** Longest web token accepted: base64 of a PushSubscription JSON (real ones are about 400-800). */
export const MAX_WEB_TOKEN_LENGTH = 8192;

/** A browser PushSubscription as `JSON.stringify` renders it (the fields Herald uses). */
export interface PushSubscriptionJson {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** What the rules allow beyond the defaults. */
export interface SubscriptionRules {
  /** Accept endpoints on loopback, private, link-local and unspecified addresses and localhost names. */
  allowPrivateEndpoints?: boolean;
}

/**
 * A usable subscription, or why not. `privateEndpoint`: the only problem is the endpoint host
 * rule (the token is otherwise well-formed).
 */
export type SubscriptionParse =
  | { ok: true; subscription: PushSubscriptionJson }
  | { ok: false; reason: string; privateEndpoint?: true };

const BASE64 = /^[A-Za-z0-9+/_-]+={0,2}$/;

/** Addresses an endpoint may not name unless allowPrivateEndpoints (IPv4-mapped IPv6 forms match the IPv4 rules). */
const PRIVATE_ADDRESSES = (() => {
  const list = new BlockList();
  list.addSubnet('0.0.0.0', 8, 'ipv4'); // unspecified, "this network"
  list.addSubnet('127.0.0.0', 8, 'ipv4'); // loopback
  list.addSubnet('10.0.0.0', 8, 'ipv4'); // RFC 1918
  list.addSubnet('172.16.0.0', 12, 'ipv4'); // RFC 1918
  list.addSubnet('192.168.0.0', 16, 'ipv4'); // RFC 1918
  list.addSubnet('169.254.0.0', 16, 'ipv4'); // link-local (cloud metadata services live here)
  list.addSubnet('::', 96, 'ipv6'); // unspecified, loopback and the IPv4-compatible forms
  list.addSubnet('fc00::', 7, 'ipv6'); // unique local
  list.addSubnet('fe80::', 10, 'ipv6'); // link-local
  return list;
})();

/**
 * True when a URL hostname (as `new URL().hostname` gives it) is a localhost name or a literal
 * loopback, private, link-local or unspecified address.
 */
export function isPrivateHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const family = isIP(host);
  if (family === 0) return false;
  return PRIVATE_ADDRESSES.check(host, family === 4 ? 'ipv4' : 'ipv6');
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
  if (!rules.allowPrivateEndpoints && isPrivateHost(url.hostname)) {
    return {
      ok: false,
      privateEndpoint: true,
      reason: `the web push endpoint host ${url.hostname} is a loopback, private, link-local or unspecified address or a localhost name (allowed only with push[].web.allowPrivateEndpoints)`,
    };
  }
  return { ok: true, subscription: { endpoint, keys: { p256dh, auth } } };
}

/** Decoded length of a base64url (or base64) string, or undefined when it is not one. */
function base64UrlBytes(value: string): number | undefined {
  if (!BASE64.test(value)) return undefined;
  return Buffer.from(value, 'base64url').length;
}
