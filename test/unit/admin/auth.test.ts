import { describe, expect, it } from 'vitest';
import {
  AdminAuth, FAILURE_WINDOW_MS, FIRST_GLOBAL_DELAY_MS, GLOBAL_FREE_FAILURES, MAX_FAILURES, MAX_GLOBAL_DELAY_MS, SignInRateLimited,
} from '../../../src/admin/auth.js';
import { codeOf } from '../../helpers/error-code.js';

const TOKEN = 'the-admin-token-0123456789';

/** The error a check throws (undefined when it passes). */
function thrown(fn: () => void): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

/** An auth with a clock the test moves and the warnings it logged. */
function clocked(start = 1_000_000) {
  const clock = { now: start };
  const warnings: Array<Record<string, unknown>> = [];
  const auth = new AdminAuth(TOKEN, { now: () => clock.now, warn: (_msg, fields) => warnings.push(fields) });
  return { auth, clock, warnings };
}

/** Distinct addresses: 10.a.b.c for i. */
const address = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

describe('AdminAuth', () => {
  it('accepts exactly the Bearer token', () => {
    const auth = new AdminAuth(TOKEN);
    expect(() => auth.check(`Bearer ${TOKEN}`, 'a')).not.toThrow();
    expect(() => auth.check(`bearer ${TOKEN}`, 'a')).not.toThrow();
    for (const header of [undefined, '', TOKEN, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(1)}`, 'Bearer ', `Basic ${TOKEN}`]) {
      expect(codeOf(() => auth.check(header, 'b')), String(header)).toBe('ADMIN_UNAUTHORIZED');
    }
  });

  it('refuses an address after too many failures until its window ends, right token included', () => {
    const { auth, clock } = clocked();
    for (let i = 0; i < MAX_FAILURES; i++) expect(codeOf(() => auth.check('Bearer wrong', '10.0.0.1'))).toBe('ADMIN_UNAUTHORIZED');
    const limited = thrown(() => auth.check(`Bearer ${TOKEN}`, '10.0.0.1'));
    expect(limited).toBeInstanceOf(SignInRateLimited);
    expect((limited as SignInRateLimited).retryAfterSeconds).toBe(FAILURE_WINDOW_MS / 1000);
    // Other addresses are not affected.
    expect(() => auth.check(`Bearer ${TOKEN}`, '10.0.0.2')).not.toThrow();
    clock.now += FAILURE_WINDOW_MS;
    expect(() => auth.check(`Bearer ${TOKEN}`, '10.0.0.1')).not.toThrow();
  });

  it('counts an IPv6 client by its /64: guesses from many addresses of one /64 lock the whole /64, not its neighbours', () => {
    const { auth, clock } = clocked();
    // One subscriber line holds a /64: each guess from a new address in it.
    for (let i = 0; i < MAX_FAILURES; i++) expect(codeOf(() => auth.check('Bearer wrong', `2001:db8:1:2::${(i + 1).toString(16)}`))).toBe('ADMIN_UNAUTHORIZED');
    expect(thrown(() => auth.check(`Bearer ${TOKEN}`, '2001:db8:1:2:ffff:1:2:3'))).toBeInstanceOf(SignInRateLimited);
    expect(thrown(() => auth.check(`Bearer ${TOKEN}`, '2001:db8:1:2::1'))).toBeInstanceOf(SignInRateLimited);
    // The next /64 is another client.
    expect(() => auth.check(`Bearer ${TOKEN}`, '2001:db8:1:3::1')).not.toThrow();
    clock.now += FAILURE_WINDOW_MS;
    expect(() => auth.check(`Bearer ${TOKEN}`, '2001:db8:1:2::99')).not.toThrow();
  });

  it('delays every address once failures from many addresses pass the global budget, the delay doubling, with one warning', () => {
    const { auth, clock, warnings } = clocked();
    expect(() => auth.check(`Bearer ${TOKEN}`, '192.0.2.1')).not.toThrow(); // the operator, signed in earlier
    // Fewer than MAX_FAILURES per address: no address lock is ever reached.
    let failures = 0;
    for (; failures < GLOBAL_FREE_FAILURES; failures++) {
      expect(codeOf(() => auth.check('Bearer guess', address(failures % 30)))).toBe('ADMIN_UNAUTHORIZED');
    }
    expect(warnings).toHaveLength(0);
    // One past the budget: locked for the first delay, every address, the right token too.
    expect(codeOf(() => auth.check('Bearer guess', address(100)))).toBe('ADMIN_UNAUTHORIZED');
    const first = thrown(() => auth.check(`Bearer ${TOKEN}`, address(101)));
    expect(first).toBeInstanceOf(SignInRateLimited);
    expect((first as SignInRateLimited).retryAfterSeconds).toBe(FIRST_GLOBAL_DELAY_MS / 1000);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ failures: GLOBAL_FREE_FAILURES + 1 });
    // An address that signed in lately goes through the global delay.
    expect(() => auth.check(`Bearer ${TOKEN}`, '192.0.2.1')).not.toThrow();
    // Each further failure, once the delay is over, doubles the delay up to the maximum; still one warning.
    const delays: number[] = [];
    let waitMs = FIRST_GLOBAL_DELAY_MS;
    for (let i = 0; i < 10; i++) {
      clock.now += waitMs;
      expect(codeOf(() => auth.check('Bearer guess', address(200 + i)))).toBe('ADMIN_UNAUTHORIZED');
      const seconds = (thrown(() => auth.check('Bearer guess', address(300 + i))) as SignInRateLimited).retryAfterSeconds;
      delays.push(seconds);
      waitMs = seconds * 1000;
    }
    expect(delays).toEqual([2, 4, 8, 16, 32, 60, 60, 60, 60, 60]);
    expect(warnings).toHaveLength(1);
    // A quiet window ends the burst: the budget is whole again, and the next burst warns again.
    clock.now += MAX_GLOBAL_DELAY_MS + FAILURE_WINDOW_MS;
    for (let i = 0; i <= GLOBAL_FREE_FAILURES; i++) expect(codeOf(() => auth.check('Bearer guess', address(1000 + i)))).toBe('ADMIN_UNAUTHORIZED');
    expect(warnings).toHaveLength(2);
  });

  it('keeps a lock until it expires however many other addresses fail, and counts the addresses beyond the table together', () => {
    const clock = { now: 1_000_000 };
    // No global budget here: this is about the per-address table alone.
    const auth = new AdminAuth(TOKEN, { now: () => clock.now, globalFreeFailures: Infinity, maxTrackedAddresses: 100 });
    const fail = (who: string): string | undefined => codeOf(() => auth.check('Bearer guess', who));
    for (let i = 0; i < MAX_FAILURES; i++) fail('10.255.255.255');
    expect(codeOf(() => auth.check(`Bearer ${TOKEN}`, '10.255.255.255'))).toBe('ADMIN_SIGNIN_RATE_LIMITED');
    // 10,050 other addresses fail once each, inside the locked address's minute.
    for (let i = 0; i < 10_050; i++) fail(address(i));
    clock.now += FAILURE_WINDOW_MS - 1000;
    expect(codeOf(() => auth.check(`Bearer ${TOKEN}`, '10.255.255.255'))).toBe('ADMIN_SIGNIN_RATE_LIMITED');
    // The addresses beyond the table were counted together: all of them are locked, new ones too.
    expect(codeOf(() => auth.check(`Bearer ${TOKEN}`, '172.16.1.1'))).toBe('ADMIN_SIGNIN_RATE_LIMITED');
    // An address tracked one by one, with one failure, is not.
    expect(() => auth.check(`Bearer ${TOKEN}`, address(5))).not.toThrow();
    // Windows over: everyone passes again.
    clock.now += 1000;
    expect(() => auth.check(`Bearer ${TOKEN}`, '10.255.255.255')).not.toThrow();
    expect(() => auth.check(`Bearer ${TOKEN}`, '172.16.1.1')).not.toThrow();
  });

  it('has the global budget by default: 300 guesses from 30 addresses do not all get a 401', () => {
    const { auth } = clocked();
    const codes = new Set<string | undefined>();
    for (let i = 0; i < 300; i++) codes.add(codeOf(() => auth.check('Bearer guess', address(i % 30))));
    expect(codes).toContain('ADMIN_SIGNIN_RATE_LIMITED');
  });
});
