/**
 * Channel state is cluster-wide (issue 14): occupancy, subscription counts, presence members and
 * cache channels live in Redis, so C3, C4 and C6 answer the same on every node, a user with
 * connections on several nodes counts once, member_added / member_removed follow the first and
 * last connection anywhere, and a cache channel's last event is replayed on any node.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type PusherServer from 'pusher';
import { ClientPool, type ChannelRecord } from '../helpers/channel-clients.js';
import { heraldClusterBed, type HeraldCluster } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { flushedBy, until } from '../helpers/wait.js';

const APP = { id: 'st-app', key: 'st-key', secret: 'st-secret', clientEvents: true, subscriptionCount: true, cacheTtlSeconds: 60 };
const bed = heraldClusterBed('state');
const pool = new ClientPool(APP);

afterEach(() => pool.disconnectAll());

async function getJson(sdk: PusherServer, path: string, params?: Record<string, string>): Promise<unknown> {
  const res = await sdk.get({ path, ...(params && { params }) });
  return res.json();
}

/** What C3, C4 and C6 answer on `node` for the channels of these tests. */
async function snapshot(node: HeraldProcess): Promise<Record<string, unknown>> {
  const sdk = pool.sdk(node);
  const users = (await getJson(sdk, '/channels/presence-room/users')) as { users: { id: string }[] };
  return {
    presenceList: await getJson(sdk, '/channels', { filter_by_prefix: 'presence-', info: 'user_count' }),
    roomList: await getJson(sdk, '/channels', { filter_by_prefix: 'room-' }),
    presence: await getJson(sdk, '/channels/presence-room', { info: 'user_count' }),
    roomX: await getJson(sdk, '/channels/room-x', { info: 'subscription_count' }),
    users: users.users.map((u) => u.id).sort(),
  };
}

/** Polls until every node answers `expected` (they must agree, from shared state); fails with the first disagreeing node. */
async function everyNodeAnswers(cluster: HeraldCluster, expected: Record<string, unknown>, what: string): Promise<void> {
  let last: Record<string, unknown>[] = [];
  await until(async () => {
    last = await Promise.all(cluster.nodes.map((n) => snapshot(n)));
    return last.every((s) => JSON.stringify(s) === JSON.stringify(expected));
  }, what).catch(() => undefined);
  for (const [i, s] of last.entries()) expect(s, `${what}: node ${i} answers`).toEqual(expected);
}

/** The subscription counts a subscriber was sent, in order. */
function counts(record: ChannelRecord): number[] {
  return record.data('pusher:subscription_count').map((c) => (c as { subscription_count: number }).subscription_count);
}

describe('C3, C4 and C6 on three nodes', () => {
  it('answer the same on every node, counting a user with connections on two nodes once', async () => {
    const cluster = await bed.start({ apps: [APP], nodes: 3 });
    const u1a = await pool.connect(cluster.a, { userId: 'u1' });
    const u1b = await pool.connect(cluster.b, { userId: 'u1' });
    const u2c = await pool.connect(cluster.c, { userId: 'u2' });
    await u1a.subscribe('presence-room');
    await u1b.subscribe('presence-room');
    const joined = await u2c.subscribe('presence-room');
    // The member list a new subscriber gets holds the members of every node.
    expect(joined.memberIds()).toEqual(['u1', 'u2']);
    await u1a.subscribe('room-x');
    await u1b.subscribe('room-x');
    await u2c.subscribe('room-y');

    await everyNodeAnswers(cluster, {
      presenceList: { channels: { 'presence-room': { user_count: 2 } } },
      roomList: { channels: { 'room-x': {}, 'room-y': {} } },
      presence: { occupied: true, user_count: 2 },
      roomX: { occupied: true, subscription_count: 2 },
      users: ['u1', 'u2'],
    }, 'everyone subscribed');
    // C1 info through node C counts both nodes too.
    const res = await pool.sdk(cluster.c).trigger(['presence-room', 'room-x'], 'ev', 'x', { info: 'user_count,subscription_count' });
    expect(await res.json()).toEqual({ channels: { 'presence-room': { user_count: 2 }, 'room-x': { subscription_count: 2 } } });

    // u1 leaves node A: still present through node B.
    u1a.disconnect();
    await everyNodeAnswers(cluster, {
      presenceList: { channels: { 'presence-room': { user_count: 2 } } },
      roomList: { channels: { 'room-x': {}, 'room-y': {} } },
      presence: { occupied: true, user_count: 2 },
      roomX: { occupied: true, subscription_count: 1 },
      users: ['u1', 'u2'],
    }, 'u1 left node A');
    u1b.disconnect();
    u2c.unsubscribe('room-y');
    await everyNodeAnswers(cluster, {
      presenceList: { channels: { 'presence-room': { user_count: 1 } } },
      roomList: { channels: {} },
      presence: { occupied: true, user_count: 1 },
      roomX: { occupied: false, subscription_count: 0 },
      users: ['u2'],
    }, 'u1 gone, room-y left');
  });
});

describe('presence members across nodes', () => {
  it('member_added when the first connection anywhere joins, member_removed only when the last leaves', async () => {
    const cluster = await bed.start({ apps: [APP], nodes: 3 });
    const watchA = await pool.connect(cluster.a, { userId: 'watch-a', userInfo: { node: 'A' } });
    const watchC = await pool.connect(cluster.c, { userId: 'watch-c', userInfo: { node: 'C' } });
    const roomA = await watchA.subscribe('presence-lobby');
    const roomC = await watchC.subscribe('presence-lobby');
    await until(() => roomA.data('pusher:member_added').length === 1, 'watch-c added on node A');
    expect(roomA.data('pusher:member_added')).toEqual([{ id: 'watch-c', info: { node: 'C' } }]);
    // A channel bob's connection on node B joins after the lobby: when that connection closes,
    // node B leaves its channels in the order they were joined, so the count of this one that
    // A and C are sent comes after whatever B sends for the lobby.
    const afterLobbyA = await watchA.subscribe('after-lobby');
    const afterLobbyC = await watchC.subscribe('after-lobby');
    const countIs = (n: number) => () => counts(afterLobbyA).at(-1) === n && counts(afterLobbyC).at(-1) === n;
    await until(countIs(2), 'the two watchers counted on A and C');
    const sdkC = pool.sdk(cluster.c);
    const markersArrived = (n: number) => () => roomA.data('marker').length === n && roomC.data('marker').length === n;

    const bobB = await pool.connect(cluster.b, { userId: 'bob', userInfo: { name: 'Bob' } });
    const bobC = await pool.connect(cluster.c, { userId: 'bob', userInfo: { name: 'Bob' } });
    const first = await bobB.subscribe('presence-lobby');
    await bobB.subscribe('after-lobby');
    await until(countIs(3), 'bob counted on A and C');
    expect(first.memberIds()).toEqual(['bob', 'watch-a', 'watch-c']);
    await until(() => roomA.data('pusher:member_added').length === 2 && roomC.data('pusher:member_added').length === 1, 'bob added on A and C');
    const second = await bobC.subscribe('presence-lobby');
    expect(second.memberIds()).toEqual(['bob', 'watch-a', 'watch-c']);
    // user_info of members joined on other nodes comes with the member list.
    expect(second.memberInfo('watch-a')).toEqual({ node: 'A' });
    expect(roomA.memberInfo('watch-c')).toEqual({ node: 'C' });
    // Node C joined bob's second connection: a marker it sends after comes after any member_added of it.
    await flushedBy(() => sdkC.trigger('presence-lobby', 'marker', 1), markersArrived(1), 'the first marker on A and C');
    expect(roomA.data('pusher:member_added')).toEqual([{ id: 'watch-c', info: { node: 'C' } }, { id: 'bob', info: { name: 'Bob' } }]);
    expect(roomC.data('pusher:member_added')).toEqual([{ id: 'bob', info: { name: 'Bob' } }]);

    await flushedBy(() => bobB.disconnect(), countIs(2), "the count of bob's leaving node B on A and C");
    expect(roomA.data('pusher:member_removed')).toEqual([]);
    expect(roomC.data('pusher:member_removed')).toEqual([]);
    expect(roomA.memberIds()).toEqual(['bob', 'watch-a', 'watch-c']);
    bobC.unsubscribe('presence-lobby');
    await until(() => roomA.data('pusher:member_removed').length === 1 && roomC.data('pusher:member_removed').length === 1, 'bob removed on A and C');
    await flushedBy(() => sdkC.trigger('presence-lobby', 'marker', 2), markersArrived(2), 'the second marker on A and C');
    expect(roomA.data('pusher:member_removed')).toEqual([{ id: 'bob', info: { name: 'Bob' } }]);
    expect(roomC.data('pusher:member_removed')).toEqual([{ id: 'bob', info: { name: 'Bob' } }]);
    expect(roomA.memberIds()).toEqual(['watch-a', 'watch-c']);
  });

  it('pusher:subscription_count counts the subscribers of every node', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onA = await pool.connect(cluster.a);
    const onB = await pool.connect(cluster.b);
    const atA = await onA.subscribe('counted');
    await until(() => atA.data('pusher:subscription_count').length >= 1, 'count on A');
    await onB.subscribe('counted');
    await until(() => atA.data('pusher:subscription_count').length >= 2, 'count on A after B joined');
    onB.unsubscribe('counted');
    await until(() => atA.data('pusher:subscription_count').length >= 3, 'count on A after B left');
    expect(atA.data('pusher:subscription_count')).toEqual([{ subscription_count: 1 }, { subscription_count: 2 }, { subscription_count: 1 }]);
  });
});

describe('cache channels across nodes', () => {
  it('replay on node B the last event stored through node A, and send cache_miss when empty', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onB = await pool.connect(cluster.b);
    const empty = await onB.subscribe('cache-empty');
    await until(() => empty.data('pusher:cache_miss').length === 1, 'cache_miss on B');

    await pool.sdk(cluster.a).trigger('cache-scores', 'score', { home: 1 });
    await pool.sdk(cluster.a).trigger('cache-scores', 'score', { home: 2 });
    // C4 on node B sees the cache written through node A, with the app's TTL.
    type CacheInfo = { occupied: boolean; cache: { event: string; data: string; ttl: number } | null };
    const body = await until(async () => {
      const info = (await getJson(pool.sdk(cluster.b), '/channels/cache-scores', { info: 'cache' })) as CacheInfo;
      return info.cache !== null && info;
    }, 'the cache seen on node B', 5000);
    expect(body).toMatchObject({ occupied: false, cache: { data: JSON.stringify({ home: 2 }) } });
    expect(body?.cache?.ttl).toBeGreaterThan(50);
    expect(body?.cache?.ttl).toBeLessThanOrEqual(60);

    const scores = await onB.subscribe('cache-scores');
    await until(() => scores.data('score').length === 1, 'replay on node B');
    // Node B sent the replay on the subscription: a marker it sends after comes after it.
    await flushedBy(() => pool.sdk(cluster.b).trigger('cache-scores', 'marker', {}), () => scores.data('marker').length === 1, 'the marker on node B');
    expect(scores.data('score')).toEqual([{ home: 2 }]);
    expect(scores.data('pusher:cache_miss')).toEqual([]);

    // A client event on a cache channel through node A is cached too.
    const writer = await pool.connect(cluster.a);
    const priv = await writer.subscribe('private-cache-notes');
    priv.channel.trigger('client-note', { v: 'from A' });
    let seen: unknown;
    await until(async () => {
      const info = (await getJson(pool.sdk(cluster.b), '/channels/private-cache-notes', { info: 'cache' })) as CacheInfo;
      seen = info;
      return info.cache !== null;
    }, () => `the client event cached, seen on node B (last ${JSON.stringify(seen)})`, 5000);
    const reader = await pool.connect(cluster.b);
    const notes = await reader.subscribe('private-cache-notes');
    await until(() => notes.data('client-note').length === 1, 'client event replay on node B');
    expect(notes.data('client-note')).toEqual([{ v: 'from A' }]);
  });
});
