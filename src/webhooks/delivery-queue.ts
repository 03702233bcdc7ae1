/**
 * The in-memory queue of one receiver (one app or instance and one URL): its pending entries
 * in the order the events happened, which of them are in flight, and the timer that wakes it.
 * Pure bookkeeping; the outbox decides when to send and what a result means.
 */
import type { OutboxEntry, WebhookTarget } from './outbox-store.js';

export class DeliveryQueue {
  /** Pending entries by seq; Map iteration order is insertion order, i.e. event order. */
  private readonly entries = new Map<number, OutboxEntry>();
  private readonly inFlight = new Set<number>();
  /** The wake-up timer and the time (ms) it fires at. */
  timer: NodeJS.Timeout | undefined;
  timerAt = Number.POSITIVE_INFINITY;

  constructor(
    readonly key: string,
    readonly target: WebhookTarget,
    /** Events per request: 1 for push webhooks, more for channel webhooks. */
    readonly maxBatch: number,
    /** ms a fresh event waits for others to join its request. */
    readonly batchWindowMs: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** Appends an entry; entries must be added in seq order (as they happen, or as loaded). */
  add(entry: OutboxEntry): void {
    this.entries.set(entry.seq, entry);
  }

  get(seq: number): OutboxEntry | undefined {
    return this.entries.get(seq);
  }

  isInFlight(seq: number): boolean {
    return this.inFlight.has(seq);
  }

  remove(seq: number): void {
    this.entries.delete(seq);
    this.inFlight.delete(seq);
  }

  /**
   * Takes the next request's entries: up to maxBatch entries that are not in flight and due
   * (`notBefore <= now`), oldest first, and marks them in flight.
   */
  take(now: number): OutboxEntry[] {
    const batch: OutboxEntry[] = [];
    for (const entry of this.entries.values()) {
      if (batch.length >= this.maxBatch) break;
      if (entry.notBefore > now || this.inFlight.has(entry.seq)) continue;
      batch.push(entry);
      this.inFlight.add(entry.seq);
    }
    return batch;
  }

  /** Entries of a finished request are no longer in flight (delivered ones are removed separately). */
  settle(batch: readonly OutboxEntry[]): void {
    for (const entry of batch) this.inFlight.delete(entry.seq);
  }

  /** Entries due by `now` that were never attempted, or are in their first attempt. */
  unattempted(now: number): number {
    let n = 0;
    for (const entry of this.entries.values()) if (entry.attempts === 0 && entry.notBefore <= now) n++;
    return n;
  }

  /** True when some entry is due now and not in flight (waiting for a free connection slot). */
  hasDue(now: number): boolean {
    for (const entry of this.entries.values()) {
      if (entry.notBefore <= now && !this.inFlight.has(entry.seq)) return true;
    }
    return false;
  }

  /**
   * When the queue next needs a dispatch, for entries not due yet: a fresh entry is ready
   * one batch window after it became due (so others can join its request), a retry as soon
   * as its backoff ends. Infinity when nothing is waiting.
   */
  nextWakeAt(now: number): number {
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.entries.values()) {
      if (entry.notBefore <= now || this.inFlight.has(entry.seq)) continue;
      const ready = readyAt(entry, this.batchWindowMs);
      if (ready < next) next = ready;
    }
    return next;
  }
}

/** When an entry should trigger a send: fresh entries wait one batch window, retries none. */
export function readyAt(entry: OutboxEntry, batchWindowMs: number): number {
  return entry.attempts === 0 ? entry.notBefore + batchWindowMs : entry.notBefore;
}
