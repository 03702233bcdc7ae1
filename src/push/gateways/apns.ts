/**
 * APNs provider API client: HTTP/2, token-based (ES256 JWT) authentication, a small pool of
 * sessions each carrying many concurrent streams. A 429/503 Retry-After pauses the whole
 * client (gateway-pause.ts); dead-token answers delete devices only once the client has had
 * an accepted send (dead-token-guard.ts: APNs answers BadDeviceToken to every token of the
 * other environment, sandbox vs production).
 */
import { createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { OutgoingHttpHeaders } from 'node:http2';
import { importPKCS8, SignJWT, type CryptoKey } from 'jose';
import { DeadTokenGuard } from './dead-token-guard.js';
import { DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS, type ApnsConfig, type GatewayClient, type GatewayClientOptions, type GatewayMessage, type GatewayOutcome, type RetryPolicy } from './gateway.js';
import { GatewayPause } from './gateway-pause.js';
import { Http2SessionPool } from './http2-pool.js';
import {
  closingController, isRetryableStatus, parseRetryAfter, resolveRetryPolicy, transportFailure, withRetries, type AttemptResult,
} from './retry.js';

export interface ApnsClientOptions extends GatewayClientOptions {
  /** HTTP/2 sessions kept open to APNs. Default 2. */
  poolSize?: number;
  /** Age in ms after which a new provider token is signed. Apple wants 20–60 min; default 30 min. */
  tokenRefreshMs?: number;
  /** Clock in ms since the epoch; tests move it to exercise token refresh. Default Date.now. */
  now?: () => number;
}

const MINUTE_MS = 60_000;

/** The reasons APNs gives, with 400, for a token that will never work for this topic. */
const DEAD_TOKEN_REASONS_400 = new Set(['BadDeviceToken', 'Unregistered', 'DeviceTokenNotForTopic']);

/**
 * Keys of the publish's `apns` object that Herald sends as APNs request headers rather than
 * in the body (named after the headers they become):
 * - `apns-expiration`: UNIX time in seconds (number or numeric string); 0 = deliver once or drop.
 * - `apns-collapse-id`: string (APNs allows up to 64 bytes).
 * - `apns-priority`: 10 or 5 (number or string).
 * - `apns-push-type`: overrides the alert/background detection.
 * They are removed from the JSON body.
 */
export const APNS_HEADER_KEYS = ['apns-expiration', 'apns-collapse-id', 'apns-priority', 'apns-push-type'] as const;

/** The path, headers (minus authorization) and body Herald sends to APNs for one message. */
export interface ApnsRequest {
  headers: OutgoingHttpHeaders;
  body: string;
}

/**
 * Builds the APNs request for one message. `apns-push-type` is `background` when `aps` holds
 * nothing but `content-available`, otherwise `alert`; `apns-priority` defaults to 5 for
 * background pushes (Apple rejects 10 there) and 10 otherwise.
 */
export function buildApnsRequest(message: GatewayMessage): ApnsRequest {
  const body: Record<string, unknown> = { ...message.payload };
  const headerValues: Partial<Record<(typeof APNS_HEADER_KEYS)[number], unknown>> = {};
  for (const key of APNS_HEADER_KEYS) {
    if (key in body) {
      headerValues[key] = body[key];
      delete body[key];
    }
  }

  const aps = body['aps'];
  const apsKeys = aps !== null && typeof aps === 'object' ? Object.keys(aps) : [];
  const detectedType = apsKeys.length > 0 && apsKeys.every((key) => key === 'content-available') ? 'background' : 'alert';
  const pushType = typeof headerValues['apns-push-type'] === 'string' ? headerValues['apns-push-type'] : detectedType;
  const requestedPriority = String(headerValues['apns-priority'] ?? '');
  const priority = requestedPriority === '5' || requestedPriority === '10'
    ? requestedPriority
    : pushType === 'background' ? '5' : '10';

  const headers: OutgoingHttpHeaders = {
    ':method': 'POST',
    ':path': `/3/device/${encodeURIComponent(message.token)}`,
    'content-type': 'application/json',
    'apns-push-type': pushType,
    'apns-priority': priority,
  };
  if (message.bundleIdentifier) headers['apns-topic'] = message.bundleIdentifier;
  const expiration = headerValues['apns-expiration'];
  if ((typeof expiration === 'number' && Number.isFinite(expiration)) || (typeof expiration === 'string' && /^\d+$/.test(expiration))) {
    headers['apns-expiration'] = String(Math.trunc(Number(expiration)));
  }
  const collapseId = headerValues['apns-collapse-id'];
  if (typeof collapseId === 'string' && collapseId !== '') headers['apns-collapse-id'] = collapseId;
  return { headers, body: JSON.stringify(body) };
}

/** Signs and caches the APNs provider token (JWT, ES256, header kid, claims iss + iat). */
class ApnsProviderToken {
  readonly #config: ApnsConfig;
  readonly #refreshMs: number;
  readonly #now: () => number;
  #key: Promise<CryptoKey> | undefined;
  #current: { jwt: string; issuedAtMs: number } | undefined;
  #signing: Promise<string> | undefined;

  constructor(config: ApnsConfig, refreshMs: number, now: () => number) {
    this.#config = config;
    this.#refreshMs = refreshMs;
    this.#now = now;
  }

  /** The cached token, or a freshly signed one when it is older than the refresh age. */
  get(): Promise<string> {
    const current = this.#current;
    if (current && this.#now() - current.issuedAtMs < this.#refreshMs) return Promise.resolve(current.jwt);
    this.#signing ??= this.#sign().finally(() => {
      this.#signing = undefined;
    });
    return this.#signing;
  }

  /** Forgets `jwt` if it is still the cached one (APNs said it expired). */
  invalidate(jwt: string): void {
    if (this.#current?.jwt === jwt) this.#current = undefined;
  }

  async #sign(): Promise<string> {
    this.#key ??= importPKCS8(this.#config.privateKey, 'ES256');
    const issuedAtMs = this.#now();
    const jwt = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: this.#config.keyId })
      .setIssuer(this.#config.teamId)
      .setIssuedAt(Math.floor(issuedAtMs / 1000))
      .sign(await this.#key);
    this.#current = { jwt, issuedAtMs };
    return jwt;
  }
}

/** Sends to APNs. One instance per Beams instance per shard; reuse it for every publish. */
export class ApnsClient implements GatewayClient {
  readonly platform = 'apns' as const;
  readonly #pool: Http2SessionPool;
  readonly #token: ApnsProviderToken;
  readonly #retry: Readonly<RetryPolicy>;
  readonly #now: () => number;
  readonly #closing = closingController();
  readonly #pause = new GatewayPause();
  readonly #guard: DeadTokenGuard;

  constructor(config: Readonly<ApnsConfig>, options: ApnsClientOptions = {}) {
    const refreshMs = options.tokenRefreshMs ?? 30 * MINUTE_MS;
    if (!(refreshMs >= 20 * MINUTE_MS && refreshMs <= 60 * MINUTE_MS)) {
      throw new RangeError(`APNs provider token refresh must be 20–60 minutes, got ${refreshMs} ms`);
    }
    // Catch a wrong key at start-up rather than on the first publish.
    const key = createPrivateKey(config.privateKey);
    if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
      throw new TypeError('APNs privateKey must be an EC P-256 key (the .p8 file, PEM PKCS8)');
    }
    this.#now = options.now ?? Date.now;
    this.#retry = resolveRetryPolicy(options.retry);
    this.#token = new ApnsProviderToken(config, refreshMs, this.#now);
    this.#guard = new DeadTokenGuard(
      `APNs ${new URL(config.endpoint).origin}`,
      'check the APNs endpoint/environment: push[].apns.endpoint must be https://api.sandbox.push.apple.com for development (sandbox) tokens and https://api.push.apple.com for production ones',
    );
    this.#pool = new Http2SessionPool({
      origin: config.endpoint,
      ca: config.caFile ? readFileSync(config.caFile) : undefined,
      size: options.poolSize ?? 2,
      requestTimeoutMs: options.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS,
    });
  }

  send(message: GatewayMessage): Promise<GatewayOutcome> {
    const request = buildApnsRequest(message);
    return withRetries(this.#retry, () => this.#attempt(request), this.#closing.signal, this.#pause)
      .then((outcome) => this.#guard.judge(outcome));
  }

  async close(): Promise<void> {
    this.#closing.abort();
    await this.#pool.close();
  }

  async #attempt(request: ApnsRequest): Promise<AttemptResult> {
    let jwt: string;
    try {
      jwt = await this.#token.get();
    } catch (error) {
      // A key that will not import or sign is a configuration error: retrying cannot help.
      return { kind: 'failed', reason: `provider token: ${error instanceof Error ? error.message : String(error)}` };
    }
    let response;
    try {
      response = await this.#pool.request({ ...request.headers, authorization: `bearer ${jwt}` }, request.body);
    } catch (error) {
      return transportFailure(error);
    }
    const { status } = response;
    if (status === 200) return { kind: 'sent' };
    const reason = apnsReason(response.body) ?? `HTTP ${status}`;
    if (status === 410 || (status === 400 && DEAD_TOKEN_REASONS_400.has(reason))) return { kind: 'dead-token', reason };
    if (status === 403 && reason === 'ExpiredProviderToken') {
      // Our token aged out (clock skew, long pause): sign a new one and try again.
      this.#token.invalidate(jwt);
      return { kind: 'retry', reason, status };
    }
    if (isRetryableStatus(status)) {
      const retryAfterMs = parseRetryAfter(response.headers['retry-after'], this.#now());
      return retryAfterMs === undefined ? { kind: 'retry', reason, status } : { kind: 'retry', reason, status, retryAfterMs };
    }
    return { kind: 'failed', reason, status };
  }
}

/** The `reason` of an APNs error body `{"reason": "...", "timestamp": ms}`, if readable. */
function apnsReason(body: Buffer): string | undefined {
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'));
    const reason = (parsed as { reason?: unknown } | null)?.reason;
    return typeof reason === 'string' && reason !== '' ? reason : undefined;
  } catch {
    return undefined;
  }
}
