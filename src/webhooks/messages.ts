/** Main ↔ shard messages of the webhooks area (type-only). */
import type { ChannelEventBody } from './emitter.js';

/**
 * One shard's webhook delivery counters. Counters (`sent` … `suppressed`) count since the
 * shard started; `pending`, `held`, `inFlight` and `deadLetterStored` are current values.
 * Events are counted once per receiver: an event sent to two URLs counts two.
 */
export interface WebhookStats {
  shard: number;
  /** Events delivered (their request answered 2xx). */
  sent: number;
  /** Requests answered 2xx. */
  requests: number;
  /** Requests that failed: non-2xx answer, timeout or network error. */
  failedAttempts: number;
  /** Events given up after `webhookDelivery.maxAttempts` failed attempts (or whose receiver left the config). */
  deadLettered: number;
  /** vacated/occupied (member removed/added) pairs dropped by the leave debounce. */
  suppressed: number;
  /** Events in the outbox, not yet delivered: waiting, held by the debounce, retrying or in flight. */
  pending: number;
  /** Of `pending`, events held by the leave debounce. */
  held: number;
  /** Requests currently open. */
  inFlight: number;
  /** Receivers (app or instance and URL) with events pending. */
  receivers: number;
  /** Dead-letter records kept in this shard's LMDB (the newest ones, up to a cap). */
  deadLetterStored: number;
}

export interface WebhookShardApi {
  /** Delivery counters of one shard; GET /metrics sums them over shards. */
  'webhooks.stats': { req: {}; res: WebhookStats };
  /**
   * Channel events decided elsewhere (a cluster's shared state in Redis, which also applied the
   * leave debounce): recorded in this shard's outbox as they are, not debounced again.
   * `retired`: the last events of a removed app, for the receivers it had (targets.ts).
   */
  'webhooks.channelEvents': { req: { appId: string; events: ChannelEventBody[]; retired?: boolean }; res: {} };
  /**
   * A stopping node's last call: resolves once every event due by now has had its first
   * delivery attempt (or after `waitMs`), with how many still had not. Held and retried events
   * stay in the outbox for the next start.
   */
  'webhooks.drain': { req: { waitMs: number }; res: { left: number } };
}
