import { describe, expect, it } from 'vitest';
import { ChannelStore, cacheEntryBytes } from '../../../../src/channels/state/channel-store.js';
import { HeraldError } from '../../../../src/errors.js';

const join = (store: ChannelStore, socketId: string, channel = 'presence-room', userId?: string, maxMembers = 100) =>
  store.join({ appId: 'a', channel, socketId, member: userId === undefined ? undefined : { userId, userInfo: { n: userId } }, maxMembers }, channel.startsWith('presence-'));

describe('ChannelStore subscriptions', () => {
  it('reports occupied on the first subscriber and vacated on the last', () => {
    const store = new ChannelStore();
    expect(join(store, '1.1', 'news')).toMatchObject({ changed: true, occupied: true, subscriptionCount: 1 });
    expect(join(store, '1.2', 'news')).toMatchObject({ changed: true, occupied: false, subscriptionCount: 2 });
    expect(store.leave('a', 'news', '1.1')).toMatchObject({ changed: true, vacated: false, subscriptionCount: 1 });
    expect(store.leave('a', 'news', '1.2')).toMatchObject({ changed: true, vacated: true, subscriptionCount: 0 });
    expect(store.list('a', undefined)).toEqual({ names: [], userCounts: null });
  });

  it('counts occupied channels of every app and of the apps asked for', () => {
    const store = new ChannelStore();
    join(store, '1.1', 'news');
    join(store, '1.2', 'news');
    join(store, '1.1', 'sport');
    store.join({ appId: 'b', channel: 'news', socketId: '2.1', maxMembers: 100 }, false);
    expect(store.occupiedCounts(['a', 'b', 'c'])).toEqual({ total: 3, byApp: [2, 1, 0] });
    store.leave('a', 'news', '1.1');
    expect(store.occupiedCounts(['a'])).toEqual({ total: 3, byApp: [2] });
    store.leave('a', 'news', '1.2');
    store.leave('b', 'news', '2.1');
    store.leave('b', 'news', '2.1');
    expect(store.occupiedCounts(['a', 'b'])).toEqual({ total: 1, byApp: [1, 0] });
    // A removed app's channels leave the node's count with it.
    store.join({ appId: 'b', channel: 'news', socketId: '2.2', maxMembers: 100 }, false);
    expect(store.occupiedCounts(['a', 'b'])).toEqual({ total: 2, byApp: [1, 1] });
    store.removeApp('a');
    expect(store.occupiedCounts(['a', 'b'])).toEqual({ total: 1, byApp: [0, 1] });
  });

  it('ignores a repeated join and a leave of a socket that is not subscribed', () => {
    const store = new ChannelStore();
    join(store, '1.1', 'news');
    expect(join(store, '1.1', 'news')).toMatchObject({ changed: false, occupied: false, subscriptionCount: 1 });
    expect(store.leave('a', 'news', '9.9')).toMatchObject({ changed: false, vacated: false, subscriptionCount: 1 });
    expect(store.leave('a', 'other', '1.1')).toMatchObject({ changed: false, subscriptionCount: 0 });
  });

  it('counts a presence user once across connections', () => {
    const store = new ChannelStore();
    expect(join(store, '1.1', 'presence-room', 'u1')).toMatchObject({ memberAdded: true, members: [['u1', { n: 'u1' }]] });
    expect(join(store, '1.2', 'presence-room', 'u1')).toMatchObject({ memberAdded: false, subscriptionCount: 2 });
    expect(store.userCount('a', 'presence-room')).toBe(1);
    expect(store.leave('a', 'presence-room', '1.1').memberRemoved).toBeNull();
    expect(store.leave('a', 'presence-room', '1.2').memberRemoved).toBe('u1');
    expect(store.userIds('a', 'presence-room')).toEqual([]);
  });

  it('refuses a new user past maxMembers but admits more connections of a member', () => {
    const store = new ChannelStore();
    join(store, '1.1', 'presence-room', 'u1', 2);
    join(store, '1.2', 'presence-room', 'u2', 2);
    expect(() => join(store, '1.3', 'presence-room', 'u3', 2)).toThrow(HeraldError);
    expect(join(store, '1.4', 'presence-room', 'u2', 2)).toMatchObject({ memberAdded: false });
    expect(store.subscriptionCount('a', 'presence-room')).toBe(3);
  });

  it('keeps apps apart and lists by prefix with user counts', () => {
    const store = new ChannelStore();
    join(store, '1.1', 'presence-x', 'u1');
    join(store, '1.2', 'news');
    store.join({ appId: 'b', channel: 'news', socketId: '2.1', maxMembers: 100 }, false);
    expect(store.subscriptionCount('a', 'news')).toBe(1);
    expect(store.list('a', 'presence-', true)).toEqual({ names: ['presence-x'], userCounts: [1] });
    expect(store.list('b', undefined, true)).toEqual({ names: ['news'], userCounts: [0] });
    join(store, '1.3', 'alpha');
    expect(store.list('a', undefined)).toEqual({ names: ['alpha', 'news', 'presence-x'], userCounts: null });
  });

  it('keeps the presence JSON in step with joins and leaves: the same content as the snapshot of the members', () => {
    const store = new ChannelStore();
    const snapshot = () => {
      const ids = store.userIds('a', 'presence-room');
      return { ids, hash: JSON.parse(JSON.stringify(Object.fromEntries(ids.map((id) => [id, { n: id }])))), count: ids.length };
    };
    const users = ['u1', '2', '1', '__proto__', 'quote"back\\slash', 'line\nbreak', '\u2028', 'é'];
    expect(store.presenceJson('a', 'presence-room')).toBeNull();
    users.forEach((user, i) => {
      join(store, `1.${i}`, 'presence-room', user);
      // Asked for after some joins only: kept from then on, appended to on each join.
      if (i % 3 === 0) expect(JSON.parse(store.presenceJson('a', 'presence-room')!)).toEqual(snapshot());
    });
    join(store, '2.1', 'presence-room', 'u1'); // a second connection adds no member
    expect(JSON.parse(store.presenceJson('a', 'presence-room')!)).toEqual(snapshot());
    store.leave('a', 'presence-room', '1.1'); // '2' leaves
    expect(JSON.parse(store.presenceJson('a', 'presence-room')!)).toEqual(snapshot());
    expect(snapshot().ids).not.toContain('2');
    join(store, '3.1', 'presence-room', 'late');
    const after = JSON.parse(store.presenceJson('a', 'presence-room')!) as { ids: string[]; hash: object; count: number };
    expect(after).toEqual(snapshot());
    expect(after.ids.at(-1)).toBe('late');
    expect(after.hash).toHaveProperty(['__proto__']);
    expect(store.presenceJson('a', 'news')).toBeNull();
  });

  it('keeps a __proto__ user id as data', () => {
    const store = new ChannelStore();
    expect(join(store, '1.1', 'presence-room', '__proto__').members).toEqual([['__proto__', { n: '__proto__' }]]);
  });
});

describe('ChannelStore cache', () => {
  it('keeps the last event for the TTL and reports the seconds left', () => {
    let now = 1_000_000;
    const store = new ChannelStore(() => now);
    expect(store.cached('a', 'cache-x')).toBeNull();
    store.storeCached('a', 'cache-x', 'e1', 'd1', 30);
    store.storeCached('a', 'cache-x', 'e2', 'd2', 30);
    now += 10_500;
    expect(store.cached('a', 'cache-x')).toEqual({ event: 'e2', data: 'd2', ttl: 20 });
    expect(store.cached('b', 'cache-x')).toBeNull();
    now += 20_000;
    expect(store.cached('a', 'cache-x')).toBeNull();
  });

  it('prunes expired entries', () => {
    let now = 0;
    const store = new ChannelStore(() => now);
    store.storeCached('a', 'cache-1', 'e', 'd', 1);
    store.storeCached('a', 'cache-2', 'e', 'd', 60);
    now = 2000;
    expect(store.pruneCache()).toBe(1);
    expect(store.cached('a', 'cache-2')).not.toBeNull();
  });
});

describe('ChannelStore cache bound', () => {
  it('evicts the app\'s oldest-written entries first to stay within its bytes, other apps untouched', () => {
    const store = new ChannelStore(() => 0);
    const data = 'x'.repeat(90);
    const size = cacheEntryBytes('cache-0', 'e', data); // 98
    for (let i = 0; i < 5; i++) store.storeCached('a', `cache-${i}`, 'e', data, 60, size * 3);
    store.storeCached('b', 'cache-0', 'e', data, 60, size * 3);
    expect(store.cachedBytes('a')).toBe(size * 3);
    expect([0, 1, 2, 3, 4].map((i) => store.cached('a', `cache-${i}`) !== null)).toEqual([false, false, true, true, true]);
    expect(store.cached('b', 'cache-0')).not.toBeNull();
    // Rewriting a channel makes it the newest: cache-2 is then the oldest and goes next.
    store.storeCached('a', 'cache-2', 'e', data, 60, size * 3);
    store.storeCached('a', 'cache-5', 'e', data, 60, size * 3);
    expect([2, 3, 4, 5].map((i) => store.cached('a', `cache-${i}`) !== null)).toEqual([true, false, true, true]);
    expect(store.cachedBytes('a')).toBe(size * 3);
  });

  it('does not keep an entry larger than the bound, and frees the bytes of what expires', () => {
    let now = 0;
    const store = new ChannelStore(() => now);
    store.storeCached('a', 'cache-big', 'e', 'x'.repeat(1000), 60, 500);
    expect(store.cached('a', 'cache-big')).toBeNull();
    expect(store.cachedBytes('a')).toBe(0);
    store.storeCached('a', 'cache-1', 'e', 'd', 1, 500);
    now = 2000;
    store.pruneCache();
    expect(store.cachedBytes('a')).toBe(0);
  });
});
