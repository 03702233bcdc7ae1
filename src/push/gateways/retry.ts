/**
 * The one retry loop shared by the APNs, FCM and web push clients: exponential backoff with
 * jitter, Retry-After honoured, abortable when the client closes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewayOutcome, RetryPolicy } from './gateway.js';

/** Defaults: 3 requests in all, 200 ms first delay, no single delay above 10 s. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  attempts: 3,
  baseDelayMs: 200,
  maxDelayMs: 10_000,
});

/** An attempt that should be tried again (429, 5xx, network error). `retryAfterMs` is the server's Retry-After, in ms. */
export interface RetryableFailure {
  kind: 'retry';
  reason: string;
  status?: number;
  retryAfterMs?: number;
}

/** What one request concluded: a final outcome, or "try again". */
export type AttemptResult = GatewayOutcome | RetryableFailure;

/** Fills in defaults and checks ranges once, when a client is built; throws RangeError on nonsense. */
export function resolveRetryPolicy(overrides: Partial<RetryPolicy> = {}): Readonly<RetryPolicy> {
  const policy: RetryPolicy = {
    attempts: overrides.attempts ?? DEFAULT_RETRY_POLICY.attempts,
    baseDelayMs: overrides.baseDelayMs ?? DEFAULT_RETRY_POLICY.baseDelayMs,
    maxDelayMs: overrides.maxDelayMs ?? Math.max(DEFAULT_RETRY_POLICY.maxDelayMs, overrides.baseDelayMs ?? 0),
  };
  if (!Number.isInteger(policy.attempts) || policy.attempts < 1) {
    throw new RangeError(`retry.attempts must be an integer >= 1, got ${policy.attempts}`);
  }
  if (!(policy.baseDelayMs >= 0)) throw new RangeError(`retry.baseDelayMs must be >= 0, got ${policy.baseDelayMs}`);
  if (!(policy.maxDelayMs >= policy.baseDelayMs)) {
    throw new RangeError(`retry.maxDelayMs (${policy.maxDelayMs}) must be >= retry.baseDelayMs (${policy.baseDelayMs})`);
  }
  return Object.freeze(policy);
}

/** True for the statuses every gateway documents as "try again later": 429 and 5xx. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || (status >= 500 && status <= 599);
}

/**
 * Parses a Retry-After header (RFC 9110: delay in seconds, or an HTTP date) into milliseconds
 * from `nowMs`. Undefined when absent or unreadable; never negative.
 */
export function parseRetryAfter(value: string | string[] | number | undefined, nowMs: number = Date.now()): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined) return undefined;
  const text = String(raw).trim();
  if (text === '') return undefined;
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - nowMs);
}

/**
 * Delay before retry number `retry` (1 for the first retry), in ms: baseDelayMs * 2^(retry-1),
 * capped at maxDelayMs, then "equal jitter" (uniform in the upper half) so that many sends
 * failing together do not come back together.
 */
export function backoffDelayMs(policy: Readonly<RetryPolicy>, retry: number, random: () => number = Math.random): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  return exponential / 2 + random() * (exponential / 2);
}

/** Turns an error thrown by the transport (refused, reset, TLS, timeout) into a retryable failure. */
export function transportFailure(error: unknown): RetryableFailure {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return { kind: 'retry', reason: `network: ${typeof code === 'string' ? `${code} ` : ''}${message}`.trim() };
}

/** The outcome given to sends that are cut short because their client closed. */
export const CLOSED_OUTCOME: GatewayOutcome = Object.freeze({ kind: 'failed', reason: 'gateway client closed' });

/**
 * Runs `attempt` (1-based attempt number) until it gives a final outcome or `policy.attempts`
 * requests have been made; the last retryable failure then becomes `failed`. Waits
 * max(backoff, Retry-After) between attempts. A Retry-After above maxDelayMs fails at once:
 * the gateway asked for a pause longer than we are willing to hold a publish.
 */
export async function withRetries(
  policy: Readonly<RetryPolicy>,
  attempt: (attemptNumber: number) => Promise<AttemptResult>,
  signal?: AbortSignal,
): Promise<GatewayOutcome> {
  for (let attemptNumber = 1; ; attemptNumber++) {
    if (signal?.aborted) return CLOSED_OUTCOME;
    const result = await attempt(attemptNumber);
    if (result.kind !== 'retry') return result;
    const failed: GatewayOutcome = result.status === undefined
      ? { kind: 'failed', reason: result.reason }
      : { kind: 'failed', reason: result.reason, status: result.status };
    if (attemptNumber >= policy.attempts) return failed;
    let delayMs = backoffDelayMs(policy, attemptNumber);
    if (result.retryAfterMs !== undefined) {
      if (result.retryAfterMs > policy.maxDelayMs) {
        return { ...failed, reason: `${result.reason} (Retry-After ${result.retryAfterMs} ms exceeds retry.maxDelayMs)` };
      }
      delayMs = Math.max(delayMs, result.retryAfterMs);
    }
    try {
      await sleep(delayMs, undefined, signal ? { signal } : undefined);
    } catch {
      return CLOSED_OUTCOME; // aborted by close()
    }
  }
}
