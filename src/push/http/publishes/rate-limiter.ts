/**
 * `maxPublishesPerSecond` (429 with `Retry-After` above it): a sliding one-second window per instance, kept in
 * memory on the main thread (per process: several nodes each allow the limit). The window
 * remembers the times of the last `limit` accepted requests in a ring, so a check is O(1)
 * and memory is `limit` numbers per instance. Refused requests are not counted.
 */
import { HeraldError } from '../../../errors.js';

const WINDOW_MS = 1000;

interface Ring {
  /** Accept times (ms), oldest at `next` once the ring is full. */
  times: Float64Array;
  next: number;
  filled: number;
}

/** Per-instance sliding-window rate limit of publish requests (main thread). */
export class PublishRateLimiter {
  private readonly rings = new Map<string, Ring>();

  /** `now` returns milliseconds (a parameter so tests can move the clock). */
  constructor(private readonly now: () => number = () => performance.now()) {}

  /**
   * Counts one request for the instance, or throws 429 PUBLISH_RATE_LIMITED when `limit`
   * requests were already accepted within the last second.
   */
  take(instanceId: string, limit: number): void {
    const now = this.now();
    let ring = this.rings.get(instanceId);
    if (!ring || ring.times.length !== limit) {
      ring = { times: new Float64Array(limit), next: 0, filled: 0 };
      this.rings.set(instanceId, ring);
    }
    if (ring.filled === limit && now - ring.times[ring.next]! < WINDOW_MS) {
      const err = new HeraldError(
        'PUBLISH_RATE_LIMITED',
        `Too many publish requests: at most ${limit} per second for instance ${instanceId}; retry after a short pause`,
      );
      // Whole seconds until the oldest accepted request leaves the window (Retry-After).
      err.retryAfterSeconds = Math.max(1, Math.ceil((WINDOW_MS - (now - ring.times[ring.next]!)) / 1000));
      throw err;
    }
    ring.times[ring.next] = now;
    ring.next = (ring.next + 1) % limit;
    if (ring.filled < limit) ring.filled++;
  }
}
