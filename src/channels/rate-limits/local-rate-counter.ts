/**
 * A RateCounter in this process' memory: one node. Windows are whole seconds of the clock, so
 * every key shares one window and the map is cleared when a new second starts: memory is one
 * entry per key seen in the current second (per-IP keys included), never more.
 */
import type { RateCounter } from './rate-counter.js';

export class LocalRateCounter implements RateCounter {
  private readonly used = new Map<string, number>();
  private windowSecond = 0;

  /** `now` returns epoch milliseconds (a parameter so tests can move the clock). */
  constructor(private readonly now: () => number = Date.now) {}

  take(key: string, cost: number, limit: number): number {
    const now = this.now();
    const second = Math.floor(now / 1000);
    if (second !== this.windowSecond) {
      this.windowSecond = second;
      this.used.clear();
    }
    const used = this.used.get(key) ?? 0;
    if (used + cost > limit) return 1000 - (now % 1000);
    this.used.set(key, used + cost);
    return 0;
  }
}
