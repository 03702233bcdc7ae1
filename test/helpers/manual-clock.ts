/**
 * A clock a test moves by hand, for code that takes an injected clock (the webhook delivery
 * engine's DeliveryClock): `now()` stands still until `advance`, and timers fire only then, in
 * the order they are due, each with the clock set to its due time.
 */
import type { DeliveryClock } from '../../src/webhooks/delivery-engine.js';

interface Timer {
  at: number;
  run: () => void;
  id: number;
}

export class ManualClock implements DeliveryClock {
  #now: number;
  #timers: Timer[] = [];
  #ids = 0;

  constructor(start = Date.now()) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(run: () => void, ms: number): unknown {
    const timer = { at: this.#now + Math.max(0, ms), run, id: ++this.#ids };
    this.#timers.push(timer);
    return timer.id;
  }

  clearTimeout(id: unknown): void {
    this.#timers = this.#timers.filter((t) => t.id !== id);
  }

  /** When the next timer is due (Infinity when none is set). */
  nextDue(): number {
    return Math.min(Number.POSITIVE_INFINITY, ...this.#timers.map((t) => t.at));
  }

  /** Timers set and not fired yet. */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves the clock `ms` forward, firing every timer due by then (also those they set). */
  advance(ms: number): void {
    const to = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= to).sort((a, b) => a.at - b.at || a.id - b.id)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t !== due);
      this.#now = Math.max(this.#now, due.at);
      due.run();
    }
    this.#now = to;
  }

  /** Moves the clock to the next timer's due time and fires it (and any due with it). */
  advanceToNext(): void {
    const next = this.nextDue();
    if (next === Number.POSITIVE_INFINITY) throw new Error('no timer is set');
    this.advance(Math.max(0, next - this.#now));
  }
}
