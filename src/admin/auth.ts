/**
 * Admin authentication: `Authorization: Bearer <admin token>`, compared in constant time, and
 * failed sign-ins limited per remote address (a wrong token is a guess at a secret that opens
 * every app's live traffic).
 */
import { secretEquals } from '../crypto.js';
import { HeraldError } from '../errors.js';

/** Failed attempts per address within FAILURE_WINDOW_MS before the address is refused. */
export const MAX_FAILURES = 10;
/** Window of the failure count, ms; a refused address may try again when it ends. */
export const FAILURE_WINDOW_MS = 60_000;
/** Addresses tracked at once; beyond it the oldest windows are forgotten (memory bound). */
const MAX_TRACKED_ADDRESSES = 10_000;

interface Failures {
  count: number;
  /** Start of the window, ms. */
  since: number;
}

/** Thrown as a 429 with `retryAfterSeconds` for the Retry-After header. */
export class SignInRateLimited extends HeraldError {
  constructor(readonly retryAfterSeconds: number) {
    super('ADMIN_SIGNIN_RATE_LIMITED');
  }
}

export class AdminAuth {
  private readonly failures = new Map<string, Failures>();

  constructor(
    private readonly token: string,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Checks the Authorization header of a request from `address`; throws ADMIN_UNAUTHORIZED
   * (401) or SignInRateLimited (429). An address over the limit is refused even with the right
   * token until its window ends, so guessing cannot go on in the background.
   */
  check(authorization: string | undefined, address: string): void {
    const now = this.now();
    const entry = this.failures.get(address);
    if (entry && now - entry.since >= FAILURE_WINDOW_MS) this.failures.delete(address);
    else if (entry && entry.count >= MAX_FAILURES) throw new SignInRateLimited(Math.ceil((entry.since + FAILURE_WINDOW_MS - now) / 1000));
    if (this.matches(authorization)) return;
    this.fail(address, now);
    throw new HeraldError('ADMIN_UNAUTHORIZED');
  }

  private matches(authorization: string | undefined): boolean {
    const m = /^Bearer (.+)$/i.exec(authorization?.trim() ?? '');
    // Compared whatever the header held (constant time, crypto.ts), so its time says nothing.
    return secretEquals(m?.[1]?.trim() ?? '', this.token) && m !== null;
  }

  private fail(address: string, now: number): void {
    const entry = this.failures.get(address);
    if (entry) {
      entry.count++;
      return;
    }
    if (this.failures.size >= MAX_TRACKED_ADDRESSES) this.forgetOld(now);
    this.failures.set(address, { count: 1, since: now });
  }

  private forgetOld(now: number): void {
    for (const [address, entry] of this.failures) {
      if (now - entry.since >= FAILURE_WINDOW_MS) this.failures.delete(address);
    }
    // Still full: drop the oldest half (Map keeps insertion order).
    let drop = this.failures.size >= MAX_TRACKED_ADDRESSES ? this.failures.size / 2 : 0;
    for (const address of this.failures.keys()) {
      if (drop-- <= 0) break;
      this.failures.delete(address);
    }
  }
}
