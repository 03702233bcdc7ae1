/**
 * The shard-wide bound on gateway sends in flight (`pushDelivery.concurrency`), shared by every
 * running publish of the shard. Waiters are served first come, first served, so concurrent
 * publishes interleave instead of one starving the others.
 */
/** A FIFO counting semaphore over gateway sends. */
export class SendLimiter {
  private available: number;
  private readonly waiters: ((granted: boolean) => void)[] = [];
  private closed = false;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be a positive integer, got ${capacity}`);
    this.available = capacity;
  }

  /** Sends currently holding a permit. */
  get inUse(): number {
    return this.capacity - this.available;
  }

  /** Resolves true with a permit (call release() once), or false when the limiter was closed. */
  acquire(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.available > 0) {
      this.available--;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next(true);
    else this.available++;
  }

  /** Refuses every waiting and future acquire (shutdown); permits held stay valid until released. */
  close(): void {
    this.closed = true;
    for (const waiter of this.waiters.splice(0)) waiter(false);
  }
}
