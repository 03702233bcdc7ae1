/**
 * Process-wide counters over SharedArrayBuffers, for a process whose front end runs on several
 * threads: each app's connection quota, message quota and rate limits, and the node's
 * `maxConnections`, are then one budget for the process, whichever thread takes a connection or
 * a request. Main makes them (`SharedCounters.create`) and posts `init` to each thread (in its
 * workerData), which attaches with its index (`SharedCounters.attach`). The buffers are never
 * resized.
 *
 * Layout:
 * - `connections`, Int32: row 0 the node, row 1 + s the app in slot s; each row is
 *   [total, thread 0, …, thread N-1]. `tryConnect` adds to the totals first and takes them back
 *   on a refusal, so no admission ever passes a limit; the column of the thread holding the
 *   connection is written by that thread only, so main can take a dead thread's connections off
 *   the totals (`dropThread`).
 * - `appWindows`, BigUint64: per slot [quota (day << 40 | used), HTTP requests, events, new
 *   connections (second << 32 | count)], each changed with a compare-exchange.
 * - `hashedWindows`, BigUint64: 2^16 rate windows for the per-IP keys (and any key of an app
 *   without a slot), at the key's FNV-1a hash: two keys that collide share one budget, which
 *   is stricter, never looser.
 * - `missWindows`, BigUint64: 2^16 windows of the HTTP fallback's misses per address block
 *   (SharedMissBudget: window end in ms << 20 | misses), hashed the same way.
 *
 * App slots: main assigns one per app id (`assignSlot`) before any thread serves the app, and
 * tells the threads (`setSlot`); a removed app's slot is zeroed (`releaseSlot`, `clearSlot`).
 * Fresh slots are used first and freed ones only after them, oldest first, zeroed again: a
 * thread that closes a removed app's connections before it hears of the removal only touches a
 * slot no other app holds yet.
 */
import type { AppConfig } from '../config/schema.js';
import type { ConnectAnswer, FrontEndCounters } from '../channels/connection-counts.js';
import type { MessageCharger } from '../channels/adapter/channel-adapter.js';
import { overQuota } from '../channels/quota.js';
import type { RateCounter } from '../channels/rate-limits/rate-counter.js';
import { fnv1a32 } from '../shards/hash.js';
import { MISS_WINDOW_MS, type MissCounter } from '../channels/http-fallback/miss-budget.js';

/** What a thread attaches with: plain and structured-clonable (the buffers are shared, not copied). */
export interface SharedCountersInit {
  /** Front-end threads: the columns of each connection row. */
  readonly threads: number;
  /** App slots. */
  readonly maxApps: number;
  readonly connections: SharedArrayBuffer;
  readonly appWindows: SharedArrayBuffer;
  readonly hashedWindows: SharedArrayBuffer;
  readonly missWindows: SharedArrayBuffer;
}

/** `now` returns epoch milliseconds (an option so tests can move the clock). */
export interface SharedCountersOptions {
  readonly now?: () => number;
}

const DEFAULT_MAX_APPS = 65_536;
const HASHED_WINDOWS = 1 << 16;
const MS_PER_DAY = 86_400_000;

/** Per slot in `appWindows`: the quota, then one rate window per per-app rate key prefix. */
const WINDOWS_PER_SLOT = 4;
const QUOTA_WINDOW = 0;
const RATE_WINDOW_OF_PREFIX: Readonly<Record<string, number>> = { 'h:': 1, 'e:': 2, 'c:': 3 };

/** A rate window: second (32 bits) and count (32 bits); a limit past the count's range counts as its maximum. */
const COUNT_BITS = 32n;
const COUNT_MASK = (1n << COUNT_BITS) - 1n;
const MAX_COUNT = Number(COUNT_MASK);
/** The quota: day (24 bits) and messages used (40 bits). */
const USED_BITS = 40n;
const USED_MASK = (1n << USED_BITS) - 1n;
const MAX_USED = Number(USED_MASK);
const DAY_MASK = 0xff_ffff;

/** The app id → slot map one thread knows, shared by its counters. */
type Slots = ReadonlyMap<string, number>;

export class SharedCounters implements FrontEndCounters {
  readonly rateCounter: SharedRateCounter;
  readonly quota: SharedMessageQuota;
  private readonly connections: Int32Array;
  private readonly appWindows: BigUint64Array;
  /** Int32s per connection row: the total and one column per thread. */
  private readonly rowLength: number;
  private readonly slots = new Map<string, number>();
  /** Main only: the next never-used slot, and freed ones in the order they were freed. */
  private nextFreshSlot = 0;
  private readonly freedSlots: number[] = [];

  private constructor(
    readonly init: SharedCountersInit,
    /** This thread's column; null on main, which holds no connections. */
    private readonly thread: number | null,
    options: SharedCountersOptions,
  ) {
    this.connections = new Int32Array(init.connections);
    this.appWindows = new BigUint64Array(init.appWindows);
    this.rowLength = 1 + init.threads;
    this.rateCounter = new SharedRateCounter(init, this.slots, options.now);
    this.quota = new SharedMessageQuota(init, this.slots, options.now);
  }

  /** Main's counters: new zeroed buffers for `threads` front-end threads and `maxApps` app slots (65,536 by default). */
  static create(opts: { threads: number; maxApps?: number } & SharedCountersOptions): SharedCounters {
    const { threads, maxApps = DEFAULT_MAX_APPS } = opts;
    if (!Number.isInteger(threads) || threads < 1) throw new Error(`SharedCounters: threads must be a positive integer (got ${threads})`);
    if (!Number.isInteger(maxApps) || maxApps < 1) throw new Error(`SharedCounters: maxApps must be a positive integer (got ${maxApps})`);
    const init: SharedCountersInit = {
      threads,
      maxApps,
      connections: new SharedArrayBuffer((maxApps + 1) * (1 + threads) * Int32Array.BYTES_PER_ELEMENT),
      appWindows: new SharedArrayBuffer(maxApps * WINDOWS_PER_SLOT * BigUint64Array.BYTES_PER_ELEMENT),
      hashedWindows: new SharedArrayBuffer(HASHED_WINDOWS * BigUint64Array.BYTES_PER_ELEMENT),
      missWindows: new SharedArrayBuffer(HASHED_WINDOWS * BigUint64Array.BYTES_PER_ELEMENT),
    };
    return new SharedCounters(init, null, opts);
  }

  /** Thread `thread`'s counters over main's buffers; it learns the slots through setSlot. */
  static attach(init: SharedCountersInit, thread: number, options: SharedCountersOptions = {}): SharedCounters {
    if (!Number.isInteger(thread) || thread < 0 || thread >= init.threads) throw new Error(`SharedCounters: thread ${thread} is not in [0, ${init.threads})`);
    return new SharedCounters(init, thread, options);
  }

  /** Main: the app's slot, assigned (and zeroed) if it has none yet; throws when every slot is taken. */
  assignSlot(appId: string): number {
    const known = this.slots.get(appId);
    if (known !== undefined) return known;
    const slot = this.nextFreshSlot < this.init.maxApps ? this.nextFreshSlot++ : this.freedSlots.shift();
    if (slot === undefined) throw new Error(`SharedCounters: all ${this.init.maxApps} app slots are taken`);
    this.zeroSlot(slot);
    this.slots.set(appId, slot);
    return slot;
  }

  /** Main: the app was removed; its slot's counts are zeroed and the slot is freed for reuse (see the file header). */
  releaseSlot(appId: string): void {
    const slot = this.slots.get(appId);
    if (slot === undefined) return;
    this.slots.delete(appId);
    this.zeroSlot(slot);
    this.freedSlots.push(slot);
  }

  /** A thread: main assigned `slot` to the app. */
  setSlot(appId: string, slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.init.maxApps) throw new Error(`SharedCounters: slot ${slot} is not in [0, ${this.init.maxApps})`);
    this.slots.set(appId, slot);
  }

  /** A thread: main released the app's slot; its connections still open count for the node only. */
  clearSlot(appId: string): void {
    this.slots.delete(appId);
  }

  tryConnect(appId: string, appMax: number | null, nodeMax: number | null): ConnectAnswer {
    const column = this.ownColumn();
    const appRow = this.appRow(appId);
    if (appRow === undefined) throw new Error(`SharedCounters: app ${appId} has no slot on thread ${column - 1}`);
    const c = this.connections;
    if (Atomics.add(c, 0, 1) >= (nodeMax ?? Infinity)) {
      Atomics.sub(c, 0, 1);
      return 'node';
    }
    if (Atomics.add(c, appRow, 1) >= (appMax ?? Infinity)) {
      Atomics.sub(c, appRow, 1);
      Atomics.sub(c, 0, 1);
      return 'app';
    }
    Atomics.add(c, column, 1);
    Atomics.add(c, appRow + column, 1);
    return 'ok';
  }

  disconnected(appId: string): void {
    const column = this.ownColumn();
    const c = this.connections;
    Atomics.sub(c, 0, 1);
    Atomics.sub(c, column, 1);
    const appRow = this.appRow(appId);
    if (appRow === undefined) return;
    Atomics.sub(c, appRow, 1);
    Atomics.sub(c, appRow + column, 1);
  }

  connectionCount(appId?: string): number {
    if (appId === undefined) return Atomics.load(this.connections, 0);
    const appRow = this.appRow(appId);
    return appRow === undefined ? 0 : Atomics.load(this.connections, appRow);
  }

  /** Live connections per app id this instance knows a slot for (apps with none left out). */
  connectionCounts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [appId, slot] of this.slots) {
      const n = Atomics.load(this.connections, (1 + slot) * this.rowLength);
      if (n > 0) out.set(appId, n);
    }
    return out;
  }

  /** The node's live connections that thread `thread` holds. */
  threadConnections(thread: number): number {
    return Atomics.load(this.connections, 1 + thread);
  }

  /**
   * Main: thread `thread` is gone (it has exited: it writes its columns no more); its
   * connections come off every total, the node's and each app's.
   */
  dropThread(thread: number): void {
    if (!Number.isInteger(thread) || thread < 0 || thread >= this.init.threads) throw new Error(`SharedCounters: thread ${thread} is not in [0, ${this.init.threads})`);
    const c = this.connections;
    for (let row = 0; row <= this.init.maxApps; row++) {
      const start = row * this.rowLength;
      const held = Atomics.exchange(c, start + 1 + thread, 0);
      if (held !== 0) Atomics.sub(c, start, held);
    }
  }

  private ownColumn(): number {
    if (this.thread === null) throw new Error('SharedCounters: the main thread holds no connections (attach a thread)');
    return 1 + this.thread;
  }

  /** Index of the app's connection row total, or undefined without a slot. */
  private appRow(appId: string): number | undefined {
    const slot = this.slots.get(appId);
    return slot === undefined ? undefined : (1 + slot) * this.rowLength;
  }

  private zeroSlot(slot: number): void {
    const start = (1 + slot) * this.rowLength;
    for (let i = 0; i < this.rowLength; i++) Atomics.store(this.connections, start + i, 0);
    for (let i = 0; i < WINDOWS_PER_SLOT; i++) Atomics.store(this.appWindows, slot * WINDOWS_PER_SLOT + i, 0n);
  }
}

/**
 * The per-app rate limits (rate-counter.ts) counted in the shared buffers: fixed one-second
 * windows of the clock, as the in-memory counter. The per-app keys (`h:`, `e:`, `c:` and the
 * app id) take their app slot's window; any other key (per-IP ones) a hashed window.
 */
export class SharedRateCounter implements RateCounter {
  private readonly appWindows: BigUint64Array;
  private readonly hashedWindows: BigUint64Array;

  constructor(
    init: SharedCountersInit,
    private readonly slots: Slots,
    private readonly now: () => number = Date.now,
  ) {
    this.appWindows = new BigUint64Array(init.appWindows);
    this.hashedWindows = new BigUint64Array(init.hashedWindows);
  }

  take(key: string, cost: number, limit: number): number {
    const now = this.now();
    const second = BigInt(Math.floor(now / 1000)) & COUNT_MASK;
    const slotWindow = this.slotWindow(key);
    const windows = slotWindow === undefined ? this.hashedWindows : this.appWindows;
    const index = slotWindow ?? fnv1a32(key) % HASHED_WINDOWS;
    const max = Math.min(limit, MAX_COUNT);
    for (;;) {
      const current = Atomics.load(windows, index);
      const used = current >> COUNT_BITS === second ? Number(current & COUNT_MASK) : 0;
      if (used + cost > max) return 1000 - (now % 1000);
      const next = (second << COUNT_BITS) | BigInt(used + cost);
      if (Atomics.compareExchange(windows, index, current, next) === current) return 0;
    }
  }

  private slotWindow(key: string): number | undefined {
    const window = RATE_WINDOW_OF_PREFIX[key.slice(0, 2)];
    if (window === undefined) return undefined;
    const slot = this.slots.get(key.slice(2));
    return slot === undefined ? undefined : slot * WINDOWS_PER_SLOT + window;
  }
}

/**
 * The daily message quota (quota.ts) counted in the app's slot: the same answers as
 * MessageQuota (messages per UTC day, a refusal charges nothing), one count for every thread.
 */
export class SharedMessageQuota implements MessageCharger {
  private readonly appWindows: BigUint64Array;

  constructor(
    init: SharedCountersInit,
    private readonly slots: Slots,
    private readonly now: () => number = Date.now,
  ) {
    this.appWindows = new BigUint64Array(init.appWindows);
  }

  /** Messages the app has been charged today (UTC). */
  usedToday(appId: string): number {
    const index = this.indexOf(appId);
    if (index === undefined) return 0;
    const current = Atomics.load(this.appWindows, index);
    return current >> USED_BITS === this.today() ? Number(current & USED_MASK) : 0;
  }

  /** Charges `messages`, or throws APP_OVER_QUOTA (403) when they would take the app past its quota (nothing charged). */
  charge(app: Pick<AppConfig, 'id' | 'messageQuota'>, messages: number): void {
    const quota = app.messageQuota;
    if (quota === null) return;
    const index = this.indexOf(app.id);
    if (index === undefined) throw new Error(`SharedMessageQuota: app ${app.id} has no slot`);
    const day = this.today();
    const max = Math.min(quota, MAX_USED);
    for (;;) {
      const current = Atomics.load(this.appWindows, index);
      const used = current >> USED_BITS === day ? Number(current & USED_MASK) : 0;
      if (used + messages > max) throw overQuota(app.id, quota, used, messages, 'UTC');
      const next = (day << USED_BITS) | BigInt(used + messages);
      if (Atomics.compareExchange(this.appWindows, index, current, next) === current) return;
    }
  }

  /** The app was removed: an app created later with the same id starts at 0. */
  forget(appId: string): void {
    const index = this.indexOf(appId);
    if (index !== undefined) Atomics.store(this.appWindows, index, 0n);
  }

  private indexOf(appId: string): number | undefined {
    const slot = this.slots.get(appId);
    return slot === undefined ? undefined : slot * WINDOWS_PER_SLOT + QUOTA_WINDOW;
  }

  private today(): bigint {
    return BigInt(Math.floor(this.now() / MS_PER_DAY) & DAY_MASK);
  }
}

/** A miss window: its end (epoch ms, 44 bits) and the misses in it (20 bits, counted up to their maximum). */
const MISS_BITS = 20n;
const MISS_MASK = (1n << MISS_BITS) - 1n;

/**
 * The HTTP fallback's misses per address block (channels/http-fallback/miss-budget.ts) counted
 * for every thread of the process: the same answers as MissBudget, a window opened by a block's
 * first miss and lasting a minute, at the block's hashed cell (two blocks that collide share one
 * budget). Nothing to sweep: an ended window is reset by the next miss.
 */
export class SharedMissBudget implements MissCounter {
  private readonly windows: BigUint64Array;

  /** `perMinute`: misses allowed per block and minute; null: unlimited (nothing is counted). */
  constructor(
    init: SharedCountersInit,
    private readonly perMinute: number | null,
  ) {
    this.windows = new BigUint64Array(init.missWindows);
  }

  retryAfterSeconds(block: string, now: number): number {
    if (this.perMinute === null) return 0;
    const current = Atomics.load(this.windows, fnv1a32(block) % HASHED_WINDOWS);
    const endsMs = Number(current >> MISS_BITS);
    if (endsMs <= now || Number(current & MISS_MASK) < this.perMinute) return 0;
    return Math.max(1, Math.ceil((endsMs - now) / 1000));
  }

  missed(block: string, now: number): void {
    if (this.perMinute === null) return;
    const index = fnv1a32(block) % HASHED_WINDOWS;
    for (;;) {
      const current = Atomics.load(this.windows, index);
      const endsMs = Number(current >> MISS_BITS);
      const misses = current & MISS_MASK;
      const next = endsMs > now ? (current >> MISS_BITS << MISS_BITS) | (misses < MISS_MASK ? misses + 1n : misses) : (BigInt(now + MISS_WINDOW_MS) << MISS_BITS) | 1n;
      if (Atomics.compareExchange(this.windows, index, current, next) === current) return;
    }
  }

  sweep(): void {}
}
