/**
 * Admin authentication: `Authorization: Bearer <admin token>`, compared in constant time, and
 * failed sign-ins limited twice over (a wrong token is a guess at a secret that opens every
 * app's live traffic):
 *
 * - per client address (the forwarded one behind a proxy in `trustedProxies`: the caller resolves
 *   it, net/client-address.ts), an IPv6 address counted by its /64 (one subscriber line holds a
 *   whole /64, so a guesser there would get a fresh address per guess): MAX_FAILURES within FAILURE_WINDOW_MS lock the address until its window
 *   ends, the right token included, so guessing cannot go on in the background;
 * - all addresses together: past GLOBAL_FREE_FAILURES in one burst (failures with no quiet
 *   FAILURE_WINDOW_MS between them, counted from the end of the last delay), each further failure locks sign-in for every address for a
 *   delay that doubles (1 s, 2 s, 4 s … at most MAX_GLOBAL_DELAY_MS), so guessing from many
 *   addresses gets one try per delay. Addresses that signed in with the right token within
 *   TRUSTED_FOR_MS keep signing in through that lock (not through their own).
 *
 * Memory is bounded without forgetting a lock: at most MAX_TRACKED_ADDRESSES addresses are
 * tracked one by one; while the table is full, failures from other addresses are counted
 * together in one shared entry that locks all of them. Entries leave only when their window ends.
 */
import { secretEquals } from '../crypto.js';
import { HeraldError } from '../errors.js';
import { log } from '../log.js';
import { addressBlock } from '../net/client-address.js';

/** Failed attempts per address within FAILURE_WINDOW_MS before the address is refused. */
export const MAX_FAILURES = 10;
/** Window of the failure count, ms; a refused address may try again when it ends. */
export const FAILURE_WINDOW_MS = 60_000;
/** Failures of all addresses together in one burst before sign-in is delayed for everyone. */
export const GLOBAL_FREE_FAILURES = 30;
/** First delay past the global budget, ms; doubled by each further failure of the burst. */
export const FIRST_GLOBAL_DELAY_MS = 1000;
/** Longest delay past the global budget, ms. */
export const MAX_GLOBAL_DELAY_MS = 60_000;
/** Addresses tracked one by one; beyond it they share one entry (memory bound). */
export const MAX_TRACKED_ADDRESSES = 10_000;
/** How long a successful sign-in lets its address through the global delay, ms. */
export const TRUSTED_FOR_MS = 24 * 3600_000;
/** Addresses remembered as trusted; beyond it the least recently seen is forgotten. */
const MAX_TRUSTED_ADDRESSES = 1000;

interface Failures {
  count: number;
  /** Start of the window, ms. */
  since: number;
}

/** A burst of failures across all addresses. */
interface Burst {
  failures: number;
  lastFailure: number;
  /** Until when (ms) sign-in is refused for addresses that are not trusted. */
  lockedUntil: number;
  warned: boolean;
}

/** Test seams; production uses the defaults. */
export interface AdminAuthOptions {
  /** Clock, ms. */
  now?: () => number;
  /** Where the burst warning goes; the logger by default. */
  warn?: (msg: string, fields: Record<string, unknown>) => void;
  /** GLOBAL_FREE_FAILURES unless given. */
  globalFreeFailures?: number;
  /** MAX_TRACKED_ADDRESSES unless given. */
  maxTrackedAddresses?: number;
}

/** Thrown as a 429 with `retryAfterSeconds` for the Retry-After header. */
export class SignInRateLimited extends HeraldError {
  constructor(readonly retryAfterSeconds: number, description?: string) {
    super('ADMIN_SIGNIN_RATE_LIMITED', description);
  }
}

export class AdminAuth {
  readonly #failures = new Map<string, Failures>();
  /** Failures of the addresses not tracked one by one (the table was full). */
  #shared: Failures | undefined;
  readonly #trusted = new Map<string, number>();
  #burst: Burst = { failures: 0, lastFailure: -Infinity, lockedUntil: 0, warned: false };

  readonly #now: () => number;
  readonly #warn: (msg: string, fields: Record<string, unknown>) => void;
  readonly #globalFreeFailures: number;
  readonly #maxTracked: number;

  constructor(
    private readonly token: string,
    options: AdminAuthOptions = {},
  ) {
    this.#now = options.now ?? Date.now;
    this.#warn = options.warn ?? ((msg, fields) => log.warn(msg, fields));
    this.#globalFreeFailures = options.globalFreeFailures ?? GLOBAL_FREE_FAILURES;
    this.#maxTracked = options.maxTrackedAddresses ?? MAX_TRACKED_ADDRESSES;
  }

  /**
   * Checks the Authorization header of a request from `address`; throws ADMIN_UNAUTHORIZED
   * (401) or SignInRateLimited (429). A refused request is not counted as a failure.
   */
  check(authorization: string | undefined, clientAddress: string): void {
    const address = addressBlock(clientAddress);
    const now = this.#now();
    this.#expire(now);
    const own = this.#failures.get(address) ?? (this.#trustedAt(address, now) === undefined ? this.#shared : undefined);
    if (own && own.count >= MAX_FAILURES) throw new SignInRateLimited(seconds(own.since + FAILURE_WINDOW_MS - now));
    if (this.#burst.lockedUntil > now && this.#trustedAt(address, now) === undefined) {
      throw new SignInRateLimited(seconds(this.#burst.lockedUntil - now), 'Too many failed admin sign-ins from several addresses; wait and retry');
    }
    if (this.matches(authorization)) {
      this.#trust(address, now);
      return;
    }
    this.#fail(address, now);
    throw new HeraldError('ADMIN_UNAUTHORIZED');
  }

  private matches(authorization: string | undefined): boolean {
    const m = /^Bearer (.+)$/i.exec(authorization?.trim() ?? '');
    // Compared whatever the header held (constant time, crypto.ts), so its time says nothing.
    return secretEquals(m?.[1]?.trim() ?? '', this.token) && m !== null;
  }

  #fail(address: string, now: number): void {
    const entry = this.#failures.get(address);
    if (entry) entry.count++;
    else if (this.#failures.size < this.#maxTracked) this.#failures.set(address, { count: 1, since: now });
    else if (this.#shared) this.#shared.count++;
    else this.#shared = { count: 1, since: now };

    // A burst ends with a quiet window after its last failure and after its delay: waiting
    // out the delay alone does not give the budget back.
    const burst = this.#burst;
    if (now - Math.max(burst.lastFailure, burst.lockedUntil) >= FAILURE_WINDOW_MS) this.#burst = { failures: 0, lastFailure: now, lockedUntil: 0, warned: false };
    this.#burst.failures++;
    this.#burst.lastFailure = now;
    const over = this.#burst.failures - this.#globalFreeFailures;
    if (over <= 0) return;
    const delay = Math.min(MAX_GLOBAL_DELAY_MS, FIRST_GLOBAL_DELAY_MS * 2 ** Math.min(over - 1, 30));
    this.#burst.lockedUntil = now + delay;
    if (!this.#burst.warned) {
      this.#burst.warned = true;
      this.#warn('admin sign-in: too many failed sign-ins from several addresses; sign-in is delayed for every address that has not signed in lately', {
        failures: this.#burst.failures,
        addresses: this.#failures.size + (this.#shared ? 1 : 0),
        sharedEntry: this.#shared !== undefined,
        retryAfterSeconds: seconds(delay),
      });
    }
  }

  /** Drops the windows that ended: the oldest come first (Map keeps insertion order). */
  #expire(now: number): void {
    for (const [address, entry] of this.#failures) {
      if (now - entry.since < FAILURE_WINDOW_MS) break;
      this.#failures.delete(address);
    }
    if (this.#shared && now - this.#shared.since >= FAILURE_WINDOW_MS) this.#shared = undefined;
  }

  #trust(address: string, now: number): void {
    this.#trusted.delete(address);
    this.#trusted.set(address, now);
    if (this.#trusted.size > MAX_TRUSTED_ADDRESSES) this.#trusted.delete(this.#trusted.keys().next().value!);
  }

  /** When `address` last signed in, if within TRUSTED_FOR_MS. */
  #trustedAt(address: string, now: number): number | undefined {
    const at = this.#trusted.get(address);
    return at !== undefined && now - at < TRUSTED_FOR_MS ? at : undefined;
  }
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}
