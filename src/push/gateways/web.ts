/**
 * Web push client: RFC 8291 (aes128gcm) payload encryption and RFC 8292 VAPID via the
 * `web-push` library, delivered (RFC 8030) with node:https over a keep-alive agent.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import webpush from 'web-push';
import type { GatewayClient, GatewayMessage, GatewayOutcome, RetryPolicy, WebPushConfig } from './gateway.js';
import {
  isRetryableStatus, parseRetryAfter, resolveRetryPolicy, transportFailure, withRetries, type AttemptResult,
} from './retry.js';

export interface WebPushClientOptions {
  retry?: Partial<RetryPolicy>;
  /** Deadline per request in ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** Keep-alive sockets per push service origin. Default 64. */
  maxSocketsPerOrigin?: number;
}

/** A browser PushSubscription as `JSON.stringify` renders it. */
export interface PushSubscriptionJson {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

/** Default TTL: how long the push service keeps an undelivered message, in seconds (4 weeks, as web-push). */
export const DEFAULT_WEB_PUSH_TTL_S = 2_419_200;

/**
 * Decodes a Beams web device token: base64 (or base64url, or raw JSON) of the PushSubscription
 * JSON. Undefined when it is not a usable subscription (https endpoint, both keys present).
 */
export function decodeSubscriptionToken(token: string): PushSubscriptionJson | undefined {
  let parsed: unknown;
  try {
    // Node's base64 decoder also accepts the base64url alphabet and missing padding.
    const json = token.trimStart().startsWith('{') ? token : Buffer.from(token, 'base64').toString('utf8');
    parsed = JSON.parse(json);
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object') return undefined;
  const { endpoint, keys } = parsed as { endpoint?: unknown; keys?: { p256dh?: unknown; auth?: unknown } | null };
  if (typeof endpoint !== 'string' || !keys || typeof keys.p256dh !== 'string' || typeof keys.auth !== 'string') return undefined;
  try {
    if (new URL(endpoint).protocol !== 'https:') return undefined;
  } catch {
    return undefined;
  }
  return { endpoint, keys: { p256dh: keys.p256dh, auth: keys.auth } };
}

/**
 * Sends to browser push services. The plaintext is the publish's `web` object as JSON, minus
 * `time_to_live` which, when a non-negative number of seconds, becomes the TTL header
 * (default 4 weeks).
 */
export class WebPushClient implements GatewayClient {
  readonly platform = 'web' as const;
  readonly #vapid: { subject: string; publicKey: string; privateKey: string };
  readonly #agent: https.Agent;
  readonly #retry: Readonly<RetryPolicy>;
  readonly #timeoutMs: number;
  readonly #closing = new AbortController();

  constructor(config: Readonly<WebPushConfig>, options: WebPushClientOptions = {}) {
    this.#vapid = { subject: config.subject, publicKey: config.vapidPublicKey, privateKey: config.vapidPrivateKey };
    // Fail at start-up, not on every send, if the VAPID keys or subject are unusable.
    webpush.getVapidHeaders('https://push.example', this.#vapid.subject, this.#vapid.publicKey, this.#vapid.privateKey, 'aes128gcm');
    this.#retry = resolveRetryPolicy(options.retry);
    this.#timeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#agent = new https.Agent({
      keepAlive: true,
      maxSockets: options.maxSocketsPerOrigin ?? 64,
      ...(config.caFile ? { ca: readFileSync(config.caFile) } : {}),
    });
  }

  send(message: GatewayMessage): Promise<GatewayOutcome> {
    const subscription = decodeSubscriptionToken(message.token);
    if (!subscription) return Promise.resolve({ kind: 'dead-token', reason: 'InvalidSubscription' });
    const { time_to_live: ttl, ...payload } = message.payload;
    const ttlSeconds = typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0 ? Math.trunc(ttl) : DEFAULT_WEB_PUSH_TTL_S;
    const plaintext = JSON.stringify(payload);
    // Encrypt once per attempt: each attempt gets a fresh salt, key pair and VAPID JWT (whose exp is 12 h ahead).
    return withRetries(this.#retry, () => this.#attempt(subscription, plaintext, ttlSeconds), this.#closing.signal);
  }

  async close(): Promise<void> {
    this.#closing.abort();
    this.#agent.destroy();
  }

  async #attempt(subscription: PushSubscriptionJson, plaintext: string, ttlSeconds: number): Promise<AttemptResult> {
    let details: webpush.RequestDetails;
    try {
      details = webpush.generateRequestDetails(subscription, plaintext, {
        vapidDetails: this.#vapid,
        TTL: ttlSeconds,
        contentEncoding: 'aes128gcm',
      });
    } catch (error) {
      // VAPID settings were checked at construction, so this is the subscription's keys being unusable.
      return { kind: 'dead-token', reason: `InvalidSubscription: ${error instanceof Error ? error.message : String(error)}` };
    }
    let response: { status: number; retryAfter: string | undefined };
    try {
      response = await this.#post(details);
    } catch (error) {
      return transportFailure(error);
    }
    const { status } = response;
    if (status === 200 || status === 201 || status === 202) return { kind: 'sent' };
    if (status === 404 || status === 410) return { kind: 'dead-token', reason: `HTTP ${status}` };
    if (isRetryableStatus(status)) {
      const retryAfterMs = parseRetryAfter(response.retryAfter);
      return retryAfterMs === undefined
        ? { kind: 'retry', reason: `HTTP ${status}`, status }
        : { kind: 'retry', reason: `HTTP ${status}`, status, retryAfterMs };
    }
    return { kind: 'failed', reason: `HTTP ${status}`, status };
  }

  #post(details: webpush.RequestDetails): Promise<{ status: number; retryAfter: string | undefined }> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(details.headers)) {
      if (value !== undefined && value !== null) headers[name] = String(value);
    }
    return new Promise((resolve, reject) => {
      const request = https.request(details.endpoint, {
        method: 'POST',
        headers,
        agent: this.#agent,
        timeout: this.#timeoutMs,
      }, (response) => {
        // The body of a push service answer carries nothing we act on; drain it so the socket is reused.
        response.resume();
        response.on('end', () => {
          const retryAfter = response.headers['retry-after'];
          resolve({ status: response.statusCode ?? 0, retryAfter });
        });
        response.on('error', reject);
      });
      request.on('timeout', () => request.destroy(Object.assign(new Error(`no response within ${this.#timeoutMs} ms`), { code: 'ETIMEDOUT' })));
      request.on('error', reject);
      request.end(details.body ?? undefined);
    });
  }
}
