/**
 * The contract between the push publisher (running in shard worker threads) and the
 * per-platform gateway clients (the platforms themselves: ../platform.ts). Each implementation
 * lives in its own file (apns.ts, fcm.ts, web.ts) and factory.ts builds them from an
 * instance's config.
 */
import type { Platform } from '../platform.js';

/** One notification for one device; payload is the publish's platform object (apns/fcm/web) with data.pusher already merged in by the caller. */
export interface GatewayMessage {
  /** Herald's device id, carried for logging and reporting only; never sent to the gateway. */
  deviceId: string;
  /** The gateway token: APNs device token (hex), FCM registration token, or base64 PushSubscription JSON for web. */
  token: string;
  /** APNs topic (the app's bundle id). Ignored by FCM and web push. */
  bundleIdentifier?: string;
  payload: Record<string, unknown>;
}

/**
 * What became of one send. `dead-token` means the gateway said the token will never work again,
 * so the caller should delete the device; `failed` is anything else that did not deliver
 * (after retries, where retrying made sense). `status` is the last HTTP status, when there was one.
 */
export type GatewayOutcome =
  | { kind: 'sent' }
  | { kind: 'dead-token'; reason: string }
  | { kind: 'failed'; reason: string; status?: number };

/**
 * A long-lived client for one platform of one instance. `send` never rejects for gateway or
 * network trouble (that is a `failed` outcome); a rejection means a bug.
 */
export interface GatewayClient {
  readonly platform: Platform;
  send(message: GatewayMessage): Promise<GatewayOutcome>;
  /** Closes connections; sends still waiting on a retry delay resolve as `failed`. */
  close(): Promise<void>;
}

/** Gateway credentials, as the config schema defines them (src/config/schema.ts, docs/configuration.md). */
export type { ApnsConfig, FcmConfig, WebPushConfig } from '../../config/schema.js';

/**
 * How hard to try on retryable answers (429, 5xx, network errors). `attempts` counts every
 * request including the first; backoff delays grow as baseDelayMs * 2^(n-1) with jitter,
 * capped at maxDelayMs. A Retry-After is honoured up to maxPauseMs; a 429 or 503 with
 * Retry-After pauses the whole client (web push: that push service) for that long. A longer
 * Retry-After fails the send, and every send of the client until the pause is over, rather
 * than holding a publish longer than the policy allows.
 */
export interface RetryPolicy {
  /** Total requests per send, at least 1. Default 3. */
  attempts: number;
  /** First backoff delay in milliseconds. Default 200. */
  baseDelayMs: number;
  /** Upper bound on one backoff delay in milliseconds. Default 10 000. */
  maxDelayMs: number;
  /** Longest Retry-After (milliseconds) waited out rather than failing. Default 60 000. */
  maxPauseMs: number;
}

/** Deadline per gateway request when a client is given none (ms). */
export const DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS = 10_000;

/** What every gateway client is tuned with. */
export interface GatewayClientOptions {
  retry?: Partial<RetryPolicy>;
  /** Deadline per request in ms. Default DEFAULT_GATEWAY_REQUEST_TIMEOUT_MS. */
  requestTimeoutMs?: number;
}
