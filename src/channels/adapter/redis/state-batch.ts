/**
 * A node's changes to shared channel state (connects, joins, leaves, disconnects, with the
 * leave-debounce hold releases and the cache reads of joins) sent to Redis in batches: the
 * changes asked for in one event-loop turn go out as one `heraldBatch` script call
 * (scripts.ts), which applies them one after the other, in the order they were asked for, and
 * answers each with the reply its own script call would have had. At most
 * MAX_BATCHES_IN_FLIGHT calls wait for Redis at a time; changes asked for meanwhile wait here
 * and go out together when a call returns (up to MAX_BATCH_OPS per call).
 *
 * Why: a storm (19,000 sockets closing at once) made one script call per change, all in flight
 * together, each holding ioredis commands, pipelines and promises until Redis answered, and
 * paying one Redis call's overhead (bench/results/HISTORY.md, "Batched Redis state changes"). Batched,
 * the storm makes ~MAX_BATCH_OPS times fewer calls and Redis works through it within a second.
 *
 * Order: every change goes out on the node's one command connection after those asked for
 * before it. A command that must run after the changes already asked for (a read, a
 * registration's snapshot) calls flush() first: everything waiting goes out at once, past the
 * bound, ahead of it.
 *
 * Outage: a call Redis cannot take fails at once (no offline queue, connection.ts), and every
 * change in it with RedisUnavailableError, as a call of its own did. A script error fails
 * every change of its call (a bug).
 *
 * Memory: a waiting change is its arguments, its promise and this queue's entry (~650 B); the
 * callers add as little as they can on top (no async wrapper per change), since a storm holds
 * tens of thousands of them at once until Redis has worked through them.
 */
import type { Redis } from 'ioredis';
import { asUnavailable } from '../../../cluster/connection.js';
import { STATE_SCRIPTS } from './scripts.js';

/** Changes per script call at most: bounds how long one call holds Redis (~20–40 µs per change). */
export const MAX_BATCH_OPS = 256;
/** Script calls waiting for Redis at a time (two: one runs while the next is on its way). */
export const MAX_BATCHES_IN_FLIGHT = 2;

/** One change's arguments as the batch script reads them: its letter, then its ARGV (scripts.ts). */
export type StateOpArgs =
  | ['j', session: string, appId: string, channel: string, socketId: string, presence: '1' | '0', userId: string, userInfo: string, maxMembers: number]
  | ['l', session: string, appId: string, channel: string, socketId: string, debounceMs: number]
  | ['c', session: string, appId: string, socketId: string, maxConnections: number]
  | ['d', session: string, appId: string, socketId: string]
  | ['r', appId: string, channel: string, userId: string, token: string]
  | ['g', appId: string, channel: string];

interface Waiting {
  args: StateOpArgs;
  resolve: (reply: unknown) => void;
  reject: (err: unknown) => void;
}

export class StateBatcher {
  /** Changes not sent yet: waiting[head..]. Sent ones are cut off the front when all are sent. */
  private waiting: Waiting[] = [];
  private head = 0;
  private inFlight = 0;
  private scheduled = false;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly maxOps = MAX_BATCH_OPS,
    private readonly maxInFlight = MAX_BATCHES_IN_FLIGHT,
  ) {}

  /**
   * Applies one change in this turn's batch (or the next one the bound lets go); resolves with
   * its reply, rejects with RedisUnavailableError when Redis could not take it.
   */
  run<T>(args: StateOpArgs): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.waiting.push({ args, resolve: resolve as (reply: unknown) => void, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.send(false);
        });
      }
    });
  }

  /** Sends every waiting change now, in order, whatever is in flight: before a command that must come after them. */
  flush(): void {
    this.send(true);
  }

  /** Changes waiting to be sent (not yet with Redis). */
  get queued(): number {
    return this.waiting.length - this.head;
  }

  private send(all: boolean): void {
    while (this.head < this.waiting.length && (all || this.inFlight < this.maxInFlight)) {
      // Taken by index, not by copying the rest of the queue per call (a storm queues tens of thousands).
      const end = Math.min(this.waiting.length, this.head + this.maxOps);
      let batch: Waiting[];
      if (this.head === 0 && end === this.waiting.length) {
        batch = this.waiting;
        this.waiting = [];
      } else {
        batch = this.waiting.slice(this.head, end);
        this.waiting.fill(undefined as unknown as Waiting, this.head, end); // sent: not kept alive by the queue
        this.head = end;
        if (this.head === this.waiting.length) {
          this.waiting = [];
          this.head = 0;
        }
      }
      this.call(batch);
    }
  }

  private call(batch: Waiting[]): void {
    const argv: (string | number)[] = [this.prefix];
    for (const { args } of batch) for (const a of args) argv.push(a);
    this.inFlight++;
    STATE_SCRIPTS.run<unknown[]>(this.redis, 'heraldBatch', argv).then(
      (replies) => {
        this.inFlight--;
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(replies[i]);
        this.send(false);
      },
      (err: unknown) => {
        this.inFlight--;
        const failure = asUnavailable(err);
        for (const w of batch) w.reject(failure);
        this.send(false);
      },
    );
  }
}
