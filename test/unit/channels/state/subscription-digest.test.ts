import { describe, expect, it } from 'vitest';
import { subscriptionDigest } from '../../../../src/channels/state/subscription-digest.js';

describe('subscriptionDigest', () => {
  it('is the same for the same set in any order and differs when one subscription differs', () => {
    const a: [string, string, string][] = [
      ['app', 'news', '1.1'],
      ['app', 'presence-room', '1.2'],
      ['other', 'news', '1.1'],
    ];
    expect(subscriptionDigest([...a].reverse())).toEqual(subscriptionDigest(a));
    expect(subscriptionDigest(a).count).toBe(3);
    expect(subscriptionDigest([...a.slice(0, 2), ['other', 'news', '1.3']])).not.toEqual(subscriptionDigest(a));
    expect(subscriptionDigest(a.slice(1))).not.toEqual(subscriptionDigest(a));
    expect(subscriptionDigest([])).toEqual({ count: 0, sum: 0, xor: 0 });
  });
});
