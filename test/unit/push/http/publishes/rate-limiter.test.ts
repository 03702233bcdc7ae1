import { describe, expect, it } from 'vitest';
import { PublishRateLimiter } from '../../../../../src/push/http/publishes/rate-limiter.js';

describe('PublishRateLimiter', () => {
  it('allows `limit` requests in any one-second window, per instance', () => {
    let now = 10_000;
    const limiter = new PublishRateLimiter(() => now);
    for (const at of [10_000, 10_100, 10_200]) {
      now = at;
      limiter.take('a', 3);
    }
    expect(() => limiter.take('a', 3)).toThrow(expect.objectContaining({ code: 'PUBLISH_RATE_LIMITED', status: 429 }));
    limiter.take('b', 3); // another instance has its own window
    now = 10_999;
    expect(() => limiter.take('a', 3)).toThrow(/at most 3 per second/);
    now = 11_000; // the request of 10 000 left the window: one slot
    limiter.take('a', 3);
    expect(() => limiter.take('a', 3)).toThrow();
    now = 11_100; // the one of 10 100 left too
    limiter.take('a', 3);
    expect(() => limiter.take('a', 3)).toThrow();
    now = 13_000;
    for (let i = 0; i < 3; i++) limiter.take('a', 3);
  });
});
