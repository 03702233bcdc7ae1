/**
 * Which front-end threads hold subscribers of a topic: `Int32[bucket × threads + thread]` in a
 * SharedArrayBuffer, 2^18 buckets hashed from the topic string with FNV-1a. A thread's cell in a
 * bucket counts its topics in that bucket that have at least one local subscriber (WebSocket or
 * HTTP fallback session). Two topics in one bucket only send a frame to a thread that finds
 * nobody on it; a thread with subscribers of a topic always has its cell set.
 */
import type { TopicInterestHook } from '../http/topic-fanout.js';
import { fnv1a32 } from '../shards/hash.js';

/** Buckets of the interest table (a power of two). */
export const INTEREST_BUCKETS = 1 << 18;

/** Bytes of the interest table of `threads` front-end threads. */
export function interestBytes(threads: number): number {
  return INTEREST_BUCKETS * threads * 4;
}

/** The bucket of a topic. */
export function interestBucket(topic: string): number {
  return fnv1a32(topic) & (INTEREST_BUCKETS - 1);
}

/** Reads the interest table: which threads want a topic. */
export class InterestTable {
  private readonly cells: Int32Array;

  constructor(
    buffer: SharedArrayBuffer,
    readonly threads: number,
  ) {
    this.cells = new Int32Array(buffer);
  }

  /** Bit t set for each thread t (other than `except`) whose cell for the topic is set. */
  maskFor(topic: string, except: number): number {
    const base = interestBucket(topic) * this.threads;
    let mask = 0;
    for (let t = 0; t < this.threads; t++) if (t !== except && Atomics.load(this.cells, base + t) > 0) mask |= 1 << t;
    return mask;
  }

  /** Changes a thread's cell of the topic's bucket by `delta`. */
  adjust(topic: string, thread: number, delta: number): void {
    Atomics.add(this.cells, interestBucket(topic) * this.threads + thread, delta);
  }

  /** Clears a thread's whole column (the thread is gone: nothing may be addressed to it). */
  clearThread(thread: number): void {
    for (let b = 0; b < INTEREST_BUCKETS; b++) Atomics.store(this.cells, b * this.threads + thread, 0);
  }
}

/**
 * One thread's side of the table: counts its subscriptions per topic and sets its cell on the
 * first one (0 → 1), clears it on the last (1 → 0).
 */
export class TopicInterest implements TopicInterestHook {
  private readonly counts = new Map<string, number>();

  constructor(
    private readonly table: InterestTable,
    private readonly thread: number,
  ) {}

  add(topic: string): void {
    const n = (this.counts.get(topic) ?? 0) + 1;
    this.counts.set(topic, n);
    if (n === 1) this.table.adjust(topic, this.thread, 1);
  }

  remove(topic: string): void {
    const n = this.counts.get(topic);
    if (n === undefined) return;
    if (n > 1) {
      this.counts.set(topic, n - 1);
      return;
    }
    this.counts.delete(topic);
    this.table.adjust(topic, this.thread, -1);
  }

  /** Local subscriptions of the topic (uWS and fallback sessions). */
  count(topic: string): number {
    return this.counts.get(topic) ?? 0;
  }
}
