import { describe, expect, it } from 'vitest';
import { AdminAuth, FAILURE_WINDOW_MS, MAX_FAILURES, SignInRateLimited } from '../../../src/admin/auth.js';
import { codeOf } from '../../helpers/error-code.js';

const TOKEN = 'the-admin-token-0123456789';

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
    let now = 1_000_000;
    const auth = new AdminAuth(TOKEN, () => now);
    for (let i = 0; i < MAX_FAILURES; i++) expect(codeOf(() => auth.check('Bearer wrong', '10.0.0.1'))).toBe('ADMIN_UNAUTHORIZED');
    let limited: unknown;
    try {
      auth.check(`Bearer ${TOKEN}`, '10.0.0.1');
    } catch (err) {
      limited = err;
    }
    expect(limited).toBeInstanceOf(SignInRateLimited);
    expect((limited as SignInRateLimited).retryAfterSeconds).toBe(FAILURE_WINDOW_MS / 1000);
    // Other addresses are not affected.
    expect(() => auth.check(`Bearer ${TOKEN}`, '10.0.0.2')).not.toThrow();
    now += FAILURE_WINDOW_MS;
    expect(() => auth.check(`Bearer ${TOKEN}`, '10.0.0.1')).not.toThrow();
  });
});
