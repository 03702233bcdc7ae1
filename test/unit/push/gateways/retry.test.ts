import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs, isRetryableStatus, parseRetryAfter, resolveRetryPolicy, withRetries, type AttemptResult,
} from '../../../../src/push/gateways/retry.js';
import { GatewayPause } from '../../../../src/push/gateways/gateway-pause.js';

describe('retry helpers', () => {
  it('fills defaults and rejects nonsense', () => {
    expect(resolveRetryPolicy()).toEqual({ attempts: 3, baseDelayMs: 200, maxDelayMs: 10_000, maxPauseMs: 60_000 });
    expect(() => resolveRetryPolicy({ maxPauseMs: -1 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ attempts: 0 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ baseDelayMs: 50, maxDelayMs: 10 })).toThrow(RangeError);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(['0'], now)).toBe(0);
    expect(parseRetryAfter('Tue, 01 Jan 2030 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Mon, 31 Dec 2029 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });

  it('grows delays exponentially with jitter in the upper half, capped', () => {
    const policy = resolveRetryPolicy({ baseDelayMs: 100, maxDelayMs: 300 });
    expect(backoffDelayMs(policy, 1, () => 0)).toBe(50);
    expect(backoffDelayMs(policy, 1, () => 1)).toBe(100);
    expect(backoffDelayMs(policy, 2, () => 1)).toBe(200);
    expect(backoffDelayMs(policy, 5, () => 1)).toBe(300);
  });

  it('treats 429 and 5xx as retryable', () => {
    expect([429, 500, 503, 599].every(isRetryableStatus)).toBe(true);
    expect([400, 403, 404, 410, 413].some(isRetryableStatus)).toBe(false);
  });

  it('stops at the first final outcome, or turns the last retry into failed', async () => {
    const policy = resolveRetryPolicy({ attempts: 3, baseDelayMs: 1 });
    const script: AttemptResult[] = [{ kind: 'retry', reason: 'busy', status: 503 }, { kind: 'sent' }];
    let calls = 0;
    expect(await withRetries(policy, async () => script[calls++]!)).toEqual({ kind: 'sent' });
    expect(calls).toBe(2);
    calls = 0;
    expect(await withRetries(policy, async () => {
      calls++;
      return { kind: 'retry', reason: 'busy', status: 503 };
    })).toEqual({ kind: 'failed', reason: 'busy', status: 503 });
    expect(calls).toBe(3);
  });

  it('with a pause: a 429 Retry-After makes every other send wait, a pause above maxPauseMs fails them without an attempt', async () => {
    const policy = resolveRetryPolicy({ attempts: 3, baseDelayMs: 1, maxPauseMs: 1_000 });
    const pause = new GatewayPause();
    const calls: number[] = [];
    const started = performance.now();
    const throttled = await withRetries(policy, async (n) => {
      calls.push(performance.now() - started);
      return n === 1 ? { kind: 'retry', reason: 'TooManyRequests', status: 429, retryAfterMs: 300 } : { kind: 'sent' };
    }, undefined, pause);
    expect(throttled).toEqual({ kind: 'sent' });
    expect(calls[1]).toBeGreaterThanOrEqual(295);

    pause.pauseFor(300, 'TooManyRequests', 429);
    const waited = performance.now();
    expect(await withRetries(policy, async () => ({ kind: 'sent' }), undefined, pause)).toEqual({ kind: 'sent' });
    expect(performance.now() - waited).toBeGreaterThanOrEqual(295);

    pause.pauseFor(5_000, 'TooManyRequests', 429);
    let attempted = false;
    const refused = await withRetries(policy, async () => {
      attempted = true;
      return { kind: 'sent' };
    }, undefined, pause);
    expect(attempted).toBe(false);
    expect(refused).toMatchObject({ kind: 'failed', status: 429, reason: expect.stringMatching(/^TooManyRequests: .*above the 1 s pause limit; not sent$/) });
  });

  it('a 500 with Retry-After delays only its own send', async () => {
    const policy = resolveRetryPolicy({ attempts: 2, baseDelayMs: 1 });
    const pause = new GatewayPause();
    await withRetries(policy, async (n) => (n === 1 ? { kind: 'retry', reason: 'busy', status: 500, retryAfterMs: 50 } : { kind: 'sent' }), undefined, pause);
    expect(pause.remaining().ms).toBe(0);
  });

  it('ends early when aborted', async () => {
    const controller = new AbortController();
    const policy = resolveRetryPolicy({ attempts: 5, baseDelayMs: 5_000 });
    const pending = withRetries(policy, async () => ({ kind: 'retry', reason: 'busy' }), controller.signal);
    controller.abort();
    expect(await pending).toEqual({ kind: 'failed', reason: 'gateway client closed' });
  });
});
