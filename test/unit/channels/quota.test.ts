import { describe, expect, it } from 'vitest';
import { HeraldError } from '../../../src/errors.js';
import { MessageQuota, messageCost } from '../../../src/channels/quota.js';

describe('daily message quota', () => {
  it('charges one per channel, two with info', () => {
    expect(messageCost(1, false)).toBe(1);
    expect(messageCost(3, false)).toBe(3);
    expect(messageCost(3, true)).toBe(6);
  });

  it('refuses a request that would go over, without charging it, and resets at 00:00 UTC', () => {
    let now = Date.UTC(2025, 0, 1, 23, 59, 0);
    const quota = new MessageQuota(() => now);
    const app = { id: 'a', messageQuota: 5 };
    quota.charge(app, 2);
    quota.charge(app, 2);
    expect(() => quota.charge(app, 2)).toThrow(HeraldError);
    try {
      quota.charge(app, 2);
    } catch (err) {
      expect((err as HeraldError).code).toBe('APP_OVER_QUOTA');
      expect((err as HeraldError).status).toBe(403);
      expect((err as HeraldError).message).toContain('4 of 5');
    }
    expect(quota.usedToday('a')).toBe(4);
    quota.charge(app, 1);
    expect(quota.usedToday('a')).toBe(5);
    now = Date.UTC(2025, 0, 2, 0, 0, 1);
    expect(quota.usedToday('a')).toBe(0);
    quota.charge(app, 5);
    expect(quota.usedToday('a')).toBe(5);
  });

  it('counts apps separately and does not count apps without a quota', () => {
    const quota = new MessageQuota();
    quota.charge({ id: 'a', messageQuota: 1 }, 1);
    quota.charge({ id: 'b', messageQuota: 1 }, 1);
    quota.charge({ id: 'c', messageQuota: null }, 1_000_000);
    expect(quota.usedToday('c')).toBe(0);
    expect(() => quota.charge({ id: 'a', messageQuota: 1 }, 1)).toThrow(/over its message quota/);
  });

  it('forgets a removed app: the same id starts at 0', () => {
    const quota = new MessageQuota();
    quota.charge({ id: 'a', messageQuota: 2 }, 2);
    quota.forget('a');
    expect(quota.usedToday('a')).toBe(0);
    quota.charge({ id: 'a', messageQuota: 2 }, 2);
  });
});
