/**
 * The shard side of a reconcile on a real ChannelStore: subscribers the front end does not hold
 * (ghosts) are removed as leaves, with what other sockets must be told; subscriptions the front
 * end holds and the shard lacks are recorded again, except those whose leave is on the way;
 * parts of one session add up, and a newer session discards an unfinished older one. Naming a
 * front-end thread narrows the digest, the comparison and the removals to the subscribers whose
 * socket id carries it, keeps each thread's sessions apart, and a thread that is gone has all its
 * subscribers dropped.
 */
import { describe, expect, it } from 'vitest';
import { ChannelStore } from '../../../../src/channels/state/channel-store.js';
import { Reconciler } from '../../../../src/channels/state/reconciler.js';
import type { ReconcileRemoval } from '../../../../src/channels/messages.js';
import { newSocketId } from '../../../../src/channels/socket-id.js';
import { subscriptionDigest } from '../../../../src/channels/state/subscription-digest.js';

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

  describe('per front-end thread', () => {
    /** Two threads' subscribers on one shard: a and b of thread 0, c and a presence member of thread 1. */
    function twoFrontEnds() {
      const parts = setup();
      const ids = { a: newSocketId(0), b: newSocketId(0), c: newSocketId(1), d: newSocketId(1) };
      parts.join('news', ids.a);
      parts.join('news', ids.b);
      parts.join('news', ids.c);
      parts.join('presence-room', ids.d, 'dana');
      parts.join('presence-room', ids.a, 'ada');
      return { ...parts, ids };
    }

    it('digests one thread\'s subscribers, or all of them', () => {
      const { store, reconciler, ids } = twoFrontEnds();
      expect(reconciler.digest()).toEqual(subscriptionDigest(store.subscriptions()));
      expect(reconciler.digest(0)).toEqual(subscriptionDigest([['a', 'news', ids.a], ['a', 'news', ids.b], ['a', 'presence-room', ids.a]]));
      expect(reconciler.digest(1)).toEqual(subscriptionDigest([['a', 'news', ids.c], ['a', 'presence-room', ids.d]]));
      expect(reconciler.digest(2)).toEqual({ count: 0, sum: 0, xor: 0 });
    });

    it('compares and removes only the named thread\'s subscribers', () => {
      const { store, reconciler, ids } = twoFrontEnds();
      // Thread 1 holds c only: d is its ghost; thread 0's subscribers, listed by nobody here, stay.
      const res = reconciler.part({ session: 1, last: true, frontEnd: 1, subscriptions: [{ appId: 'a', channel: 'news', socketId: ids.c }] });
      expect(res).toEqual({ removed: [{ appId: 'a', channel: 'presence-room', memberRemoved: 'dana', subscriptionCount: 1 }], restored: 0 });
      expect(store.subscriptions().sort()).toEqual(
        [['a', 'news', ids.a], ['a', 'news', ids.b], ['a', 'news', ids.c], ['a', 'presence-room', ids.a]].sort(),
      );
      expect(store.userIds('a', 'presence-room')).toEqual(['ada']);
    });

    it('keeps each thread\'s session apart: parts of one do not discard the other\'s', () => {
      const { store, reconciler, ids } = twoFrontEnds();
      // Both threads number their sessions themselves: the same number, interleaved parts.
      reconciler.part({ session: 1, last: false, frontEnd: 0, subscriptions: [{ appId: 'a', channel: 'news', socketId: ids.a }] });
      reconciler.part({ session: 1, last: false, frontEnd: 1, subscriptions: [{ appId: 'a', channel: 'news', socketId: ids.c }] });
      const zero = reconciler.part({
        session: 1,
        last: true,
        frontEnd: 0,
        subscriptions: [{ appId: 'a', channel: 'news', socketId: ids.b }, { appId: 'a', channel: 'presence-room', socketId: ids.a, member: { userId: 'ada' } }],
      });
      expect(zero).toEqual({ removed: [], restored: 0 });
      const one = reconciler.part({ session: 1, last: true, frontEnd: 1, subscriptions: [{ appId: 'a', channel: 'presence-room', socketId: ids.d, member: { userId: 'dana' } }] });
      expect(one).toEqual({ removed: [], restored: 0 });
      expect(store.subscriptions()).toHaveLength(5);
    });

    it('drops every subscriber of a thread that is gone, as leaves, and forgets its unfinished session', () => {
      const { store, reconciler, ids } = twoFrontEnds();
      reconciler.part({ session: 4, last: false, frontEnd: 1, subscriptions: [{ appId: 'a', channel: 'news', socketId: ids.c }] });
      expect(reconciler.drop(1)).toEqual(
        expect.arrayContaining([
          { appId: 'a', channel: 'news', subscriptionCount: 2 },
          { appId: 'a', channel: 'presence-room', memberRemoved: 'dana', subscriptionCount: 1 },
        ]),
      );
      expect(store.subscriptions().every(([, , socketId]) => socketId === ids.a || socketId === ids.b)).toBe(true);
      expect(store.subscriptions()).toHaveLength(3);
      // The finishing part of the dropped thread's old session lists only what it gave: c is not restored from it.
      const res = reconciler.part({ session: 4, last: true, frontEnd: 1, subscriptions: [] });
      expect(res).toEqual({ removed: [], restored: 0 });
      expect(reconciler.drop(1)).toEqual([]);
    });
  });
});
