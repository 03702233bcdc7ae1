/**
 * The shard side of a reconcile on a real ChannelStore: subscribers the front end does not hold
 * (ghosts) are removed as leaves, with what other sockets must be told; subscriptions the front
 * end holds and the shard lacks are recorded again, except those whose leave is on the way;
 * parts of one session add up, and a newer session discards an unfinished older one.
 */
import { describe, expect, it } from 'vitest';
import { ChannelStore } from '../../../../src/channels/state/channel-store.js';
import { Reconciler } from '../../../../src/channels/state/reconciler.js';
import type { ReconcileRemoval } from '../../../../src/channels/messages.js';

function setup() {
  const store = new ChannelStore();
  const join = (channel: string, socketId: string, userId?: string) =>
    store.join({ appId: 'a', channel, socketId, member: userId === undefined ? undefined : { userId }, maxMembers: 100 }, channel.startsWith('presence-'));
  const reconciler = new Reconciler({
    stored: () => store.subscriptions(),
    remove: (appId, channel, socketId): ReconcileRemoval => {
      const outcome = store.leave(appId, channel, socketId);
      const removal: ReconcileRemoval = { appId, channel, subscriptionCount: outcome.subscriptionCount };
      if (outcome.memberRemoved !== null) removal.memberRemoved = outcome.memberRemoved;
      return removal;
    },
    restore: (appId, subs) => {
      let restored = 0;
      for (const s of subs) {
        const presence = s.channel.startsWith('presence-');
        if (store.join({ appId, channel: s.channel, socketId: s.socketId, member: s.member, maxMembers: Infinity }, presence).changed) restored++;
      }
      return restored;
    },
  });
  return { store, join, reconciler };
}

describe('Reconciler', () => {
  it('removes ghosts, keeps what the front end holds and restores what the shard lacks', () => {
    const { store, join, reconciler } = setup();
    join('news', '1.1');
    join('news', '1.2'); // ghost
    join('presence-room', '1.3', 'ghost-user'); // ghost, the user's only connection
    join('presence-room', '1.4', 'alice');
    const res = reconciler.part({
      session: 1,
      last: true,
      subscriptions: [
        { appId: 'a', channel: 'news', socketId: '1.1' },
        { appId: 'a', channel: 'presence-room', socketId: '1.4', member: { userId: 'alice' } },
        { appId: 'a', channel: 'lost', socketId: '1.5' }, // the shard lacks it
        { appId: 'a', channel: 'leaving', socketId: '1.6', leaving: true }, // lacks it, but its leave is queued
      ],
    });
    expect(res.restored).toBe(1);
    expect(res.removed).toEqual(
      expect.arrayContaining([
        { appId: 'a', channel: 'news', subscriptionCount: 1 },
        { appId: 'a', channel: 'presence-room', memberRemoved: 'ghost-user', subscriptionCount: 1 },
      ]),
    );
    expect(res.removed).toHaveLength(2);
    expect(store.subscriptions().sort()).toEqual([
      ['a', 'lost', '1.5'],
      ['a', 'news', '1.1'],
      ['a', 'presence-room', '1.4'],
    ]);
    expect(store.userIds('a', 'presence-room')).toEqual(['alice']);
  });

  it('adds up the parts of a session and drops an unfinished older one', () => {
    const { store, join, reconciler } = setup();
    join('x', '1.1');
    join('y', '1.2');
    expect(reconciler.part({ session: 1, last: false, subscriptions: [{ appId: 'a', channel: 'x', socketId: '1.1' }] })).toEqual({ removed: [], restored: 0 });
    // Session 1 never finishes; session 2 lists both in two parts: nothing is removed.
    reconciler.part({ session: 2, last: false, subscriptions: [{ appId: 'a', channel: 'y', socketId: '1.2' }] });
    const res = reconciler.part({ session: 2, last: true, subscriptions: [{ appId: 'a', channel: 'x', socketId: '1.1' }] });
    expect(res).toEqual({ removed: [], restored: 0 });
    expect(store.subscriptions()).toHaveLength(2);
  });

  it('empties the shard when the front end holds nothing', () => {
    const { store, join, reconciler } = setup();
    join('x', '1.1');
    join('presence-p', '1.2', 'u');
    const res = reconciler.part({ session: 7, last: true, subscriptions: [] });
    expect(res.removed).toHaveLength(2);
    expect(store.subscriptions()).toEqual([]);
  });
});
