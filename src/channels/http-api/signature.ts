/**
 * Channel API request signatures. Every request carries auth_key, auth_timestamp,
 * auth_version, auth_signature and, with a non-empty body, body_md5 in its query string;
 * the signature is the hex HMAC-SHA256, keyed with the app secret, of
 * `METHOD\npath\nsorted lower-cased params except auth_signature` (values not escaped).
 * A failure is a 401 whose description says what was expected (the string to sign, never
 * the secret nor the expected signature). Pure functions: benchmarks reuse them.
 */
import type { AppConfig } from '../../config/schema.js';
import { constantTimeEqual, hmacSha256Hex, md5Hex } from '../../crypto.js';
import { HeraldError } from '../../errors.js';
import { lowerCased, type QueryPair } from './params.js';
import { logUnknownAppKey } from '../unknown-key-log.js';
import { graceSecret } from '../../config/secret-grace.js';

/** Seconds auth_timestamp may differ from the server clock, either way. */
export const MAX_TIMESTAMP_SKEW_SECONDS = 600;
/** The only auth_version there is. */
export const AUTH_VERSION = '1.0';
/** auth_timestamp: whole seconds. */
const TIMESTAMP = /^\d{1,15}$/;

/** `method.toUpperCase()` for the methods uWS reports (lower-case), without a new string each time. */
function upperCaseMethod(method: string): string {
  return method === 'post' ? 'POST' : method === 'get' ? 'GET' : method.toUpperCase();
}

/** What authenticateRequest needs from a request. */
export interface SignedRequest {
  /** Any case; signed upper-case. */
  readonly method: string;
  /** The path as received, without the query string. */
  readonly path: string;
  /** Decoded query pairs in the order received (params.ts parseQueryPairs). */
  readonly query: readonly QueryPair[];
  readonly body: Buffer;
  /** The `<app_id>` of the path, decoded. */
  readonly appId: string;
}

export { constantTimeEqual, hmacSha256Hex, md5Hex } from '../../crypto.js';

/**
 * The string to sign: upper-case method, path, and the query pairs except auth_signature,
 * keys lower-cased, sorted by key (repeated keys such as `channels[]` keep their order),
 * written `key=value` and joined by `&`. SDKs send their keys sorted, so that case is built
 * in one pass without intermediate arrays; any other order is sorted (stably) first.
 */
export function stringToSign(method: string, path: string, query: readonly QueryPair[]): string {
  let params = '';
  let first = true;
  let previous = '';
  for (let i = 0; i < query.length; i++) {
    const pair = query[i]!;
    const key = lowerCased(pair[0]);
    if (key === 'auth_signature') continue;
    if (key < previous) return `${upperCaseMethod(method)}\n${path}\n${sortedParams(query)}`;
    previous = key;
    params += first ? `${key}=${pair[1]}` : `&${key}=${pair[1]}`;
    first = false;
  }
  return `${upperCaseMethod(method)}\n${path}\n${params}`;
}

function sortedParams(query: readonly QueryPair[]): string {
  return query
    .map(([k, v]) => [k.toLowerCase(), v] as const)
    .filter(([k]) => k !== 'auth_signature')
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

/** Signs a request: the auth_signature value for these method, path and pairs. */
export function signRequest(secret: string, method: string, path: string, query: readonly QueryPair[]): string {
  return hmacSha256Hex(secret, stringToSign(method, path, query));
}

/** Long client-supplied values are cut in error messages. */
function clip(s: string, max = 128): string {
  return s.length > max ? `${s.slice(0, max)}…` : s;
}

/**
 * Checks the authentication parameters and returns the app the request is signed for.
 * Order: parameters present, key known, key belongs to the path's app id, version,
 * timestamp within ±600 s of `nowMs`, body_md5, signature. Throws a 401 HeraldError.
 */
export function authenticateRequest(req: SignedRequest, appsByKey: ReadonlyMap<string, AppConfig>, nowMs = Date.now()): AppConfig {
  // The first occurrence of each authentication parameter counts.
  let key: string | undefined;
  let timestampText: string | undefined;
  let version: string | undefined;
  let given: string | undefined;
  let bodyMd5: string | undefined;
  // The signed parameters are joined in the same pass (keys lower-cased once), as stringToSign
  // does while they come sorted; `sorted` false leaves the string to stringToSign.
  let params = '';
  let first = true;
  let previousName = '';
  let sorted = true;
  for (let i = 0; i < req.query.length; i++) {
    const pair = req.query[i]!;
    const name = lowerCased(pair[0]);
    switch (name) {
      case 'auth_key': key ??= pair[1]; break;
      case 'auth_timestamp': timestampText ??= pair[1]; break;
      case 'auth_version': version ??= pair[1]; break;
      case 'auth_signature': given ??= pair[1]; continue;
      case 'body_md5': bodyMd5 ??= pair[1]; break;
    }
    if (!sorted) continue;
    if (name < previousName) {
      sorted = false;
      continue;
    }
    previousName = name;
    params += first ? `${name}=${pair[1]}` : `&${name}=${pair[1]}`;
    first = false;
  }
  if (!key || !timestampText || !version || !given) {
    const missing = [['auth_key', key], ['auth_timestamp', timestampText], ['auth_version', version], ['auth_signature', given]]
      .filter(([, v]) => !v)
      .map(([k]) => k);
    throw new HeraldError('AUTH_MISSING_PARAMS', `Missing authentication query parameters: ${missing.join(', ')} (see the auth_* parameters of the channel API)`);
  }
  const app = appsByKey.get(key);
  if (!app) {
    logUnknownAppKey(key, 'channel API');
    throw new HeraldError('AUTH_UNKNOWN_KEY', `no app has key '${clip(key)}' (apps[].key)`);
  }
  if (app.id !== req.appId) {
    throw new HeraldError('AUTH_APP_MISMATCH', `auth_key '${clip(key)}' does not belong to app id '${clip(req.appId)}' of the path`);
  }
  if (version !== AUTH_VERSION) {
    throw new HeraldError('AUTH_BAD_VERSION', `auth_version must be ${AUTH_VERSION}; got '${clip(version)}'`);
  }
  const nowSeconds = Math.floor(nowMs / 1000);
  if (!TIMESTAMP.test(timestampText)) {
    throw new HeraldError('AUTH_STALE_TIMESTAMP', `auth_timestamp must be whole seconds since 1970-01-01 UTC; got '${clip(timestampText)}' (server time ${nowSeconds})`);
  }
  const timestamp = Number(timestampText);
  if (Math.abs(nowSeconds - timestamp) > MAX_TIMESTAMP_SKEW_SECONDS) {
    throw new HeraldError(
      'AUTH_STALE_TIMESTAMP',
      `Timestamp expired: auth_timestamp ${timestamp} is not within ${MAX_TIMESTAMP_SKEW_SECONDS} s of server time ${nowSeconds}; check the caller's clock`,
    );
  }
  if (req.body.length > 0 || bodyMd5 !== undefined) {
    const actual = md5Hex(req.body);
    if (bodyMd5 === undefined) {
      throw new HeraldError('AUTH_BAD_BODY_MD5', `body_md5 is required for a non-empty body; expected the hex MD5 of the body, ${actual}`);
    }
    if (!constantTimeEqual(actual, lowerCased(bodyMd5))) {
      throw new HeraldError('AUTH_BAD_BODY_MD5', `body_md5 does not match the body: expected ${actual} (hex MD5 of the ${req.body.length} body bytes), got '${clip(bodyMd5)}'`);
    }
  }
  const signed = sorted ? `${upperCaseMethod(req.method)}\n${req.path}\n${params}` : stringToSign(req.method, req.path, req.query);
  if (constantTimeEqual(hmacSha256Hex(app.secret, signed), given)) return app;
  // Clients sign the path before escaping it; accept the decoded form too (e.g. a user id with a space).
  const decodedPath = safeDecodePath(req.path);
  if (decodedPath !== req.path && constantTimeEqual(hmacSha256Hex(app.secret, stringToSign(req.method, decodedPath, req.query)), given)) {
    return app;
  }
  // A secret rotated with a grace period (admin API): the previous one is accepted until it ends.
  const previous = graceSecret(app, nowMs);
  if (previous !== undefined && constantTimeEqual(hmacSha256Hex(previous, signed), given)) return app;
  throw new HeraldError(
    'AUTH_BAD_SIGNATURE',
    `Invalid signature: check the secret of app ${app.id} (apps[].secret) in the caller; expected auth_signature to be the lower-case hex HMAC-SHA256, keyed with the app secret, of ${JSON.stringify(signed)}; got '${clip(given)}'`,
  );
}

function safeDecodePath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}
