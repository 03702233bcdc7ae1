/**
 * A cluster node served by two front-end threads (issue 36): real Herald processes sharing a
 * private redis-server, each running `frontEndThreads: 2`, pusher-js clients placed on each
 * thread of node A (the socket id names its thread; the per-thread metric proves it) and one on
 * node B. Frames cross nodes and threads once, never back to the sender; presence counts every
 * thread's members; the node keeps one subscriber connection and one pub/sub subscription per
 * channel, whatever its threads.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool, type ChannelClient, type ChannelRecord } from '../helpers/channel-clients.js';
import { deliveryResumes, heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { flushedBy, until } from '../helpers/wait.js';
import { threadOf } from '../../src/channels/socket-id.js';

const APP = { id: 'ft-app', key: 'ft-key', secret: 'ft-secret', clientEvents: true, userAuthentication: true };
const bed = heraldClusterBed('front-end-threads');
const pool = new ClientPool(APP);

afterEach(() => pool.disconnectAll());

/** Open connections per front-end thread of `node` (herald_front_end_connections). */
async function perThread(node: HeraldProcess): Promise<[number, number]> {
  const m = parsePrometheus(await (await fetch(`${node.baseUrl}/metrics`)).text());
  return [series(m, 'herald_front_end_connections', { thread: '0' }), series(m, 'herald_front_end_connections', { thread: '1' })];
}

/** Redis connections of `nodeId` subscribed to anything (CLIENT LIST: a `sub` or `psub` count above 0). */
function subscriberConnections(list: string, nodeId: string): string[] {
  return list.split('\n').filter((line) => new RegExp(` name=herald-${nodeId}\\S* `).test(line) && /\b(?:sub|psub)=[1-9]/.test(line));
}

// About a cluster node's Redis connections and outages: no single-process stand-in has them.
describe.skipIf(ONE_PROCESS)('a cluster node with two front-end threads', () => {
  it('delivers across nodes and threads once, without echo, counts presence on every thread, and keeps one subscriber connection', async () => {
    const cluster = await bed.start({ apps: [APP], config: { frontEndThreads: 2 } });
    const alice = await pool.connectOnThread(cluster.a, 0, { userId: 'alice' });
    const carl = await pool.connectOnThread(cluster.a, 1, { userId: 'carl' });
    const bob = await pool.connect(cluster.b, { userId: 'bob' });
    expect([threadOf(alice.socketId), threadOf(carl.socketId)]).toEqual([0, 1]);
    await until(async () => (await perThread(cluster.a)).join() === '1,1', 'one connection on each thread of node A');

    // Presence: the members of both threads of node A and of node B, on every client.
    const presence = new Map<ChannelClient, ChannelRecord>();
    for (const c of [alice, carl, bob]) presence.set(c, await c.subscribe('presence-room'));
    await until(() => [alice, carl, bob].every((c) => presence.get(c)!.memberIds().join() === 'alice,bob,carl'), 'three members everywhere');

    // A trigger through node B reaches both threads of node A once; one through node A with
    // socket_id leaves out that socket only, on whichever thread it is.
    await pool.sdk(cluster.b).trigger('presence-room', 'news', { n: 1 });
    await pool.sdk(cluster.a).trigger('presence-room', 'news', { n: 2 }, { socket_id: alice.socketId });
    // A client event from thread 1 of node A: to thread 0 and node B, not back to its sender.
    // It travels on thread 1's own Redis connection, the triggers on another, so nothing orders
    // it against them: the markers below go out once it has arrived, and then flush any echo.
    presence.get(carl)!.channel.trigger('client-wave', 'hi');
    await until(() => [alice, bob].every((c) => presence.get(c)!.data('client-wave').length > 0), 'the client event on thread 0 of node A and on node B');
    await flushedBy(
      () => Promise.all([pool.sdk(cluster.a).trigger('presence-room', 'marker', 'A'), pool.sdk(cluster.b).trigger('presence-room', 'marker', 'B')]),
      () => [alice, carl, bob].every((c) => presence.get(c)!.data('marker').length === 2),
      'the markers on every client',
    );
    expect(presence.get(alice)!.data('news')).toEqual([{ n: 1 }]);
    expect(presence.get(carl)!.data('news')).toEqual([{ n: 1 }, { n: 2 }]);
    expect(presence.get(bob)!.data('news')).toEqual([{ n: 1 }, { n: 2 }]);
    expect(presence.get(alice)!.data('client-wave')).toEqual(['hi']);
    expect(presence.get(bob)!.data('client-wave')).toEqual(['hi']);
    expect(presence.get(carl)!.data('client-wave')).toEqual([]);

    // One pub/sub subscription per node on the channel (two nodes, three sockets), and one
    // subscriber connection per node, whatever its threads.
    const redis = bed.redis.client();
    try {
      const topic = `${cluster.keyPrefix}msg:${APP.id}:presence-room`;
      const [, listeners] = (await redis.pubsub('NUMSUB', topic)) as [string, number];
      expect(Number(listeners)).toBe(2);
      const list = (await redis.client('LIST')) as string;
      expect(subscriberConnections(list, 'node-a'), list).toHaveLength(1);
      expect(subscriberConnections(list, 'node-b'), list).toHaveLength(1);
    } finally {
      redis.disconnect();
    }

    // The member on thread 1 leaves: every client sees it once; the channel keeps the others.
    carl.disconnect();
    await until(() => [alice, bob].every((c) => presence.get(c)!.memberIds().join() === 'alice,bob'), 'carl removed everywhere');
  });

  it('during a Redis outage a client event still reaches the other thread of its node, counted as a relay failure; after it, every thread re-registers its members and delivery across nodes resumes', async () => {
    const cluster = await bed.start({ apps: [APP], config: { frontEndThreads: 2 } });
    const onA0 = await pool.connectOnThread(cluster.a, 0, { userId: 'o0' });
    const onA1 = await pool.connectOnThread(cluster.a, 1, { userId: 'o1' });
    const onB = await pool.connect(cluster.b, { userId: 'ob' });
    const [r0, r1, rB] = [await onA0.subscribe('private-outage'), await onA1.subscribe('private-outage'), await onB.subscribe('private-outage')];
    for (const c of [onA0, onA1, onB]) await c.subscribe('presence-outage');
    const failures = async (): Promise<number> => series(parsePrometheus(await (await fetch(`${cluster.a.baseUrl}/metrics`)).text()), 'herald_cluster_relay_failures_total');
    const before = await failures();

    await cluster.killRedis();
    // Once node A has noticed the outage, a client event from thread 1 cannot be relayed, yet thread 0 gets it.
    await until(async () => {
      r1.channel.trigger('client-ping', 'during');
      return r0.data('client-ping').length > 0;
    }, 'the client event on the other thread of node A during the outage');
    expect(await failures()).toBeGreaterThan(before);
    expect(r1.data('client-ping')).toEqual([]);

    await cluster.restartRedis();
    // Both ways, to both threads of node A (each node listens again a moment after Redis is back).
    await deliveryResumes(pool.sdk(cluster.a), 'private-outage', rB, 'after-a');
    await deliveryResumes(pool.sdk(cluster.b), 'private-outage', r0, 'after-b');
    await until(() => r1.data('after-b').length > 0, 'the events through node B on thread 1 of node A too');
    // Redis came back empty: node A recorded again the members of both its threads.
    const users = await until(async () => {
      const res = await pool.sdk(cluster.b).get({ path: '/channels/presence-outage/users' }).catch(() => null);
      if (!res) return null;
      const ids = ((await res.json()) as { users: { id: string }[] }).users.map((u) => u.id).sort();
      return ids.length === 3 && ids;
    }, 'the members of both threads of node A and of node B listed through node B', 20_000);
    expect(users).toEqual(['o0', 'o1', 'ob']);
  }, 60_000);

  it('stopped gracefully, a node tells the others at once that the members on each of its threads left', async () => {
    const cluster = await bed.start({ apps: [APP], config: { frontEndThreads: 2 }, nodeTimeoutMs: 30_000 });
    const watcher = await pool.connect(cluster.b, { userId: 'watcher' });
    const room = await watcher.subscribe('presence-stop');
    const on0 = await pool.connectOnThread(cluster.a, 0, { userId: 's0' });
    const on1 = await pool.connectOnThread(cluster.a, 1, { userId: 's1' });
    for (const c of [on0, on1]) await c.subscribe('presence-stop');
    await until(() => room.memberIds().join() === 's0,s1,watcher', 'both members of node A seen on node B');
    await cluster.a.stop('SIGTERM');
    on0.disconnect();
    on1.disconnect();
    // Long before nodeTimeoutMs: the leaves of both threads, not a reap.
    await until(() => room.memberIds().join() === 'watcher', 'both members removed on node B', 8000);
  });

  it('closes a user’s connections on both threads and on the other node (terminate_connections)', async () => {
    const cluster = await bed.start({ apps: [APP], config: { frontEndThreads: 2 } });
    const dana0 = await pool.connectOnThread(cluster.a, 0, { userId: 'dana' });
    const dana1 = await pool.connectOnThread(cluster.a, 1, { userId: 'dana' });
    const danaB = await pool.connect(cluster.b, { userId: 'dana' });
    const other = await pool.connectOnThread(cluster.a, 1, { userId: 'eve' });
    for (const c of [dana0, dana1, danaB]) await c.signIn();
    await other.signIn();
    await pool.sdk(cluster.b).terminateUserConnections('dana');
    await until(() => [dana0, dana1, danaB].every((c) => c.state !== 'connected'), "dana's connections closed");
    expect(other.state).toBe('connected');
  });
});
