import { describe, expect, it } from 'vitest';
import { LeaveDebounce } from '../../../src/webhooks/leave-debounce.js';

const ref = (seq: number) => ({ queueKey: 'q', seq });

describe('LeaveDebounce', () => {
  it('keeps channel and member keys apart', () => {
    expect(LeaveDebounce.channelKey('a', 'presence-x')).not.toBe(LeaveDebounce.memberKey('a', 'presence-x', ''));
    expect(LeaveDebounce.memberKey('a', 'c', 'u1')).not.toBe(LeaveDebounce.memberKey('a', 'c', 'u2'));
  });

  it('a re-occupy within the window cancels the held events; after it, nothing is cancelled', () => {
    const d = new LeaveDebounce();
    const key = LeaveDebounce.channelKey('app', 'room');
    d.hold(key, 1_000, [ref(1), ref(2)]);
    expect(d.heldEntries()).toBe(2);
    expect(d.cancel(key, 999)).toEqual([ref(1), ref(2)]);
    expect(d.cancel(key, 999)).toBeUndefined();
    d.hold(key, 1_000, [ref(3)]);
    expect(d.cancel(key, 1_000)).toBeUndefined();
    expect(d.heldEntries()).toBe(0);
  });

  it('a second hold of a key adds its entries and keeps the later release time', () => {
    const d = new LeaveDebounce();
    const key = LeaveDebounce.memberKey('app', 'presence-x', 'ada');
    d.hold(key, 1_000, [ref(1)]);
    d.hold(key, 900, [ref(2)]);
    d.hold(key, 1_500, [ref(3)]);
    expect(d.cancel(key, 1_200)).toEqual([ref(1), ref(2), ref(3)]);
  });

  it('prunes released holds from the front, oldest first', () => {
    const d = new LeaveDebounce();
    d.hold('a', 100, [ref(1)]);
    d.hold('b', 200, [ref(2)]);
    d.hold('c', 300, [ref(3)]);
    d.prune(200);
    expect(d.heldEntries()).toBe(1);
    expect(d.cancel('a', 0)).toBeUndefined();
    expect(d.cancel('c', 250)).toEqual([ref(3)]);
  });

  it('holds with no entries still cancel (no receiver wanted the vacated event)', () => {
    const d = new LeaveDebounce();
    d.hold('k', 1_000, []);
    expect(d.cancel('k', 10)).toEqual([]);
  });
});
