/**
 * Batched state changes (state-batch.ts) on a real private redis-server: a storm of connects,
 * joins, leaves and disconnects goes out as a few script calls (Redis' own `INFO commandstats`
 * counts them), with at most MAX_BATCHES_IN_FLIGHT waiting for Redis, and every caller still gets
 * its own outcome, transitions decided once (member_added / member_removed for two sockets of
 * one user in the same batch, webhooks once).
 */
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisChannelAdapter } from '../../../../../src/channels/adapter/redis/redis-adapter.js';
import { Cluster } from '../../../../../src/cluster/cluster.js';
import { MAX_BATCH_OPS, MAX_BATCHES_IN_FLIGHT } from '../../../../../src/channels/adapter/redis/state-batch.js';
import { parseConfig } from '../../../../../src/config/load.js';
import { clusterTestBed, type SimulatedNode } from '../../../../helpers/cluster-nodes.js';
import { startAdapterHarness } from '../../../../helpers/local-channel-adapter.js';
import { flushedBy, sleep, until } from '../../../../helpers/wait.js';
import { WebhookReceiver } from '../../../../helpers/webhook-receiver.js';

const bed = clusterTestBed('b');

/** A started node whose heartbeat and reaper stay quiet during the test (they are script calls too). */
async function quietNode(nodeId: string, keyPrefix = bed.prefix()): Promise<SimulatedNode> {
  return bed.node({ nodeId, keyPrefix, heartbeatIntervalMs: 60_000, reapIntervalMs: 60_000 }).start();
}

/** Script calls Redis ran since the last `CONFIG RESETSTAT` (EVALSHA, and EVAL when a script was not loaded yet). */
async function scriptCalls(client: Redis): Promise<number> {
  const info = await client.info('commandstats');
  let calls = 0;
  for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
  return calls;
}

/** Commands the node's connection has sent and not had answered yet (ioredis' own queue). */
function awaitingReply(node: SimulatedNode): number {
  return (node.node.connections.commands as unknown as { commandQueue: { length: number } }).commandQueue.length;
}

/**
 * Holds Redis for `ms` (CLIENT PAUSE ALL): commands sent meanwhile wait for it. Resolves once
 * Redis has paused, with `over`, which resolves once a command sent after the pause is answered,
 * i.e. when the pause is over. (A script spinning on TIME cannot do this: from Redis 8 on, TIME
 * stays the same for the whole script.)
 */
async function holdRedis(client: Redis, ms: number): Promise<{ over: Promise<unknown> }> {
  await client.call('CLIENT', 'PAUSE', String(ms), 'ALL');
  return { over: client.ping() };
}

describe('batched state changes', () => {
  it('sends a storm of changes as a few script calls, at most MAX_BATCHES_IN_FLIGHT waiting for Redis, each with its own outcome', async () => {
    const node = await quietNode('storm');
    const client = bed.redis.client();
    const blocker = bed.redis.client();
    try {
      await node.connect('app', 'warm.up'); // loads the batch script on the node's connection
      const n = 3 * MAX_BATCH_OPS + 17;
      const ids = Array.from({ length: n }, (_, i) => `1.${i}`);
      await client.config('RESETSTAT');

      // Redis is busy while the storm is asked for: what the node sends waits for it.
      const held = await holdRedis(blocker, 400);
      const connects = ids.map((id) => node.state.connect('app', id, null));
      const joins = ids.map((id) => node.state.join('app', 'storm', id));
      // time: the node sends what it may while Redis is held.
      await sleep(100);
      expect(awaitingReply(node)).toBeLessThanOrEqual(MAX_BATCHES_IN_FLIGHT);
      await held.over;

      const joined = await Promise.all(joins);
      expect((await Promise.all(connects)).every((c) => c.accepted)).toBe(true);
      // Applied in the order asked: each join saw the ones before it.
      expect(joined.map((j) => j.subscriptionCount)).toEqual(ids.map((_, i) => i + 1));
      expect(joined.filter((j) => j.occupied).length).toBe(1);
      expect(joined[0]!.occupied).toBe(true);
      expect(joined.every((j) => j.changed)).toBe(true);
      expect(await node.state.connectionCount('app')).toBe(n + 1);

      const left = await Promise.all(ids.map((id) => node.state.leave('app', 'storm', id)));
      await Promise.all(ids.map((id) => node.state.disconnect('app', id)));
      expect(left.map((l) => l.subscriptionCount)).toEqual(ids.map((_, i) => n - 1 - i));
      expect(left.filter((l) => l.vacated).length).toBe(1);
      expect(left[n - 1]!.vacated).toBe(true);
      expect(await node.state.connectionCount('app')).toBe(1);

      // 4n changes (one script call each, unbatched), in ceil(n / MAX_BATCH_OPS) calls per kind,
      // plus the few reads above and the spinning script.
      const calls = await scriptCalls(client);
      expect(calls).toBeLessThanOrEqual(4 * Math.ceil(n / MAX_BATCH_OPS) + 4);
      expect(calls).toBeGreaterThan(0);
    } finally {
      await Promise.all([client.quit(), blocker.quit()]);
    }
  });

  it('decides member_added and member_removed once for two sockets of one user in one batch', async () => {
    const node = await quietNode('presence');
    const alice = { userId: 'alice', userInfo: { name: 'Alice' } };
    // One turn, so one batch: both of alice's sockets, bob's, and a repeated join.
    const joined = await Promise.all([
      node.state.join('app', 'presence-batch', 'a.1', alice),
      node.state.join('app', 'presence-batch', 'a.2', alice),
      node.state.join('app', 'presence-batch', 'b.1', { userId: 'bob' }),
      node.state.join('app', 'presence-batch', 'a.1', alice),
    ]);
    expect(joined.map((j) => [j.changed, j.occupied, j.memberAdded, j.subscriptionCount])).toEqual([
      [true, true, true, 1],
      [true, false, false, 2],
      [true, false, true, 3],
      [false, false, false, 3],
    ]);
    expect(joined[0]!.members).toEqual([['alice', { name: 'Alice' }]]);
    expect(new Map(joined[2]!.members)).toEqual(new Map<string, unknown>([['alice', { name: 'Alice' }], ['bob', null]]));

    const left = await Promise.all([
      node.state.leave('app', 'presence-batch', 'a.1'),
      node.state.leave('app', 'presence-batch', 'b.1'),
      node.state.leave('app', 'presence-batch', 'a.2'),
      node.state.leave('app', 'presence-batch', 'a.2'),
    ]);
    expect(left).toEqual([
      { changed: true, vacated: false, memberRemoved: null, subscriptionCount: 2 },
      { changed: true, vacated: false, memberRemoved: 'bob', subscriptionCount: 1 },
      { changed: true, vacated: true, memberRemoved: 'alice', subscriptionCount: 0 },
      { changed: false, vacated: false, memberRemoved: null, subscriptionCount: 0 },
    ]);
  });

  it('fails every change of a batch at once while Redis is away, and applies them once it is back', async () => {
    const node = await quietNode('outage');
    await node.connect('app', 'warm.up');
    const session = node.node.session.current;
    node.node.connections.commands.disconnect(true); // drops the connection; it reconnects
    const outcomes = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => node.state.join('app', 'outage', `9.${i}`)));
    expect(outcomes.every((o) => o.status === 'rejected' && (o.reason as Error).name === 'RedisUnavailableError')).toBe(true);
    await until(() => node.node.session.current !== session && node.node.liveness.available, 'node registered again');
    const again = await Promise.all(Array.from({ length: 10 }, (_, i) => node.state.join('app', 'outage', `9.${i}`)));
    expect(again.map((j) => j.subscriptionCount)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
  });
});

describe('batched state changes through the Redis adapter', () => {
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it('sends the webhooks of one batch once: member_added, member_removed, occupied and vacated', async () => {
    const prefix = bed.prefix();
    const h = await startAdapterHarness(
      async ({ topics, shards, registry, config }) => {
        const cluster = parseConfig({ cluster: { redisUrl: bed.redis.url, keyPrefix: prefix, nodeTimeoutMs: 60_000 } }).cluster!;
        const apps = new Map(config.apps.map((a) => [a.id, a]));
        const noDebounce = { ...config, webhookDelivery: { ...config.webhookDelivery, pageReloadDebounceMs: 0 } };
        return RedisChannelAdapter.start({ topics, registry, shards, cluster: new Cluster(cluster, { nodeId: 'batch-webhooks' }), subscriptionWaitMs: cluster.subscriptionWaitMs, config: () => noDebounce, apps });
      },
      { webhooks: [{ url: receiver.url('/batch'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }] },
    );
    const client = bed.redis.client();
    try {
      const app = 'contract-app';
      const [a1, a2, b] = [await h.connect(app), await h.connect(app), await h.connect(app)];
      await client.config('RESETSTAT');
      const resetAt = Date.now();
      const ada = { userId: 'ada', userInfo: { name: 'Ada' } };
      const channel = 'presence-batch';
      const joined = await Promise.all([
        h.adapter.subscribe({ appId: app, channel, socketId: a1.socketId, member: ada }),
        h.adapter.subscribe({ appId: app, channel, socketId: a2.socketId, member: ada }),
        h.adapter.subscribe({ appId: app, channel, socketId: b.socketId, member: { userId: 'bob' } }),
      ]);
      expect(joined.map((j) => [j.occupied, j.memberAdded])).toEqual([[true, true], [false, false], [false, true]]);
      const left = await Promise.all([
        h.adapter.unsubscribe(app, channel, a1.socketId),
        h.adapter.unsubscribe(app, channel, a2.socketId),
        h.adapter.unsubscribe(app, channel, b.socketId),
      ]);
      expect(left.map((l) => [l.vacated, l.memberRemoved])).toEqual([[false, false], [false, true], [true, true]]);
      // Three joins in one call, three leaves in another. The node also runs its held-webhook
      // release script every 200 ms: those calls, at most one per 200 ms since the reset, are
      // allowed beside the two (on a loaded machine the six changes can span one).
      const periodic = Math.floor((Date.now() - resetAt) / 200) + 1;
      const calls = await scriptCalls(client);
      expect(calls).toBeGreaterThanOrEqual(2);
      expect(calls).toBeLessThanOrEqual(2 + periodic);

      const names = (): string[] =>
        receiver.deliveredEvents().filter((e) => e.name !== 'subscription_count').map((e) => `${String(e.name)}${e.user_id !== undefined ? `:${String(e.user_id)}` : ''}`).sort();
      const expected = ['channel_occupied', 'channel_vacated', 'member_added:ada', 'member_added:bob', 'member_removed:ada', 'member_removed:bob'];
      await until(() => names().length >= expected.length, 'webhooks delivered');
      // A duplicate would have been queued with the others, before the marker: another member
      // joining the same channel (its webhooks go through the same shard's outbox).
      await flushedBy(
        () => h.adapter.subscribe({ appId: app, channel, socketId: a1.socketId, member: { userId: 'marker' } }),
        () => names().includes('member_added:marker'),
        'the marker member_added',
      );
      expect(names()).toEqual([...expected, 'channel_occupied', 'member_added:marker'].sort());
    } finally {
      await client.quit();
      await h.close();
    }
  });
});
