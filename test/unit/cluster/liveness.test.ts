/**
 * Heartbeats, reaping and re-registration on a real private redis-server: a node that stops
 * heartbeating is reaped by the survivors with each transition reported by exactly one of them,
 * a reaped node that comes back re-registers without ghosts, and a Redis restart (empty) is
 * healed by re-registration, with pub/sub delivery resuming by itself and the leaves of the gap
 * reported once. The nodes are the channel adapter's (ClusterNode): the liveness reaps and
 * re-registers the channel state they record under their sessions.
 */
import { describe, expect, it } from 'vitest';
import type { ChannelTransition } from '../../../src/channels/adapter/redis/channel-state.js';
import { LIVENESS_SCRIPTS } from '../../../src/cluster/liveness-scripts.js';
import { clusterTestBed, SimulatedNode, type SimulatedNodeOptions } from '../../helpers/cluster-nodes.js';
import { sleep, until } from '../../helpers/wait.js';

const bed = clusterTestBed('r');

function makeNode(nodeId: string, prefix: string, extra: Partial<SimulatedNodeOptions> = {}): SimulatedNode {
  // Survivors get a generous timeout so a loaded machine cannot make them look dead; the nodes
  // a test lets die get a short one.
  return bed.node({ nodeId, keyPrefix: prefix, nodeTimeoutMs: 3000, heartbeatIntervalMs: 100, reapIntervalMs: 100, ...extra });
}

function ofType<T extends ChannelTransition['type']>(list: ChannelTransition[], type: T): Extract<ChannelTransition, { type: T }>[] {
  return list.filter((t): t is Extract<ChannelTransition, { type: T }> => t.type === type);
}

describe('NodeLiveness', () => {
  it('reaps a node that stops heartbeating: its members and channels go, each transition reported by one survivor', async () => {
    const prefix = bed.prefix();
    const [a, b, c] = [makeNode('a', prefix), makeNode('b', prefix), makeNode('c', prefix, { nodeTimeoutMs: 400 })];
    await Promise.all([a.start(), b.start(), c.start()]);
    await a.connect('app', 'a.1');
    await c.connect('app', 'c.1');
    await c.connect('app', 'c.2');
    await a.join('app', 'presence-room', 'a.1', { userId: 'alice' });
    await c.join('app', 'presence-room', 'c.1', { userId: 'alice' });
    await c.join('app', 'presence-room', 'c.2', { userId: 'carol' });
    // More channels than one reap batch (100), only on the node that dies.
    for (let i = 0; i < 150; i++) await c.join('app', `solo-${i}`, 'c.1');

    c.node.crash();
    const reported = await until(() => {
        const all = [...a.transitions, ...b.transitions];
        return ofType(all, 'channel_vacated').length >= 150 && ofType(all, 'member_removed').length >= 1 ? all : null;
      }, 'dead node reaped', 20_000);
    // time: a few more reaper passes (every 100 ms): nothing more may come.
    await sleep(300);
    expect(ofType(reported, 'member_removed')).toEqual([{ type: 'member_removed', appId: 'app', channel: 'presence-room', userId: 'carol' }]);
    const vacated = ofType(reported, 'channel_vacated').map((t) => t.channel);
    expect(vacated).toHaveLength(150);
    expect(new Set(vacated).size).toBe(150);
    expect(ofType(reported, 'subscription_count')).toEqual([{ type: 'subscription_count', appId: 'app', channel: 'presence-room', subscriptionCount: 1 }]);
    expect(await b.state.presenceUserIds('app', 'presence-room')).toEqual(['alice']);
    expect(await b.state.connectionCount('app')).toBe(1);
    expect(await b.state.hasSocket('app', 'c.1')).toBe(false);
  });

  it('gives each dead session to exactly one of two racing survivors', async () => {
    const prefix = bed.prefix();
    // Survivors whose timers never fire during the test: the race is driven by hand.
    const slow = { heartbeatIntervalMs: 60_000, reapIntervalMs: 60_000, nodeTimeoutMs: 5_000 };
    const [a, b] = [makeNode('a', prefix, slow), makeNode('b', prefix, slow)];
    await Promise.all([a.start(), b.start()]);
    const dead = [makeNode('d1', prefix, { ...slow, nodeTimeoutMs: 300 }), makeNode('d2', prefix, { ...slow, nodeTimeoutMs: 300 })];
    await Promise.all(dead.map((d) => d.start()));
    for (const [i, d] of dead.entries()) {
      await d.join('app', 'presence-shared', `${d.node.nodeId}.0`, { userId: `user-${i}` });
      for (let k = 0; k < 120; k++) await d.join('app', `ch-${i}-${k}`, `${d.node.nodeId}.0`);
    }
    for (const d of dead) d.node.crash();
    // time: past the dead nodes' 300 ms expiry.
    await sleep(400);
    const counts = await Promise.all([a.node.liveness.reapOnce(), b.node.liveness.reapOnce(), a.node.liveness.reapOnce(), b.node.liveness.reapOnce()]);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(2);

    const reported = [...a.transitions, ...b.transitions];
    const vacated = ofType(reported, 'channel_vacated').map((t) => t.channel);
    expect(vacated.sort()).toEqual([...[0, 1].flatMap((i) => Array.from({ length: 120 }, (_, k) => `ch-${i}-${k}`)), 'presence-shared'].sort());
    expect(ofType(reported, 'member_removed').map((t) => t.userId).sort()).toEqual(['user-0', 'user-1']);
    expect(await a.state.listChannels('app', undefined, false)).toEqual([]);
  });

  it('lets another survivor take over a reap whose claimant died', async () => {
    const prefix = bed.prefix();
    const a = makeNode('a', prefix, { reapIntervalMs: 60_000 });
    const d = makeNode('d', prefix, { nodeTimeoutMs: 400 });
    await Promise.all([a.start(), d.start()]);
    await d.join('app', 'orphan', 'd.1');
    d.node.crash();
    // time: past the dead node's 300 ms expiry.
    await sleep(500);
    // A claimant that claims and then dies before reaping anything.
    const client = bed.redis.client();
    LIVENESS_SCRIPTS.define(client);
    expect(await LIVENESS_SCRIPTS.run<string[]>(client, 'heraldClaimDead', [prefix, 'ghost.claimant', 400, 16])).toEqual([d.node.session.current]);
    await client.quit();
    expect(await a.node.liveness.reapOnce()).toBe(0); // claim still live
    // time: past the claim's 400 ms expiry.
    await sleep(500);
    expect(await a.node.liveness.reapOnce()).toBe(1);
    expect(a.transitions).toEqual([{ type: 'channel_vacated', appId: 'app', channel: 'orphan' }]);
  });

  it('a reaped node that comes back re-registers what it holds, leaving no ghosts', async () => {
    const prefix = bed.prefix();
    const a = makeNode('a', prefix);
    // A node that stalls: it never heartbeats on its own during the test.
    const z = makeNode('z', prefix, { nodeTimeoutMs: 400, heartbeatIntervalMs: 60_000, reapIntervalMs: 60_000 });
    await Promise.all([a.start(), z.start()]);
    await z.connect('app', 'z.1');
    await z.connect('app', 'z.2');
    await z.join('app', 'presence-p', 'z.1', { userId: 'zed' });
    await z.join('app', 'presence-p', 'z.2', { userId: 'zoe' });
    await until(() => ofType(a.transitions, 'channel_vacated').length === 1, 'stalled node reaped', 10_000);
    // While it was out, one of its sockets left (locally only: its leave found nothing to remove).
    await z.leave('app', 'presence-p', 'z.2');
    z.sockets.delete('z.2');
    // Its next heartbeat finds the session gone: it re-registers under a new session.
    await z.node.liveness.heartbeat();
    await until(() => z.node.liveness.available, 're-registration', 10_000);
    expect(await a.state.presenceUserIds('app', 'presence-p')).toEqual(['zed']);
    expect(await a.state.channelInfo('app', 'presence-p')).toMatchObject({ occupied: true, subscriptionCount: 1, userCount: 1 });
    expect(await a.state.connectionCount('app')).toBe(1);
    expect(z.transitions).toEqual(
      expect.arrayContaining([
        { type: 'channel_occupied', appId: 'app', channel: 'presence-p' },
        { type: 'member_added', appId: 'app', channel: 'presence-p', userId: 'zed', userInfo: null },
      ]),
    );
    // A later leave under the new session removes it for good.
    await z.leave('app', 'presence-p', 'z.1');
    expect((await a.state.channelInfo('app', 'presence-p')).occupied).toBe(false);
  });

  it('a join under a reaped session is refused and makes the node re-register', async () => {
    const prefix = bed.prefix();
    const a = makeNode('a', prefix);
    const z = makeNode('z', prefix, { nodeTimeoutMs: 400, heartbeatIntervalMs: 60_000, reapIntervalMs: 60_000 });
    await Promise.all([a.start(), z.start()]);
    await z.join('app', 'held', 'z.1');
    await until(() => ofType(a.transitions, 'channel_vacated').length === 1, 'stalled node reaped', 10_000);
    await expect(z.state.join('app', 'late', 'z.2')).rejects.toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
    await until(async () => z.node.liveness.available && (await a.state.channelInfo('app', 'held')).occupied, 're-registration', 10_000);
    expect((await a.state.channelInfo('app', 'late')).occupied).toBe(false);
    expect((await z.state.join('app', 'late', 'z.2')).occupied).toBe(true);
  });

  it('a join in flight while the node re-registers ends up recorded under the new session', async () => {
    const prefix = bed.prefix();
    const z = makeNode('z', prefix);
    await z.start();
    await z.join('app', 'steady', 'z.0');
    // The join is sent under the current session; the re-registration switches sessions in the
    // same turn, before the join's answer (and before the node records it as held).
    const joining = z.join('app', 'inflight', 'z.1');
    const reregistering = z.node.liveness.reregister();
    const [joined] = await Promise.all([joining, reregistering]);
    expect(joined.occupied).toBe(true);
    expect(await z.state.channelInfo('app', 'inflight')).toMatchObject({ occupied: true, subscriptionCount: 1 });
    expect(await z.state.channelInfo('app', 'steady')).toMatchObject({ occupied: true, subscriptionCount: 1 });
    expect(ofType(z.transitions, 'channel_vacated')).toEqual([]);
    // And it is really under the live session: leaving it vacates the channel.
    expect((await z.leave('app', 'inflight', 'z.1')).vacated).toBe(true);
  });

  it('survives a Redis restart: reconnects, re-registers, and pub/sub delivery resumes', async () => {
    const prefix = bed.prefix();
    const a = makeNode('a', prefix);
    const b = makeNode('b', prefix);
    await Promise.all([a.start(), b.start()]);
    await a.connect('app', 'a.1');
    await b.connect('app', 'b.1');
    await b.connect('app', 'b.2');
    await a.join('app', 'presence-room', 'a.1', { userId: 'alice' });
    await b.join('app', 'presence-room', 'b.1', { userId: 'bob' });
    await b.join('app', 'presence-room', 'b.2', { userId: 'bea' });
    await b.join('app', 'news', 'b.1');
    await until(async () => (await a.node.bus.publish('app', 'news', 'before')) === 1, 'b listening on news', 10_000);
    await until(() => b.frames.length === 1, 'frame before the outage', 10_000);

    await bed.redis.kill();
    await until(() => !a.node.liveness.available && !b.node.liveness.available, 'nodes notice the outage', 10_000);
    await expect(a.state.join('app', 'news', 'a.2')).rejects.toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
    await expect(a.node.bus.publish('app', 'news', 'lost')).rejects.toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
    // During the outage bea's connection closes on b (only b knows).
    b.subscriptions.delete('b.2\0app\0presence-room');
    b.sockets.delete('b.2');

    await bed.redis.start(); // same port, empty
    await until(() => a.node.liveness.available && b.node.liveness.available, 're-registration after the restart', 20_000);
    // bea left while Redis was away and Redis lost her: b records her again under its previous
    // session, whose reap (once every node had time to re-register) reports her leaving, once.
    const removed = await until(() => {
      const all = ofType([...a.transitions, ...b.transitions], 'member_removed');
      return all.length > 0 ? all : null;
    }, "bea's leave reported", 20_000);
    // time: a few more reaper passes (every 100 ms): nothing more may come.
    await sleep(300);
    expect(ofType([...a.transitions, ...b.transitions], 'member_removed')).toEqual(removed);
    expect(removed).toEqual([{ type: 'member_removed', appId: 'app', channel: 'presence-room', userId: 'bea' }]);
    expect((await a.state.presenceUserIds('app', 'presence-room')).sort()).toEqual(['alice', 'bob']);
    expect(await a.state.channelInfo('app', 'presence-room')).toMatchObject({ occupied: true, subscriptionCount: 2, userCount: 2 });
    expect(await b.state.connectionCount('app')).toBe(2);
    expect(await a.state.listChannels('app', undefined, false)).toEqual([
      { channel: 'news', userCount: 0 },
      { channel: 'presence-room', userCount: 0 },
    ]);
    // The empty Redis lost everything: re-registration reports each channel occupied once.
    const occupied = ofType([...a.transitions, ...b.transitions], 'channel_occupied').map((t) => t.channel);
    expect(occupied.sort()).toEqual(['news', 'presence-room']);

    // Delivery resumes: b re-subscribed to news by itself.
    await until(async () => (await a.node.bus.publish('app', 'news', 'after')) === 1, 'b listening again', 20_000);
    await until(() => b.frames.some((f) => f.frame === 'after'), 'frame after the restart', 10_000);
    expect(b.frames.map((f) => f.frame)).not.toContain('lost');
  });
  it('reaps nobody for a timeout after Redis stalls: a node whose connection survived the stall does not reap the sessions that expired meanwhile', async () => {
    const prefix = bed.prefix();
    // The stall is longer than the timeout, so every session's expiry passes while Redis is
    // stopped. Node A gives up its command connection during it (as its reply watchdog does when
    // a command waits too long) and reconnects; node B keeps its own, so the heartbeat and the
    // reaper claim B sent meanwhile run the moment Redis goes on, before A can register again.
    const [a, b] = [bed.node({ nodeId: 'a', keyPrefix: prefix, nodeTimeoutMs: 1000 }), bed.node({ nodeId: 'b', keyPrefix: prefix, nodeTimeoutMs: 1000 })];
    await Promise.all([a.start(), b.start()]);
    await a.connect('app', 'a.1');
    await b.connect('app', 'b.1');
    await a.join('app', 'presence-stall', 'a.1', { userId: 'alice' });
    await b.join('app', 'presence-stall', 'b.1', { userId: 'bob' });
    const dropped = new Promise((resolve) => a.node.commands.once('close', resolve));
    bed.redis.pause();
    try {
      a.node.commands.stream.destroy(new Error('Redis did not answer'));
      await dropped;
      // time: the stall itself, past the sessions' expiry.
      await sleep(1500);
    } finally {
      bed.redis.resume();
    }
    await until(() => a.node.liveness.available && b.node.liveness.available, 'both nodes available after the stall', 10_000);
    // time: two timeouts of reaper passes (every half timeout) after the stall.
    await sleep(2000);
    const reported = [...a.transitions, ...b.transitions];
    expect([...ofType(reported, 'member_removed'), ...ofType(reported, 'channel_vacated')]).toEqual([]);
    expect(await b.state.presenceUserIds('app', 'presence-stall')).toEqual(['alice', 'bob']);
    // The hold ends: a node that dies after it is reaped as always.
    a.node.crash();
    await until(() => ofType(b.transitions, 'member_removed').length === 1, 'the dead node reaped', 10_000);
    expect(await b.state.presenceUserIds('app', 'presence-stall')).toEqual(['bob']);
  });
});
