/**
 * Callers waiting for the cluster to be usable again (Redis reachable, this node registered and
 * listening), each until its own deadline. One timer polls for all of them, and only while
 * someone waits: an outage with thousands of subscriptions in flight costs one check per poll.
 */

/** How often the waiters' condition is checked (ms). */
const POLL_MS = 50;

interface Waiter {
  /** ms since the epoch. */
  deadline: number;
  resolve(available: boolean): void;
}

export class AvailabilityWait {
  private readonly waiting = new Set<Waiter>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(private readonly available: () => boolean) {}

  /** Resolves true once available (at once when it is), false at `deadline` (ms since the epoch) or on close(). */
  until(deadline: number): Promise<boolean> {
    if (this.available()) return Promise.resolve(true);
    if (this.closed || Date.now() >= deadline) return Promise.resolve(false);
    return new Promise<boolean>((resolve) => {
      this.waiting.add({ deadline, resolve });
      if (!this.timer) {
        this.timer = setInterval(() => this.check(), POLL_MS);
        this.timer.unref();
      }
    });
  }

  /** Every waiter resolves false now, and later calls at once (the node is closing). */
  close(): void {
    this.closed = true;
    this.settle(() => false);
  }

  private check(): void {
    const available = this.available();
    const now = Date.now();
    this.settle((waiter) => (available ? true : now >= waiter.deadline ? false : undefined));
  }

  /** Resolves the waiters `outcome` decides for (undefined: still waiting); stops the timer once none waits. */
  private settle(outcome: (waiter: Waiter) => boolean | undefined): void {
    for (const waiter of this.waiting) {
      const answer = outcome(waiter);
      if (answer === undefined) continue;
      this.waiting.delete(waiter);
      waiter.resolve(answer);
    }
    if (this.waiting.size === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
