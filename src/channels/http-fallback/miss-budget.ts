/**
 * How many requests for a session this node does not have one client address may make (an
 * xhr_send to an unknown, expired or another address's session): a fixed one-minute window
 * per address block (net/client-address.ts' addressBlock: an IPv4 address, an IPv6 /64).
 * Past the budget, every xhr_send from that block is refused until its window ends, found or
 * not, so that the refusal itself tells nothing about which ids exist. A legitimate client
 * misses rarely (a send racing its session's expiry); a client guessing ids misses on nearly
 * every try. Memory: one entry per block that missed in the last minute, at most MAX_TRACKED.
 */

export const MISS_WINDOW_MS = 60_000;
/** Blocks tracked at once; past it a new block's misses go uncounted until windows end. */
const MAX_TRACKED = 100_000;

interface Window {
  readonly endsMs: number;
  count: number;
}

/** What the fallback routes ask of a miss budget (MissBudget here; front-end/shared-counters.ts' SharedMissBudget for every thread of a process). */
export interface MissCounter {
  retryAfterSeconds(block: string, now: number): number;
  missed(block: string, now: number): void;
  sweep(now: number): void;
}

export class MissBudget implements MissCounter {
  private readonly windows = new Map<string, Window>();

  /** `perMinute`: misses allowed per block and minute; null: unlimited (nothing is tracked). */
  constructor(private readonly perMinute: number | null) {}

  /** Whole seconds until `block` may send again (its budget is spent), or 0 when it may now. */
  retryAfterSeconds(block: string, now: number): number {
    const w = this.windows.get(block);
    if (!w || this.perMinute === null || w.count < this.perMinute) return 0;
    if (w.endsMs <= now) {
      this.windows.delete(block);
      return 0;
    }
    return Math.max(1, Math.ceil((w.endsMs - now) / 1000));
  }

  /** `block` asked for a session this node does not have. */
  missed(block: string, now: number): void {
    if (this.perMinute === null) return;
    const w = this.windows.get(block);
    if (w && w.endsMs > now) {
      w.count++;
      return;
    }
    if (!w && this.windows.size >= MAX_TRACKED) return;
    this.windows.set(block, { endsMs: now + MISS_WINDOW_MS, count: 1 });
  }

  /** Forgets the windows that ended (run now and then). */
  sweep(now: number): void {
    for (const [block, w] of this.windows) if (w.endsMs <= now) this.windows.delete(block);
  }
}
