/**
 * The per-app rate limits, applied at the edges: the channel HTTP API (requests, events) and
 * the WebSocket endpoint (new connections, per app and per client IP). `null` turns a limit off
 * and costs nothing. Every refusal is counted per app and limit for /metrics (node-counters.ts).
 */
import type { AppConfig } from '../../config/schema.js';
import { HeraldError } from '../../errors.js';
import { countRateLimited, type RateLimitName } from '../../metrics/node-counters.js';
import type { RateCounter } from './rate-counter.js';

/** Whole seconds for Retry-After: the rest of the window, at least 1. */
export function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

export class AppRateLimits {
  constructor(private readonly counter: RateCounter) {}

  /**
   * Counts one channel API request; throws (or rejects with) APP_RATE_LIMITED (429, with
   * retryAfterSeconds) past `maxHttpRequestsPerSecond`. Undefined when the app has no limit.
   */
  httpRequest(app: AppConfig): void | Promise<void> {
    const limit = app.maxHttpRequestsPerSecond;
    if (limit === null) return;
    return this.refuseWith(this.counter.take(`h:${app.id}`, 1, limit), app, 'maxHttpRequestsPerSecond', () =>
      new HeraldError('APP_RATE_LIMITED', `Application ${app.id} is over its maxHttpRequestsPerSecond of ${limit}; retry after the Retry-After seconds`),
    );
  }

  /** Counts `events` triggered events (C1: 1, C2: the batch's length); APP_EVENT_RATE_LIMITED past `maxEventsPerSecond`. */
  events(app: AppConfig, events: number): void | Promise<void> {
    const limit = app.maxEventsPerSecond;
    if (limit === null) return;
    return this.refuseWith(this.counter.take(`e:${app.id}`, events, limit), app, 'maxEventsPerSecond', () =>
      new HeraldError(
        'APP_EVENT_RATE_LIMITED',
        `Application ${app.id} is over its maxEventsPerSecond of ${limit} (this request triggers ${events}); retry after the Retry-After seconds`,
      ),
    );
  }

  /**
   * Counts a new WebSocket connection of the app from the client address `ip()` (read only for a per-IP limit): answers null when it may open, or
   * the reason it may not (the limit passed). Checked per IP first; a refusal takes nothing
   * from the app-wide limit.
   */
  newConnection(app: AppConfig, ip: () => string): string | null | Promise<string | null> {
    const perIp = app.maxNewConnectionsPerSecondPerIp;
    const perApp = app.maxNewConnectionsPerSecond;
    if (perIp === null && perApp === null) return null;
    const appWide = (): string | null | Promise<string | null> => {
      if (perApp === null) return null;
      return then(this.counter.take(`c:${app.id}`, 1, perApp), (waitMs) => {
        if (waitMs === 0) return null;
        countRateLimited(app.id, 'maxNewConnectionsPerSecond');
        return `Application is over its maxNewConnectionsPerSecond of ${perApp}: retry in ${retryAfterSeconds(waitMs)} s`;
      });
    };
    if (perIp === null) return appWide();
    return then(this.counter.take(`i:${app.id}\0${ip()}`, 1, perIp), (waitMs) => {
      if (waitMs === 0) return appWide();
      countRateLimited(app.id, 'maxNewConnectionsPerSecondPerIp');
      return `Application is over its maxNewConnectionsPerSecondPerIp of ${perIp} for this address: retry in ${retryAfterSeconds(waitMs)} s`;
    });
  }

  private refuseWith(taken: number | Promise<number>, app: AppConfig, limit: RateLimitName, error: () => HeraldError): void | Promise<void> {
    return then(taken, (waitMs) => {
      if (waitMs === 0) return;
      countRateLimited(app.id, limit);
      const err = error();
      err.retryAfterSeconds = retryAfterSeconds(waitMs);
      throw err;
    });
  }
}

/** Applies `f` at once to a plain value (one node: no promise on the hot path), after it resolves otherwise. */
function then<T, R>(value: T | Promise<T>, f: (v: T) => R | Promise<R>): R | Promise<R> {
  return value instanceof Promise ? value.then(f) : f(value);
}
