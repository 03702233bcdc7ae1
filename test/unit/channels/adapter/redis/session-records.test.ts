/**
 * The registrations of one session switch on a node with several front-end threads, merged
 * (session-records.ts mergeRegistrations): each thread records its share on its own connection,
 * and the node reports them as one.
 */
import { describe, expect, it } from 'vitest';
import { mergeRegistrations, mergeTransitions } from '../../../../../src/channels/adapter/redis/session-records.js';
import type { Registration } from '../../../../../src/channels/adapter/redis/channel-state.js';

describe('mergeRegistrations', () => {
  it('is the registration itself when there is one', () => {
    const one: Registration = { transitions: [{ type: 'channel_occupied', appId: 'a', channel: 'c' }], channels: [{ appId: 'a', channel: 'c', added: 1, subscriptionCount: 1 }] };
    expect(mergeRegistrations([one])).toBe(one);
  });

  it("sums a channel's additions over the threads, with the count after the last, and keeps every transition", () => {
    const thread0: Registration = {
      transitions: [{ type: 'channel_occupied', appId: 'a', channel: 'c' }],
      channels: [
        { appId: 'a', channel: 'c', added: 1, subscriptionCount: 1 },
        { appId: 'a', channel: 'd', added: 2, subscriptionCount: 5 },
      ],
    };
    const thread1: Registration = { transitions: [], channels: [{ appId: 'a', channel: 'c', added: 2, subscriptionCount: 3 }] };
    const merged = mergeRegistrations([thread0, thread1]);
    expect(merged.transitions).toEqual([{ type: 'channel_occupied', appId: 'a', channel: 'c' }]);
    expect(merged.channels).toEqual([
      { appId: 'a', channel: 'c', added: 3, subscriptionCount: 3 },
      { appId: 'a', channel: 'd', added: 2, subscriptionCount: 5 },
    ]);
    // Registered again on two threads and reaped in equal numbers: no count change to report.
    const reaped = [{ appId: 'a', channel: 'c', removed: [], vacated: false, count: 3, sockets: 3 }];
    expect(mergeTransitions({ transitions: [], channels: merged.channels }, reaped).filter((t) => t.type === 'subscription_count' && t.channel === 'c')).toEqual([]);
  });
});
