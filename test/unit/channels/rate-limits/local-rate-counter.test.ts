import { describe, expect, it } from 'vitest';
import { LocalRateCounter } from '../../../../src/channels/rate-limits/local-rate-counter.js';

describe('LocalRateCounter', () => {
  it('takes up to the limit per one-second window, refuses past it with the ms left, and starts afresh next second', () => {
    let now = 10_000;
    const counter = new LocalRateCounter(() => now);
    expect(counter.take('a', 2, 3)).toBe(0);
    expect(counter.take('a', 1, 3)).toBe(0);
    now = 10_250;
    expect(counter.take('a', 1, 3)).toBe(750);
    // Another key has its own count; a refusal took nothing.
    expect(counter.take('b', 3, 3)).toBe(0);
    now = 11_000;
    expect(counter.take('a', 3, 3)).toBe(0);
    expect(counter.take('a', 1, 3)).toBe(1000);
  });

  it('refuses a cost larger than the limit without taking anything', () => {
    const counter = new LocalRateCounter(() => 5_500);
    expect(counter.take('a', 4, 3)).toBe(500);
    expect(counter.take('a', 3, 3)).toBe(0);
  });
});
