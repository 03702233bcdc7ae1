/**
 * The one retry loop shared by the APNs, FCM and web push clients: exponential backoff with
 * jitter, Retry-After honoured (client-wide for 429/503, see gateway-pause.ts), abortable
 * when the client closes.
 */
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import type { GatewayOutcome, RetryPolicy } from './gateway.js';
import type { GatewayPause } from './gateway-pause.js';

/** Defaults: 3 requests in all, 200 ms first delay, no backoff above 10 s, Retry-After waited out up to 60 s. */
export const DEFAULT_RETRY_POLICY: Readonly<RetryPolicy> = Object.freeze({
  attempts: 3,
  baseDelayMs: 200,
  maxDelayMs: 10_000,
  maxPauseMs: 60_000,
});

/** Statuses whose Retry-After pauses the whole client, not just the one request. */
const PAUSING_STATUSES = new Set([429, 503]);
/** Sends released together at the end of a pause are spread over up to this share of it (and at most 1 s). */
const PAUSE_END_SPREAD = 0.1;

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
    maxPauseMs: overrides.maxPauseMs ?? DEFAULT_RETRY_POLICY.maxPauseMs,
  };
  if (!Number.isInteger(policy.attempts) || policy.attempts < 1) {
    throw new RangeError(`retry.attempts must be an integer >= 1, got ${policy.attempts}`);
  }
  if (!(policy.baseDelayMs >= 0)) throw new RangeError(`retry.baseDelayMs must be >= 0, got ${policy.baseDelayMs}`);
  if (!(policy.maxDelayMs >= policy.baseDelayMs)) {
    throw new RangeError(`retry.maxDelayMs (${policy.maxDelayMs}) must be >= retry.baseDelayMs (${policy.baseDelayMs})`);
  }
  if (!(policy.maxPauseMs >= 0)) throw new RangeError(`retry.maxPauseMs must be >= 0, got ${policy.maxPauseMs}`);
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

/**
 * The controller a client aborts on close(). Every send waiting on a delay or a pause listens
 * to its signal (as many as the shard's send concurrency), so the listener warning is off.
 */
export function closingController(): AbortController {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  return controller;
}

/** The outcome given to sends that are cut short because their client closed. */
export const CLOSED_OUTCOME: GatewayOutcome = Object.freeze({ kind: 'failed', reason: 'gateway client closed' });

/**
 * Runs `attempt` (1-based attempt number) until it gives a final outcome or `policy.attempts`
 * requests have been made; the last retryable failure then becomes `failed`. Waits
 * max(backoff, Retry-After) between attempts. A Retry-After above maxPauseMs fails at once:
 * the gateway asked for a pause longer than we are willing to hold a publish.
 *
 * With `pause` (the client's, or the origin's for web push), every attempt first waits until
 * the pause is over, and a 429/503 with Retry-After pauses every other send too. While the
 * pause left is above maxPauseMs, sends fail fast without a request, naming the answer that
 * asked for it.
 */
export async function withRetries(
  policy: Readonly<RetryPolicy>,
  attempt: (attemptNumber: number) => Promise<AttemptResult>,
  signal?: AbortSignal,
  pause?: GatewayPause,
): Promise<GatewayOutcome> {
  for (let attemptNumber = 1; ; attemptNumber++) {
    if (signal?.aborted) return CLOSED_OUTCOME;
    if (pause) {
      const stopped = await waitOutPause(pause, policy, signal);
      if (stopped) return stopped;
    }
    const result = await attempt(attemptNumber);
    if (result.kind !== 'retry') return result;
    const failed: GatewayOutcome = result.status === undefined
      ? { kind: 'failed', reason: result.reason }
      : { kind: 'failed', reason: result.reason, status: result.status };
    if (pause && result.retryAfterMs !== undefined && result.status !== undefined && PAUSING_STATUSES.has(result.status)) {
      pause.pauseFor(result.retryAfterMs, result.reason, result.status);
    }
    if (attemptNumber >= policy.attempts) return failed;
    let delayMs = backoffDelayMs(policy, attemptNumber);
    if (result.retryAfterMs !== undefined) {
      if (result.retryAfterMs > policy.maxPauseMs) {
        return { ...failed, reason: `${result.reason} (Retry-After ${seconds(result.retryAfterMs)} s exceeds the ${seconds(policy.maxPauseMs)} s pause limit)` };
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

/** Waits until `pause` is over; a final outcome when the send must not wait (pause too long, client closed). */
async function waitOutPause(pause: GatewayPause, policy: Readonly<RetryPolicy>, signal: AbortSignal | undefined): Promise<GatewayOutcome | undefined> {
  for (;;) {
    const { ms, reason, status } = pause.remaining();
    if (ms <= 0) return undefined;
    if (ms > policy.maxPauseMs) {
      const why = `${reason}: the gateway asked every request to wait ${seconds(ms)} s more (Retry-After), above the ${seconds(policy.maxPauseMs)} s pause limit; not sent`;
      return status === undefined ? { kind: 'failed', reason: why } : { kind: 'failed', reason: why, status };
    }
    try {
      await sleep(ms + Math.random() * Math.min(1000, ms * PAUSE_END_SPREAD), undefined, signal ? { signal } : undefined);
    } catch {
      return CLOSED_OUTCOME;
    }
  }
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1);
}
