/**
 * FCM HTTP v1 client: OAuth2 access token from the service-account JWT grant, one
 * `messages:send` request per device token over a small pool of HTTP/2 sessions. A failed
 * token fetch is remembered for a while (sends fail or wait on it without asking the token
 * endpoint again); a 429/503 Retry-After pauses the whole client (gateway-pause.ts); dead-token
 * answers delete devices only once the client has had an accepted send (dead-token-guard.ts).
 */
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { importPKCS8, SignJWT, type CryptoKey } from 'jose';
import { DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS, type FcmConfig, type GatewayClient, type GatewayClientOptions, type GatewayMessage, type GatewayOutcome, type RetryPolicy } from './gateway.js';
import { isObject } from '../../json.js';
import { DeadTokenGuard } from './dead-token-guard.js';
import { GatewayPause } from './gateway-pause.js';
import { Http2SessionPool, type Http2Response } from './http2-pool.js';
import {
  closingController, isRetryableStatus, parseRetryAfter, resolveRetryPolicy, transportFailure, withRetries,
  type AttemptResult, type RetryableFailure,
} from './retry.js';

/** `requestTimeoutMs` bounds the access token fetch as well as each send. */
export interface FcmClientOptions extends GatewayClientOptions {
  /** HTTP/2 sessions kept open to FCM. Default 2. */
  poolSize?: number;
  /** Clock in ms since the epoch; tests move it to exercise token expiry. Default Date.now. */
  now?: () => number;
}

/** OAuth2 scope FCM v1 requires. */
export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';
/** Lifetime asked for in the JWT assertion, in seconds (Google's maximum). */
const ASSERTION_LIFETIME_S = 3600;
/** An access token is replaced this long before Google says it expires, in ms. */
const TOKEN_EARLY_REFRESH_MS = 5 * 60_000;
/**
 * How long a failed token fetch is remembered before the endpoint is asked again, in ms: a
 * refusal (wrong key, revoked account: retrying cannot help) and a transient failure (5xx,
 * network). Without it every batch of sends would fetch again.
 */
const TOKEN_FAILURE_CACHE_MS = 30_000;
const TOKEN_TRANSIENT_FAILURE_CACHE_MS = 2_000;

/** Fields of the legacy `notification` object that FCM v1 keeps at message.notification. */
const V1_NOTIFICATION_KEYS = new Set(['title', 'body', 'image']);

/**
 * Builds the FCM v1 `message` for one device from the Beams `fcm` object.
 *
 * - `data`: FCM v1 accepts only string values, so non-string values are JSON-stringified;
 *   in particular `data.pusher` (the object the Beams Android SDK reads) arrives as a JSON
 *   string under key `pusher`. Null/undefined values are dropped.
 * - Beams' `fcm` object follows the legacy FCM format, which v1 would reject outright, so the
 *   legacy-only fields are moved where v1 expects them: `notification` keys other than
 *   title/body/image (icon, sound, tag, color, click_action, ...) go to
 *   `android.notification` (`android_channel_id` becomes `channel_id`); top-level `priority`
 *   ("high"/"normal"), `time_to_live` (seconds) and `collapse_key` go to `android`.
 *   Everything else (v1 fields such as `android`, `apns`, `webpush`, `fcm_options`) passes through.
 */
export function buildFcmMessage(token: string, payload: Record<string, unknown>): Record<string, unknown> {
  const { data, notification, priority, time_to_live: ttl, collapse_key: collapseKey, ...rest } = payload;
  const message: Record<string, unknown> = { ...rest, token };
  const android: Record<string, unknown> = isObject(rest['android']) ? { ...rest['android'] } : {};
  let androidChanged = false;

  if (isObject(data)) {
    const stringData: Record<string, string> = {};
    for (const [key, value] of Object.entries(data)) {
      if (value === undefined || value === null) continue;
      stringData[key] = typeof value === 'string' ? value : JSON.stringify(value);
    }
    message['data'] = stringData;
  }

  if (isObject(notification)) {
    const v1Notification: Record<string, unknown> = {};
    const androidNotification: Record<string, unknown> = isObject(android['notification']) ? { ...android['notification'] } : {};
    let movedAny = false;
    for (const [key, value] of Object.entries(notification)) {
      if (V1_NOTIFICATION_KEYS.has(key)) v1Notification[key] = value;
      else {
        androidNotification[key === 'android_channel_id' ? 'channel_id' : key] = value;
        movedAny = true;
      }
    }
    message['notification'] = v1Notification;
    if (movedAny) {
      android['notification'] = androidNotification;
      androidChanged = true;
    }
  }

  if (priority === 'high' || priority === 'normal') {
    android['priority'] = priority.toUpperCase();
    androidChanged = true;
  }
  if (typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0) {
    android['ttl'] = `${Math.trunc(ttl)}s`;
    androidChanged = true;
  }
  if (typeof collapseKey === 'string') {
    android['collapse_key'] = collapseKey;
    androidChanged = true;
  }
  if (androidChanged) message['android'] = android;
  return message;
}

/**
 * The OAuth2 token endpoint said no, or could not be reached. `cachedForMs`: this is an
 * earlier fetch's failure, remembered for that many more ms (no fetch was made).
 */
class TokenFetchError extends Error {
  constructor(message: string, readonly retryable: boolean, readonly status?: number, readonly cachedForMs?: number) {
    super(message);
    this.name = 'TokenFetchError';
  }
}

/** Fetches and caches the OAuth2 access token; at most one fetch in flight. */
class FcmAccessToken {
  readonly #config: FcmConfig;
  readonly #ca: Buffer | undefined;
  readonly #timeoutMs: number;
  readonly #now: () => number;
  #key: Promise<CryptoKey> | undefined;
  #current: { token: string; refreshAtMs: number } | undefined;
  #fetching: Promise<string> | undefined;
  #failure: { error: TokenFetchError; untilMs: number } | undefined;

  constructor(config: FcmConfig, ca: Buffer | undefined, timeoutMs: number, now: () => number) {
    this.#config = config;
    this.#ca = ca;
    this.#timeoutMs = timeoutMs;
    this.#now = now;
  }

  /** The cached token, a fresh one, or a TokenFetchError (possibly a remembered one, with cachedForMs). */
  get(): Promise<string> {
    const current = this.#current;
    if (current && this.#now() < current.refreshAtMs) return Promise.resolve(current.token);
    const failure = this.#failure;
    if (failure) {
      const leftMs = failure.untilMs - this.#now();
      if (leftMs > 0) {
        const { message, retryable, status } = failure.error;
        return Promise.reject(new TokenFetchError(message, retryable, status, leftMs));
      }
      this.#failure = undefined;
    }
    this.#fetching ??= this.#fetch()
      .catch((error: unknown) => {
        // Anything else (a key that will not import or sign) is configuration: retrying cannot help.
        const fetchError = error instanceof TokenFetchError
          ? error
          : new TokenFetchError(error instanceof Error ? error.message : String(error), false);
        const keepMs = fetchError.retryable ? TOKEN_TRANSIENT_FAILURE_CACHE_MS : TOKEN_FAILURE_CACHE_MS;
        this.#failure = { error: fetchError, untilMs: this.#now() + keepMs };
        throw fetchError;
      })
      .finally(() => {
        this.#fetching = undefined;
      });
    return this.#fetching;
  }

  /** Forgets `token` if it is still the cached one (FCM answered 401 to it). */
  invalidate(token: string): void {
    if (this.#current?.token === token) this.#current = undefined;
  }

  async #fetch(): Promise<string> {
    this.#key ??= importPKCS8(this.#config.privateKey, 'RS256');
    const iat = Math.floor(this.#now() / 1000);
    const assertion = await new SignJWT({ scope: FCM_SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(this.#config.clientEmail)
      .setAudience(this.#config.tokenUri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_LIFETIME_S)
      .sign(await this.#key);
    const form = new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion }).toString();
    const requestedAtMs = this.#now();
    const { status, body } = await this.#post(form);
    let parsed: { access_token?: unknown; expires_in?: unknown; error?: unknown; error_description?: unknown } = {};
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      // reported below
    }
    if (status !== 200 || typeof parsed.access_token !== 'string') {
      const detail = [parsed.error, parsed.error_description].filter((part) => typeof part === 'string').join(': ');
      throw new TokenFetchError(`token endpoint answered ${status}${detail ? ` (${detail})` : ''}`, isRetryableStatus(status), status);
    }
    const expiresInS = typeof parsed.expires_in === 'number' ? parsed.expires_in : ASSERTION_LIFETIME_S;
    this.#current = {
      token: parsed.access_token,
      refreshAtMs: requestedAtMs + Math.max(0, expiresInS * 1000 - TOKEN_EARLY_REFRESH_MS),
    };
    return parsed.access_token;
  }

  /** POSTs the form with node:https so that `ca` is honoured (Node 20's fetch cannot take one). */
  #post(form: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const request = https.request(this.#config.tokenUri, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          'content-length': Buffer.byteLength(form),
          accept: 'application/json',
        },
        ...(this.#ca ? { ca: this.#ca } : {}),
        timeout: this.#timeoutMs,
      }, (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', (error) => reject(new TokenFetchError(`token endpoint: ${error.message}`, true)));
      });
      request.on('timeout', () => request.destroy(new Error(`no response within ${this.#timeoutMs} ms`)));
      request.on('error', (error) => reject(new TokenFetchError(`token endpoint: ${error.message}`, true)));
      request.end(form);
    });
  }
}

/** The parts of an FCM v1 error body Herald looks at. */
interface FcmError {
  status: string | undefined;
  errorCode: string | undefined;
  message: string | undefined;
  /** True when a BadRequest field violation names message.token. */
  tokenFieldViolation: boolean;
}

/** Sends to FCM HTTP v1. One instance per Beams instance per shard; reuse it for every publish. */
export class FcmClient implements GatewayClient {
  readonly platform = 'fcm' as const;
  readonly #pool: Http2SessionPool;
  readonly #token: FcmAccessToken;
  readonly #retry: Readonly<RetryPolicy>;
  readonly #path: string;
  readonly #now: () => number;
  readonly #closing = closingController();
  readonly #pause = new GatewayPause();
  readonly #guard: DeadTokenGuard;

  constructor(config: Readonly<FcmConfig>, options: FcmClientOptions = {}) {
    // Catch a wrong key at start-up rather than on the first publish.
    if (createPrivateKey(config.privateKey).asymmetricKeyType !== 'rsa') {
      throw new TypeError('FCM privateKey must be the service account RSA key (PEM PKCS8)');
    }
    const ca = config.caFile ? readFileSync(config.caFile) : undefined;
    const timeoutMs = options.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS;
    this.#now = options.now ?? Date.now;
    this.#retry = resolveRetryPolicy(options.retry);
    this.#path = `/v1/projects/${encodeURIComponent(config.projectId)}/messages:send`;
    this.#token = new FcmAccessToken(config, ca, timeoutMs, this.#now);
    this.#pool = new Http2SessionPool({ origin: config.endpoint, ca, size: options.poolSize ?? 2, requestTimeoutMs: timeoutMs });
    this.#guard = new DeadTokenGuard(
      `FCM ${new URL(config.endpoint).origin} project ${config.projectId}`,
      'check push[].fcm.endpoint and projectId (the tokens must come from apps of that Firebase project)',
    );
  }

  send(message: GatewayMessage): Promise<GatewayOutcome> {
    const body = JSON.stringify({ message: buildFcmMessage(message.token, message.payload) });
    return withRetries(this.#retry, () => this.#attempt(body), this.#closing.signal, this.#pause)
      .then((outcome) => this.#guard.judge(outcome));
  }

  async close(): Promise<void> {
    this.#closing.abort();
    await this.#pool.close();
  }

  /** One attempt; a 401 gets one fresh access token and an immediate second request. */
  async #attempt(body: string): Promise<AttemptResult> {
    let response: Http2Response | undefined;
    for (let tries = 0; tries < 2; tries++) {
      let accessToken: string;
      try {
        accessToken = await this.#token.get();
      } catch (error) {
        return tokenFailure(error);
      }
      try {
        response = await this.#pool.request({
          ':path': this.#path,
          'content-type': 'application/json; charset=utf-8',
          authorization: `Bearer ${accessToken}`,
        }, body);
      } catch (error) {
        return transportFailure(error);
      }
      if (response.status !== 401) break;
      this.#token.invalidate(accessToken);
    }
    return this.#classify(response!);
  }

  #classify(response: Http2Response): AttemptResult {
    const { status } = response;
    if (status === 200) return { kind: 'sent' };
    const error = parseFcmError(response.body);
    const reason = error.errorCode ?? error.status ?? `HTTP ${status}`;
    // Only a 404 that names UNREGISTERED condemns the token: a bare 404 is what a wrong
    // projectId or endpoint gives, and must not delete every device of the instance.
    if (error.errorCode === 'UNREGISTERED') return { kind: 'dead-token', reason: 'UNREGISTERED' };
    if (status === 400 && (error.errorCode === 'INVALID_ARGUMENT' || error.status === 'INVALID_ARGUMENT') && concernsToken(error)) {
      return { kind: 'dead-token', reason: 'INVALID_ARGUMENT' };
    }
    if (isRetryableStatus(status) || error.errorCode === 'QUOTA_EXCEEDED' || error.errorCode === 'UNAVAILABLE' || error.errorCode === 'INTERNAL') {
      const retry: RetryableFailure = { kind: 'retry', reason, status };
      const retryAfterMs = parseRetryAfter(response.headers['retry-after'], this.#now());
      if (retryAfterMs !== undefined) retry.retryAfterMs = retryAfterMs;
      return retry;
    }
    const detail = error.message ? `${reason}: ${error.message}` : reason;
    return { kind: 'failed', reason: detail, status };
  }
}

/**
 * What a failed access-token fetch makes of the attempt: a refusal fails it, a transient
 * failure is retried; a remembered failure (no fetch made) fails at once, or for a transient
 * one is retried once it is forgotten.
 */
function tokenFailure(error: unknown): AttemptResult {
  if (!(error instanceof TokenFetchError)) return { kind: 'failed', reason: `oauth: ${error instanceof Error ? error.message : String(error)}` };
  const status = error.status === undefined ? {} : { status: error.status };
  if (error.cachedForMs === undefined) {
    const reason = `oauth: ${error.message}`;
    return error.retryable ? { kind: 'retry', reason, ...status } : { kind: 'failed', reason, ...status };
  }
  const reason = `oauth: ${error.message} (an earlier fetch's answer; the token endpoint is asked again in ${Math.ceil(error.cachedForMs / 1000)} s)`;
  // Without the status: this wait is the send's own, it must not pause (and re-pause) the whole client.
  return error.retryable ? { kind: 'retry', reason, retryAfterMs: error.cachedForMs } : { kind: 'failed', reason, ...status };
}

/** An INVALID_ARGUMENT is about the token (so the device is dead) rather than about the payload. */
function concernsToken(error: FcmError): boolean {
  return error.tokenFieldViolation || /registration token/i.test(error.message ?? '');
}

/** Reads `{error: {status, message, details: [{errorCode} | {fieldViolations}]}}`; tolerant of anything else. */
function parseFcmError(body: Buffer): FcmError {
  const result: FcmError = { status: undefined, errorCode: undefined, message: undefined, tokenFieldViolation: false };
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return result;
  }
  const error = isObject(parsed) ? parsed['error'] : undefined;
  if (!isObject(error)) return result;
  if (typeof error['status'] === 'string') result.status = error['status'];
  if (typeof error['message'] === 'string') result.message = error['message'];
  const details = Array.isArray(error['details']) ? error['details'] : [];
  for (const detail of details) {
    if (!isObject(detail)) continue;
    if (typeof detail['errorCode'] === 'string') result.errorCode ??= detail['errorCode'];
    const violations = Array.isArray(detail['fieldViolations']) ? detail['fieldViolations'] : [];
    if (violations.some((violation) => isObject(violation) && violation['field'] === 'message.token')) result.tokenFieldViolation = true;
  }
  return result;
}
