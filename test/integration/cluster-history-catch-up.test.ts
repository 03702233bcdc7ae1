/**
 * A node whose Redis subscriber connection alone drops (its command connection and its
 * sockets stay up) catches its history channels up once it listens again: a pusher-js client
 * with the recovery plugin on that node, never disconnected, gets the events published through
 * the other node meanwhile once, in order, then live ones, also under a steady publish rate;
 * and `herald:recovery_failed` when the history no longer reaches back; the catch-up leaves out
 * the sender of a client event and the socket a trigger's socket_id names, as live delivery
 * does. Two real nodes over a private redis-server; node A is paused (SIGSTOP) while its
 * subscriber connection is killed and node B publishes, so that the events surely fall in the gap.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { withRecovery } from '../../src/client/recovery.js';
import { ClientPool } from '../helpers/channel-clients.js';
import { numbered, record } from '../helpers/channel-record.js';
import { heraldClusterBed, ONE_PROCESS, type HeraldCluster } from '../helpers/herald-cluster.js';
import { channelsSdk, pusherJsClient, type PusherJsClient } from '../helpers/sdk-clients.js';
import { flushedBy, sleep, until } from '../helpers/wait.js';

const APP = { id: 'gap-app', key: 'gap-key', secret: 'gap-secret' };
const SMALL = { id: 'gap-small', key: 'gap-small-key', secret: 'gap-small-secret' };
const APPS = [
  { ...APP, clientEvents: true, history: { channels: ['history-*', 'private-history-*'], maxEvents: 1000, ttlSeconds: 300 } },
  { ...SMALL, history: { channels: ['history-*'], maxEvents: 3, ttlSeconds: 300 } },
];

const bed = heraldClusterBed('cgap');
const clients: PusherJsClient[] = [];

afterEach(() => {
  for (const c of clients.splice(0)) c.disconnect();
});

/** A recovering pusher-js client on node A subscribed to `name`, with what it sees. */
async function subscriberOnA(cluster: HeraldCluster, key: string, name: string): Promise<{ pusher: PusherJsClient; seen: [string, unknown][] }> {
  const pusher = withRecovery(pusherJsClient(cluster.a.port, key));
  clients.push(pusher);
  const channel = pusher.subscribe(name);
  const seen = record(channel);
  await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription on node A');
  return { pusher, seen };
}

/**
 * Kills node A's subscriber connection (named herald-node-a-sub, connection.ts) while A is
 * paused, runs `meanwhile`, and resumes A: A notices the drop only then, and reconnects.
 */
async function dropSubscriberOfA(cluster: HeraldCluster, meanwhile: () => Promise<void>): Promise<void> {
  const redis = cluster.redis.client();
  try {
    cluster.a.signal('SIGSTOP');
    const list = (await redis.client('LIST')) as string;
    const subscriber = list.split('\n').find((line) => line.includes(' name=herald-node-a-sub '));
    expect(subscriber, list).toBeDefined();
    await redis.client('KILL', 'ID', /\bid=(\d+)/.exec(subscriber!)![1]!);
    await meanwhile();
  } finally {
    cluster.a.signal('SIGCONT');
    redis.disconnect();
  }
}

describe.skipIf(ONE_PROCESS)("history channels when a node's subscriber connection drops", () => {
  it('delivers the events published meanwhile once, in order, then live ones, the socket staying connected', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaA = channelsSdk(cluster.a.port, APP);
    const viaB = channelsSdk(cluster.b.port, APP);
    const { pusher, seen } = await subscriberOnA(cluster, APP.key, 'history-gap');
    const socketId = pusher.connection.socket_id;
    for (let i = 0; i < 3; i++) await viaB.trigger('history-gap', 'n', i);
    await until(() => numbered(seen).length === 3, 'the first 3 events');

    await dropSubscriberOfA(cluster, async () => {
      for (let i = 3; i < 10; i++) expect((await viaB.trigger('history-gap', 'n', i)).status).toBe(200);
    });
    // Published while A reconnects and catches up (A answers 503 until it listens again), then through both.
    for (let i = 10; i < 15; i++) expect((await viaB.trigger('history-gap', 'n', i)).status).toBe(200);
    await until(() => numbered(seen).length >= 15, () => `15 events, got ${JSON.stringify(numbered(seen))}`, 20_000);
    for (let i = 15; i < 20; i++) expect((await (i % 2 === 0 ? viaA : viaB).trigger('history-gap', 'n', i)).status).toBe(200);
    await until(() => numbered(seen).length >= 20, () => `20 events, got ${JSON.stringify(numbered(seen))}`, 20_000);

    expect(numbered(seen)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(seen.filter(([e]) => e !== 'n')).toEqual([]);
    // The node caught up, not the client: it never reconnected.
    expect(pusher.connection.socket_id).toBe(socketId);
    expect(pusher.connection.state).toBe('connected');
  }, 60_000);

  it('holds live events while it catches up under a steady publish rate: every event once, in order', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaB = channelsSdk(cluster.b.port, APP);
    const { seen } = await subscriberOnA(cluster, APP.key, 'history-steady');
    let sent = 0;
    let publishing = true;
    // One publisher: each trigger is answered before the next, so the order is known.
    const publisher = (async () => {
      while (publishing) {
        expect((await viaB.trigger('history-steady', 'n', sent)).status).toBe(200);
        sent++;
        // Unpaced, a quiet machine can publish over a thousand a second and evict the gap before
        // the client is back (herald:recovery_failed, rightly).
        // time: at most 50 events a second, so that the 1,000 kept events reach over the reconnect.
        await sleep(20);
      }
    })();
    await until(() => numbered(seen).length >= 10, 'events before the drop');
    await dropSubscriberOfA(cluster, async () => {
      const droppedAt = sent;
      await until(() => sent >= droppedAt + 10, 'events while A is cut off');
    });
    const resumedAt = sent;
    // Node A reconnects and catches up while these are published.
    await until(() => sent >= resumedAt + 40, 'events after A resumed');
    publishing = false;
    await publisher;
    await until(() => numbered(seen).length >= sent, () => `${sent} events, got ${numbered(seen).length}`, 20_000);
    expect(numbered(seen)).toEqual(Array.from({ length: sent }, (_, i) => i));
    expect(seen.filter(([e]) => e !== 'n')).toEqual([]);
  }, 60_000);

  it("leaves a client event's sender and a trigger's socket_id out of the catch-up, each other subscriber getting the event once", async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaB = channelsSdk(cluster.b.port, APP);
    const pool = new ClientPool(APP);
    try {
      const [sender, alsoOnA, onB] = await Promise.all([pool.connect(cluster.a), pool.connect(cluster.a), pool.connect(cluster.b)]);
      const channel = 'private-history-echo';
      const [fromSender, seenA, seenB] = await Promise.all([sender.subscribe(channel), alsoOnA.subscribe(channel), onB.subscribe(channel)]);
      const all = [fromSender, seenA, seenB];
      const socketIds = [sender.socketId, alsoOnA.socketId];
      await flushedBy(() => viaB.trigger(channel, 'n', 0), () => all.every((r) => r.data('n').length === 1), 'the first event on all three');

      await dropSubscriberOfA(cluster, async () => {
        // Node A, paused, reads it once it resumes, before its subscriber connection is back:
        // kept while A hears nothing, it comes to A's sockets through the catch-up.
        fromSender.channel.trigger('client-said', { n: 1 });
        expect((await viaB.trigger(channel, 'n', 1, { socket_id: alsoOnA.socketId })).status).toBe(200);
      });
      // Kept by then: the marker after it comes after it on every node.
      await until(() => seenB.data('client-said').length === 1, 'the client event on node B', 20_000);
      await flushedBy(() => viaB.trigger(channel, 'end', 0), () => all.every((r) => r.data('end').length === 1), 'a later event on all three', 20_000);

      expect(fromSender.data('client-said')).toEqual([]);
      expect(fromSender.data('n')).toEqual([0, 1]);
      expect(seenA.data('client-said')).toEqual([{ n: 1 }]);
      expect(seenA.data('n')).toEqual([0]);
      expect(seenB.data('client-said')).toEqual([{ n: 1 }]);
      expect(seenB.data('n')).toEqual([0, 1]);
      // The node caught up, not the clients: they never reconnected.
      expect([sender.socketId, alsoOnA.socketId]).toEqual(socketIds);
    } finally {
      pool.disconnectAll();
    }
  }, 60_000);

  it('sends herald:recovery_failed when the history no longer reaches back, then goes on live', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaB = channelsSdk(cluster.b.port, SMALL);
    const { pusher, seen } = await subscriberOnA(cluster, SMALL.key, 'history-short');
    const socketId = pusher.connection.socket_id;
    await viaB.trigger('history-short', 'n', 0);
    await until(() => numbered(seen).length === 1, 'the first event');

    // maxEvents is 3: of these 5, the first 2 are evicted.
    await dropSubscriberOfA(cluster, async () => {
      for (let i = 1; i < 6; i++) expect((await viaB.trigger('history-short', 'n', i)).status).toBe(200);
    });
    await until(() => seen.some(([e]) => e === 'herald:recovery_failed'), 'herald:recovery_failed', 20_000);
    await viaB.trigger('history-short', 'n', 6);
    await until(() => numbered(seen).includes(6), 'the live event');
    expect(seen).toEqual([['n', 0], ['herald:recovery_failed', { reason: 'history_evicted' }], ['n', 6]]);
    expect(pusher.connection.socket_id).toBe(socketId);
  }, 60_000);
});
