/**
 * The join/leave state machine (src/channels/ws/subscriptions.ts) over a real local adapter:
 * shard workers and uWS sockets (test/helpers/local-channel-adapter.ts). A stalled shard
 * (core.stall) keeps a join or leave in flight while the client changes its mind, so the races
 * the state machine exists for happen on purpose.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Subscriptions } from '../../../../src/channels/ws/subscriptions.js';
import { channelShardFor } from '../../../../src/shards/hash.js';
import { HARNESS_APP, startLocalAdapter, type LocalConnection, type LocalHarness } from '../../../helpers/local-channel-adapter.js';
import { until } from '../../../helpers/wait.js';

let h: LocalHarness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
}, 60_000);

async function start(app: Parameters<typeof startLocalAdapter>[0] = {}): Promise<{ h: LocalHarness; subs: Subscriptions }> {
  h = await startLocalAdapter(app);
  return { h, subs: new Subscriptions(h.adapter, () => false, () => h!.registry.all()) };
}

/** Blocks the shard owning the channel for `ms` (requests sent meanwhile wait behind it). */
function stallShardOf(harness: LocalHarness, channel: string, ms: number): Promise<unknown> {
  return harness.shards.request(channelShardFor(HARNESS_APP, channel, harness.shards.shardCount), { type: 'core.stall', stallMs: ms });
}

/** The socket closed, as the WebSocket endpoint handles it. */
function closeSocket(subs: Subscriptions, conn: LocalConnection): void {
  conn.state.closed = true;
  conn.state.ws = null;
  subs.closed(conn.state);
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const events = (conn: LocalConnection): string[] => conn.frames.map((f) => (JSON.parse(f) as { event: string }).event);

describe('Subscriptions (join/leave state machine)', () => {
  it('joins once for a repeated subscribe and tells the others of the new count', async () => {
    const { h, subs } = await start({ subscriptionCount: true });
    const [a, b] = [await h.connect(HARNESS_APP), await h.connect(HARNESS_APP)];
    subs.subscribe(a.state, 'room');
    await until(() => events(a).includes('pusher_internal:subscription_succeeded'), 'a joined');
    subs.subscribe(b.state, 'room');
    subs.subscribe(b.state, 'room');
    const countTwo = JSON.stringify({ event: 'pusher_internal:subscription_count', channel: 'room', data: JSON.stringify({ subscription_count: 2 }) });
    await until(() => a.frames.includes(countTwo), 'a told of 2 subscribers');
    expect(events(b).filter((e) => e === 'pusher_internal:subscription_succeeded')).toHaveLength(1);
    expect((await h.adapter.channelInfo(HARNESS_APP, 'room', { subscriptionCount: true })).subscriptionCount).toBe(2);
  });

  it('leaves after a join the socket closed during: the shard keeps no member, the others see it come and go', async () => {
    const { h, subs } = await start();
    const [watcher, leaver] = [await h.connect(HARNESS_APP), await h.connect(HARNESS_APP)];
    subs.subscribe(watcher.state, 'presence-lab', { userId: 'bob', userInfo: null });
    await until(() => events(watcher).includes('pusher_internal:subscription_succeeded'), 'watcher joined');
    const stalled = stallShardOf(h, 'presence-lab', 300);
    subs.subscribe(leaver.state, 'presence-lab', { userId: 'ada', userInfo: null });
    // The adapter sends its queued joins on the next turn: from then on this one is in flight.
    await nextTurn();
    closeSocket(subs, leaver);
    await stalled;
    await until(() => events(watcher).includes('pusher_internal:member_removed'), 'member_removed');
    expect(events(watcher).slice(1)).toEqual(['pusher_internal:member_added', 'pusher_internal:member_removed']);
    expect(await h.adapter.presenceUserIds(HARNESS_APP, 'presence-lab')).toEqual(['bob']);
    expect(leaver.state.channels.size).toBe(0);
    expect(events(leaver)).toEqual([]);
  });

  it('does not send a join the socket closed before it left the adapter\'s queue: the others see nothing', async () => {
    const { h, subs } = await start();
    const [watcher, leaver] = [await h.connect(HARNESS_APP), await h.connect(HARNESS_APP)];
    subs.subscribe(watcher.state, 'presence-lab', { userId: 'bob', userInfo: null });
    await until(() => events(watcher).includes('pusher_internal:subscription_succeeded'), 'watcher joined');
    subs.subscribe(leaver.state, 'presence-lab', { userId: 'ada', userInfo: null });
    closeSocket(subs, leaver);
    await until(() => leaver.state.channels.size === 0, 'the withdrawn join forgotten');
    // A later member is the marker that any frame about ada would have arrived by now.
    const marker = await h.connect(HARNESS_APP);
    subs.subscribe(marker.state, 'presence-lab', { userId: 'cy', userInfo: null });
    await until(() => events(watcher).includes('pusher_internal:member_added'), 'cy added');
    expect(events(watcher).slice(1)).toEqual(['pusher_internal:member_added']);
    expect(JSON.parse((JSON.parse(watcher.frames[1]!) as { data: string }).data)).toEqual({ user_id: 'cy', user_info: null });
    expect((await h.adapter.presenceUserIds(HARNESS_APP, 'presence-lab')).sort()).toEqual(['bob', 'cy']);
    expect(events(leaver)).toEqual([]);
  });

  it('re-joins after a leave when the client subscribes again while the leave is in flight', async () => {
    const { h, subs } = await start();
    const a = await h.connect(HARNESS_APP);
    subs.subscribe(a.state, 'room');
    await until(() => events(a).length === 1, 'joined');
    const stalled = stallShardOf(h, 'room', 300);
    subs.unsubscribe(a.state, 'room');
    subs.subscribe(a.state, 'room');
    await stalled;
    await until(() => events(a).length === 2, 'joined again');
    expect(events(a)).toEqual(['pusher_internal:subscription_succeeded', 'pusher_internal:subscription_succeeded']);
    expect(a.state.channels.get('room')).toMatchObject({ wanted: true, joined: true, delivered: true, busy: false });
    expect((await h.adapter.channelInfo(HARNESS_APP, 'room', { subscriptionCount: true })).subscriptionCount).toBe(1);
  });

  it('answers a refused join with subscription_error and forgets the channel', async () => {
    const { h, subs } = await start({ maxPresenceMembers: 1 });
    const [a, b] = [await h.connect(HARNESS_APP), await h.connect(HARNESS_APP)];
    subs.subscribe(a.state, 'presence-full', { userId: 'u1', userInfo: null });
    await until(() => events(a).length === 1, 'a joined');
    subs.subscribe(b.state, 'presence-full', { userId: 'u2', userInfo: null });
    await until(() => events(b).length === 1, 'b answered');
    expect(events(b)).toEqual(['pusher:subscription_error']);
    expect(b.state.channels.size).toBe(0);
    expect(await h.adapter.presenceUserIds(HARNESS_APP, 'presence-full')).toEqual(['u1']);
  });

  it('leaves every channel when the socket closes', async () => {
    const { h, subs } = await start();
    const a = await h.connect(HARNESS_APP);
    for (const channel of ['one', 'two', 'presence-three']) {
      subs.subscribe(a.state, channel, channel.startsWith('presence-') ? { userId: 'u', userInfo: null } : undefined);
    }
    await until(() => events(a).length === 3, 'three joins');
    closeSocket(subs, a);
    await until(() => a.state.channels.size === 0, 'every channel left');
    expect(await h.adapter.listChannels(HARNESS_APP, undefined, false)).toEqual([]);
  });
});
