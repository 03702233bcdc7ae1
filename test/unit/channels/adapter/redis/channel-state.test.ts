/**
 * Shared channel state on a real private redis-server, with two simulated nodes (two
 * ClusterNodes with different node ids on one Redis): transitions exactly once cluster-wide.
 */
import { describe, expect, it } from 'vitest';
import { clusterTestBed, type SimulatedNode } from '../../../../helpers/cluster-nodes.js';
import { STATE_SCRIPTS } from '../../../../../src/channels/adapter/redis/scripts.js';
import { SharedOutboxKeys } from '../../../../../src/webhooks/shared-outbox-keys.js';
import { sleep, until } from '../../../../helpers/wait.js';

const bed = clusterTestBed('t');

/** Two started nodes on a fresh key prefix (tests do not see each other's state). */
async function twoNodes(prefix = bed.prefix()): Promise<[SimulatedNode, SimulatedNode]> {
  const a = bed.node({ nodeId: 'node-a', keyPrefix: prefix });
  const b = bed.node({ nodeId: 'node-b', keyPrefix: prefix });
  await Promise.all([a.start(), b.start()]);
  return [a, b];
}

describe('RedisChannelState', () => {
  it('reports channel occupied on the first subscription cluster-wide and vacated on the last, once', async () => {
    const [a, b] = await twoNodes();
    const first = await a.join('app', 'news', '1.1');
    const second = await b.join('app', 'news', '2.1');
    const third = await b.join('app', 'news', '2.2');
    expect([first.occupied, second.occupied, third.occupied]).toEqual([true, false, false]);
    expect(third.subscriptionCount).toBe(3);
    // A repeated join changes nothing.
    expect(await b.join('app', 'news', '2.2')).toMatchObject({ changed: false, occupied: false, subscriptionCount: 3 });

    const leaves = [await a.leave('app', 'news', '1.1'), await b.leave('app', 'news', '2.1'), await b.leave('app', 'news', '2.2')];
    expect(leaves.map((l) => l.vacated)).toEqual([false, false, true]);
    expect(leaves.map((l) => l.subscriptionCount)).toEqual([2, 1, 0]);
    // Leaving again is a no-op.
    expect(await b.leave('app', 'news', '2.2')).toEqual({ changed: false, vacated: false, memberRemoved: null, subscriptionCount: 0 });
    expect((await a.state.channelInfo('app', 'news')).occupied).toBe(false);
  });

  it('decides occupied exactly once when both nodes join at the same moment', async () => {
    const [a, b] = await twoNodes();
    for (let i = 0; i < 20; i++) {
      const channel = `race-${i}`;
      const results = await Promise.all([a.join('app', channel, `a.${i}`), b.join('app', channel, `b.${i}`)]);
      expect(results.filter((r) => r.occupied)).toHaveLength(1);
      const leaves = await Promise.all([a.leave('app', channel, `a.${i}`), b.leave('app', channel, `b.${i}`)]);
      expect(leaves.filter((l) => l.vacated)).toHaveLength(1);
    }
  });

  it('counts a presence user with connections on both nodes once: member_added first, member_removed last', async () => {
    const [a, b] = await twoNodes();
    const alice = { userId: 'alice', userInfo: { name: 'Alice' } };
    const j1 = await a.join('app', 'presence-room', '1.1', alice);
    const j2 = await b.join('app', 'presence-room', '2.1', alice);
    const j3 = await b.join('app', 'presence-room', '2.2', { userId: 'bob' });
    expect([j1.memberAdded, j2.memberAdded, j3.memberAdded]).toEqual([true, false, true]);
    expect(new Map(j3.members)).toEqual(new Map<string, unknown>([['alice', { name: 'Alice' }], ['bob', null]]));

    for (const state of [a.state, b.state]) {
      expect((await state.presenceUserIds('app', 'presence-room')).sort()).toEqual(['alice', 'bob']);
      expect(await state.channelInfo('app', 'presence-room')).toMatchObject({ occupied: true, userCount: 2, subscriptionCount: 3 });
      expect(await state.listChannels('app', 'presence-', true)).toEqual([{ channel: 'presence-room', userCount: 2 }]);
    }

    expect((await a.leave('app', 'presence-room', '1.1')).memberRemoved).toBeNull();
    expect((await b.leave('app', 'presence-room', '2.1')).memberRemoved).toBe('alice');
    expect(await b.state.presenceUserIds('app', 'presence-room')).toEqual(['bob']);
  });

  it('applies the leave debounce cluster-wide: a re-join on another node cancels the held vacate and removal', async () => {
    const [a, b] = await twoNodes();
    await a.join('app', 'presence-reload', 'a.1', { userId: 'alice' });
    const left = await a.leave('app', 'presence-reload', 'a.1', 5000);
    expect(left).toMatchObject({ vacated: true, memberRemoved: 'alice' });
    expect(left.holds?.channel).toBeTruthy();
    expect(left.holds?.member).toBeTruthy();
    // The page reloads and lands on the other node.
    const back = await b.join('app', 'presence-reload', 'b.1', { userId: 'alice' });
    expect(back).toMatchObject({ occupied: true, memberAdded: true, cancelledVacate: true, cancelledMemberRemoval: true });
    // At the end of its debounce the leaving node learns both were cancelled: nothing is sent.
    expect(await a.state.releaseHold('app', 'presence-reload', null, left.holds!.channel!)).toBe(false);
    expect(await a.state.releaseHold('app', 'presence-reload', 'alice', left.holds!.member!)).toBe(false);

    // No re-join within the debounce: the holder sends; a later join is a plain occupy.
    const gone = await b.leave('app', 'presence-reload', 'b.1', 300);
    // time: past the 300 ms leave debounce.
    await sleep(400);
    const later = await a.join('app', 'presence-reload', 'a.2', { userId: 'alice' });
    expect(later).toMatchObject({ occupied: true, memberAdded: true, cancelledVacate: false, cancelledMemberRemoval: false });
    expect(await b.state.releaseHold('app', 'presence-reload', null, gone.holds!.channel!)).toBe(true);
    expect(await b.state.releaseHold('app', 'presence-reload', 'alice', gone.holds!.member!)).toBe(true);
    // Without a debounce no hold is left.
    expect((await a.leave('app', 'presence-reload', 'a.2')).holds).toBeUndefined();
  });

  it('keeps held webhooks in Redis: any node releases the due ones into the shared outbox once, a re-join cancels them', async () => {
    const [a, b] = await twoNodes();
    await a.join('app', 'presence-held', 'a.1', { userId: 'alice' });
    await a.join('app', 'presence-back', 'a.1', { userId: 'bob' });
    await a.leave('app', 'presence-held', 'a.1', 300);
    await a.leave('app', 'presence-back', 'a.1', 300);
    // bob comes back through node B within the debounce: his held leave is cancelled.
    expect(await b.join('app', 'presence-back', 'b.1', { userId: 'bob' })).toMatchObject({ cancelledVacate: true, cancelledMemberRemoval: true });
    // The node that decided them dies; node B releases them once due.
    a.node.crash();
    const redis = b.node.connections.commands;
    const release = () => STATE_SCRIPTS.run<number>(redis, 'heraldReleaseHeld', [b.node.keys.prefix, 100]);
    expect(await release()).toBe(0);
    // time: past the 300 ms hold: the release is due.
    await sleep(400);
    expect(await release()).toBe(2);
    expect(await release()).toBe(0);
    const messages = (await redis.xrange(new SharedOutboxKeys(b.node.keys.prefix).webhookOutbox(), '-', '+')).map(([, fields]) => JSON.parse(fields[1]!) as { appId: string; events: Record<string, unknown>[] });
    const events = messages.flatMap((m) => m.events.map((e): Record<string, unknown> => ({ appId: m.appId, ...e })));
    expect(events.map(({ id: _id, ...e }) => e).sort((x, y) => String(x.name).localeCompare(String(y.name)))).toEqual([
      { appId: 'app', name: 'channel_vacated', channel: 'presence-held' },
      { appId: 'app', name: 'member_removed', channel: 'presence-held', user_id: 'alice' },
    ]);
    for (const e of events) expect(e.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });

  it('refuses a new presence user beyond maxMembers, cluster-wide, but not another connection of a member', async () => {
    const [a, b] = await twoNodes();
    await a.join('app', 'presence-full', '1.1', { userId: 'u1' }, 2);
    await b.join('app', 'presence-full', '2.1', { userId: 'u2' }, 2);
    await expect(a.join('app', 'presence-full', '1.2', { userId: 'u3' }, 2)).rejects.toMatchObject({ code: 'PRESENCE_MEMBER_LIMIT' });
    expect((await a.join('app', 'presence-full', '1.3', { userId: 'u2' }, 2)).changed).toBe(true);
    expect(await a.state.channelInfo('app', 'presence-full')).toMatchObject({ subscriptionCount: 3, userCount: 2 });
  });

  it('lists occupied channels (C3) by prefix, sorted, from shared state', async () => {
    const [a, b] = await twoNodes();
    await a.join('app', 'private-b', '1.1');
    await b.join('app', 'private-a', '2.1');
    await b.join('app', 'public-x', '2.2');
    await a.join('other-app', 'private-z', '1.9');
    const expected = [
      { channel: 'private-a', userCount: 0 },
      { channel: 'private-b', userCount: 0 },
    ];
    expect(await a.state.listChannels('app', 'private-', false)).toEqual(expected);
    expect(await b.state.listChannels('app', 'private-', false)).toEqual(expected);
    expect((await a.state.listChannels('app', undefined, false)).map((c) => c.channel)).toEqual(['private-a', 'private-b', 'public-x']);
  });

  it('isolates clusters by keyPrefix on one Redis', async () => {
    const [a] = await twoNodes('iso-one:');
    const [c] = await twoNodes('iso-two:');
    await a.join('app', 'shared-name', '1.1');
    await a.connect('app', '1.1');
    expect((await c.state.channelInfo('app', 'shared-name')).occupied).toBe(false);
    expect(await c.state.listChannels('app', undefined, false)).toEqual([]);
    expect(await c.state.hasSocket('app', '1.1')).toBe(false);
    expect((await c.join('app', 'shared-name', '3.1')).occupied).toBe(true);
    const client = bed.redis.client();
    const keys = await client.keys('*');
    await client.quit();
    expect(keys.every((k) => k.startsWith('iso-one:') || k.startsWith('iso-two:') || /^t\d+:/.test(k))).toBe(true);
    expect(keys.some((k) => k.startsWith('iso-two:subs:'))).toBe(true);
  });

  it('shares cache channels: the last event with its TTL, gone after it', async () => {
    const [a, b] = await twoNodes();
    expect(await b.state.cachedEvent('app', 'cache-x')).toBeNull();
    await a.state.storeCachedEvent('app', 'cache-x', 'ev1', '{"n":1}', 60, 1 << 20);
    await b.state.storeCachedEvent('app', 'cache-x', 'ev2', '{"n":2}', 1, 1 << 20);
    const got = await a.state.cachedEvent('app', 'cache-x');
    expect(got).toEqual({ event: 'ev2', data: '{"n":2}', ttl: 1 });
    await a.join('app', 'cache-x', '1.1');
    expect((await a.state.channelInfo('app', 'cache-x', { cache: true })).cache).toEqual({ event: 'ev2', data: '{"n":2}', ttl: 1 });
    await until(async () => (await b.state.cachedEvent('app', 'cache-x')) === null, 'cache entry to expire', 10_000);
    expect((await b.state.channelInfo('app', 'cache-x', { cache: true })).cache).toBeNull();
  });

  it('bounds an app\'s cached events by maxCacheBytes cluster-wide: the oldest written are evicted first', async () => {
    const [a, b] = await twoNodes();
    // Each entry counts channel + event + data bytes: 'cache-0' + 'e' + 92 bytes = 100.
    const data = 'x'.repeat(92);
    const max = 300;
    for (const [node, i] of [[a, 0], [b, 1], [a, 2]] as const) expect(await node.state.storeCachedEvent('app', `cache-${i}`, 'e', data, 60, max)).toBe(true);
    // A fourth entry, through the other node: the oldest (cache-0) goes.
    expect(await b.state.storeCachedEvent('app', 'cache-3', 'e', data, 60, max)).toBe(true);
    expect(await a.state.cachedEvent('app', 'cache-0')).toBeNull();
    for (const i of [1, 2, 3]) expect((await a.state.cachedEvent('app', `cache-${i}`))?.data).toBe(data);
    // Rewriting cache-1 makes it the newest: the next entry evicts cache-2.
    expect(await a.state.storeCachedEvent('app', 'cache-1', 'e', data, 60, max)).toBe(true);
    expect(await b.state.storeCachedEvent('app', 'cache-4', 'e', data, 60, max)).toBe(true);
    expect(await a.state.cachedEvent('app', 'cache-2')).toBeNull();
    for (const i of [1, 3, 4]) expect(await b.state.cachedEvent('app', `cache-${i}`)).not.toBeNull();
    // Another app has its own bound.
    expect(await a.state.storeCachedEvent('other', 'cache-0', 'e', data, 60, max)).toBe(true);
    expect(await a.state.cachedEvent('app', 'cache-1')).not.toBeNull();
    // Larger than the whole bound: not stored, and the channel's previous entry is gone.
    expect(await a.state.storeCachedEvent('app', 'cache-3', 'e', 'y'.repeat(400), 60, max)).toBe(false);
    expect(await b.state.cachedEvent('app', 'cache-3')).toBeNull();
    expect(await b.state.cachedEvent('app', 'cache-4')).not.toBeNull();
  });

  it('counts an expired cached event no more against maxCacheBytes', async () => {
    const [a] = await twoNodes();
    const data = 'x'.repeat(92);
    expect(await a.state.storeCachedEvent('app', 'cache-0', 'e', data, 1, 200)).toBe(true);
    expect(await a.state.storeCachedEvent('app', 'cache-1', 'e', data, 1, 200)).toBe(true);
    await until(async () => (await a.state.cachedEvent('app', 'cache-1')) === null, 'entries to expire', 10_000);
    // Both expired: two new entries fit, nothing live is evicted for them.
    expect(await a.state.storeCachedEvent('app', 'cache-2', 'e', data, 60, 200)).toBe(true);
    expect(await a.state.storeCachedEvent('app', 'cache-3', 'e', data, 60, 200)).toBe(true);
    expect(await a.state.cachedEvent('app', 'cache-2')).not.toBeNull();
    expect(await a.state.cachedEvent('app', 'cache-3')).not.toBeNull();
  });

  it('counts connections per app cluster-wide against maxConnections, and answers hasSocket on every node', async () => {
    const [a, b] = await twoNodes();
    expect(await a.connect('app', '1.1', 3)).toEqual({ accepted: true, connections: 1 });
    expect(await b.connect('app', '2.1', 3)).toEqual({ accepted: true, connections: 2 });
    expect(await b.connect('app', '2.2', 3)).toEqual({ accepted: true, connections: 3 });
    expect(await a.connect('app', '1.2', 3)).toEqual({ accepted: false, connections: 3 });
    expect(await a.connect('other', '1.2', 3)).toEqual({ accepted: true, connections: 1 });
    expect(await a.state.hasSocket('app', '2.2')).toBe(true);
    expect(await a.state.hasSocket('app', '1.2')).toBe(false);
    expect(await b.state.disconnect('app', '2.2')).toBe(2);
    expect(await a.connect('app', '1.2', 3)).toEqual({ accepted: true, connections: 3 });
    expect(await b.state.connectionCount('app')).toBe(3);
  });

  it('charges the daily message quota cluster-wide; a refused charge is not counted', async () => {
    const [a, b] = await twoNodes();
    expect(await a.state.chargeQuota('app', 4, 10)).toEqual({ accepted: true, used: 4 });
    expect(await b.state.chargeQuota('app', 4, 10)).toEqual({ accepted: true, used: 8 });
    expect(await a.state.chargeQuota('app', 4, 10)).toEqual({ accepted: false, used: 8 });
    expect(await b.state.chargeQuota('app', 2, 10)).toEqual({ accepted: true, used: 10 });
    expect(await b.state.chargeQuota('other', 2, 10)).toEqual({ accepted: true, used: 2 });
  });
});
