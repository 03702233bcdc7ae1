/**
 * Web push client: RFC 8291 (aes128gcm) payload encryption and RFC 8292 VAPID via the
 * `web-push` library, delivered (RFC 8030) with node:https over a keep-alive agent. Tokens
 * are parsed by ../web-subscription.ts with the rules the device API applies at registration,
 * so an endpoint on a private address registered before the rule is still not sent to, and
 * the agent connects only to public addresses (net/outbound-guard.ts: checked when the name is
 * resolved, the checked address is the one connected to). Redirects are never followed. Per
 * push service origin, a 429/503 Retry-After pauses every send to it (gateway-pause.ts) and
 * its 404/410 answers delete devices only once it has accepted a send (dead-token-guard.ts).
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import webpush from 'web-push';
import { DeadTokenGuard } from './dead-token-guard.js';
import { DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS, type GatewayClient, type GatewayClientOptions, type GatewayMessage, type GatewayOutcome, type RetryPolicy, type WebPushConfig } from './gateway.js';
import { GatewayPause } from './gateway-pause.js';
import {
  closingController, isRetryableStatus, parseRetryAfter, resolveRetryPolicy, transportFailure, withRetries, type AttemptResult,
} from './retry.js';
import { parseSubscriptionToken, type PushSubscriptionJson } from '../web-subscription.js';
import { OutboundAddressRefused, OutboundGuard } from '../../net/outbound-guard.js';
import { countOutboundRefusal } from '../../shards/shard-counters.js';

export interface WebPushClientOptions extends GatewayClientOptions {
  /** Keep-alive sockets per push service origin. Default 64. */
  maxSocketsPerOrigin?: number;
  /** Private addresses and CIDR ranges push services may be on (`outbound.allowPrivateAddresses`). */
  allowPrivateAddresses?: readonly string[];
}

/** Default TTL: how long the push service keeps an undelivered message, in seconds (4 weeks, as web-push). */
export const DEFAULT_WEB_PUSH_TTL_S = 2_419_200;

/** Push service origins whose pause and dead-token guard are remembered (the oldest is forgotten first). */
const MAX_TRACKED_ORIGINS = 1024;

/** What the client keeps per push service origin: each service answers for itself. */
interface OriginState {
  pause: GatewayPause;
  guard: DeadTokenGuard;
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
  readonly #allowPrivateEndpoints: boolean;
  readonly #allowPrivateAddresses: readonly string[];
  readonly #guard: OutboundGuard;
  readonly #closing = closingController();
  readonly #origins = new Map<string, OriginState>();

  constructor(config: Readonly<WebPushConfig>, options: WebPushClientOptions = {}) {
    this.#vapid = { subject: config.subject, publicKey: config.vapidPublicKey, privateKey: config.vapidPrivateKey };
    // Fail at start-up, not on every send, if the VAPID keys or subject are unusable.
    webpush.getVapidHeaders('https://push.example', this.#vapid.subject, this.#vapid.publicKey, this.#vapid.privateKey, 'aes128gcm');
    this.#retry = resolveRetryPolicy(options.retry);
    this.#timeoutMs = options.requestTimeoutMs ?? DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS;
    this.#allowPrivateEndpoints = config.allowPrivateEndpoints ?? false;
    this.#allowPrivateAddresses = options.allowPrivateAddresses ?? [];
    this.#guard = new OutboundGuard({
      allowPrivateAddresses: this.#allowPrivateAddresses,
      allowAll: this.#allowPrivateEndpoints,
      onRefused: (reason) => countOutboundRefusal('web_push', reason),
    });
    this.#agent = new https.Agent({
      keepAlive: true,
      lookup: this.#guard.lookup,
      maxSockets: options.maxSocketsPerOrigin ?? 64,
      ...(config.caFile ? { ca: readFileSync(config.caFile) } : {}),
    });
  }

  send(message: GatewayMessage): Promise<GatewayOutcome> {
    const parsed = parseSubscriptionToken(message.token, { allowPrivateEndpoints: this.#allowPrivateEndpoints, allowPrivateAddresses: this.#allowPrivateAddresses });
    if (!parsed.ok) {
      // A private endpoint is refused by configuration, not by the push service: keep the device.
      if (parsed.privateEndpoint) return Promise.resolve({ kind: 'failed', reason: `EndpointNotAllowed: ${parsed.reason}` });
      return Promise.resolve({ kind: 'dead-token', reason: 'InvalidSubscription' });
    }
    const { subscription } = parsed;
    const { time_to_live: ttl, ...payload } = message.payload;
    const ttlSeconds = typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0 ? Math.trunc(ttl) : DEFAULT_WEB_PUSH_TTL_S;
    const plaintext = JSON.stringify(payload);
    const origin = this.#originState(new URL(subscription.endpoint).origin);
    // Encrypt once per attempt: each attempt gets a fresh salt, key pair and VAPID JWT (whose exp is 12 h ahead).
    return withRetries(this.#retry, () => this.#attempt(subscription, plaintext, ttlSeconds), this.#closing.signal, origin.pause)
      .then((outcome) => origin.guard.judge(outcome));
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
      // Refused by the operator's rule, not by the push service: final, and the device is kept.
      if (error instanceof OutboundAddressRefused) return { kind: 'failed', reason: `EndpointNotAllowed: ${error.message}` };
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

  /** The pause and guard of one push service origin, created on first use. */
  #originState(origin: string): OriginState {
    let state = this.#origins.get(origin);
    if (!state) {
      state = {
        pause: new GatewayPause(),
        guard: new DeadTokenGuard(`web push service ${origin}`, 'check that this push service accepts Herald\'s VAPID key and requests'),
      };
      this.#origins.set(origin, state);
      // Endpoints come from unauthenticated registrations: bound what they can make us remember.
      if (this.#origins.size > MAX_TRACKED_ORIGINS) this.#origins.delete(this.#origins.keys().next().value!);
    }
    return state;
  }

  #post(details: webpush.RequestDetails): Promise<{ status: number; retryAfter: string | undefined }> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(details.headers)) {
      if (value !== undefined && value !== null) headers[name] = String(value);
    }
    // A literal address is never looked up: checked here; a name is checked by the agent's lookup.
    this.#guard.checkHost(new URL(details.endpoint).hostname);
    return new Promise((resolve, reject) => {
      const request = https.request(details.endpoint, {
        method: 'POST',
        headers,
        agent: this.#agent,
      }, (response) => {
        // The body of a push service answer carries nothing we act on; drain it so the socket is reused.
        response.resume();
        response.on('end', () => {
          clearTimeout(deadline);
          const retryAfter = response.headers['retry-after'];
          resolve({ status: response.statusCode ?? 0, retryAfter });
        });
        response.on('error', (error) => {
          clearTimeout(deadline);
          reject(error);
        });
      });
      // A deadline for the whole exchange (a socket timeout would only catch silence).
      const deadline = setTimeout(() => {
        request.destroy(Object.assign(new Error(`no response within ${this.#timeoutMs} ms`), { code: 'ETIMEDOUT' }));
      }, this.#timeoutMs);
      request.on('error', (error) => {
        clearTimeout(deadline);
        reject(error);
      });
      request.end(details.body ?? undefined);
    });
  }
}
