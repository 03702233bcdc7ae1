/**
 * Redis behind Sentinel (docs/scaling.md "Redis high availability"): two Herald nodes find the
 * master through a sentinel (the host and port of `redisUrl` are never used: port 1 here), and
 * when the master is killed and the sentinel promotes its replica they follow it by themselves:
 * cross-node delivery resumes, the shared state the replica kept is still right, and nobody
 * sees a member leave (the nodes were alive; it was Redis that was away).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { ClientPool } from '../helpers/channel-clients.js';
import { deliveryResumes, distinctEvents, eventLabel, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { HeraldProcess } from '../helpers/herald-process.js';
import { MASTER_NAME, RedisSentinelSet } from '../helpers/redis-sentinel.js';
import { sleep, until } from '../helpers/wait.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const APP = { id: 'sen-app', key: 'sen-key', secret: 'sen-secret' };
const NODE_TIMEOUT_MS = 2000;
const pool = new ClientPool(APP);
let redis: RedisSentinelSet;
let receiver: WebhookReceiver;
const nodes: HeraldProcess[] = [];

beforeAll(async () => {
  if (ONE_PROCESS) return;
  [redis, receiver] = await Promise.all([new RedisSentinelSet().start(), WebhookReceiver.start()]);
}, 30_000);
afterEach(() => pool.disconnectAll());
afterAll(async () => {
  await Promise.allSettled(nodes.map((n) => n.dispose()));
  await Promise.allSettled([redis?.stop(), receiver?.close()]);
});

/** A node of `set`'s Redis; with `viaEnv`, told of the sentinel by environment variables instead of its config file. */
function node(nodeId: string, set: RedisSentinelSet = redis, viaEnv = false): HeraldProcess {
  const webhooks = [{ url: receiver.url('/sentinel'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
  const config = {
    apps: [{ ...APP, webhooks }],
    push: [],
    webhookDelivery: { batchWindowMs: 50, retryBaseMs: 50 },
    cluster: {
      // Never dialled: with `sentinel` the master's address comes from the sentinels.
      redisUrl: 'redis://127.0.0.1:1',
      ...(viaEnv ? {} : { sentinel: { masterName: MASTER_NAME, addresses: [set.sentinelAddress] } }),
      keyPrefix: 'sentinel:',
      nodeTimeoutMs: NODE_TIMEOUT_MS,
      nodeId,
    },
  };
  const env = viaEnv ? { HERALD_REDIS_SENTINELS: set.sentinelAddress, HERALD_REDIS_SENTINEL_MASTER: MASTER_NAME } : undefined;
  const n = new HeraldProcess({ config, shards: 1, ...(env && { env }) });
  nodes.push(n);
  onTestFailed(() => {
    process.stderr.write(`--- ${nodeId} stderr:\n${n.stderr.slice(-6000)}\n--- sentinel:\n${set.log.slice(-3000)}\n`);
  });
  return n;
}

/** Herald's connections to the Redis server on `port` (default: the current master). */
async function heraldClients(set: RedisSentinelSet = redis, port?: number): Promise<string[]> {
  return (await set.clientNames(port ?? (await set.masterPort()))).filter((name) => name.startsWith('herald-'));
}

/**
 * The Herald connections on the master once they are `expected` (the shards' outbox connections
 * reconnect on their own backoff, after the nodes' own), or the last ones seen after 10 s.
 */
async function heraldClientsSettled(expected: string[], set: RedisSentinelSet = redis): Promise<string[]> {
  let names: string[] = [];
  await until(async () => {
    names = await heraldClients(set);
    return names.join() === expected.join();
  }, 'the Herald connections on the master').catch(() => undefined);
  return names;
}

/**
 * `users[0]` connected to node `a`, `users[1]` to node `b`, each subscribed to `sen-news` and
 * `presence-sen`; resolves once both nodes' presence subscriptions list both users.
 */
async function twoMembers(a: HeraldProcess, b: HeraldProcess, users: [string, string]) {
  const sA = await pool.connect(a, { userId: users[0] });
  const sB = await pool.connect(b, { userId: users[1] });
  const newsA = await sA.subscribe('sen-news');
  const newsB = await sB.subscribe('sen-news');
  const presenceA = await sA.subscribe('presence-sen');
  const presenceB = await sB.subscribe('presence-sen');
  await until(() => presenceA.memberIds().length === 2 && presenceB.memberIds().length === 2, 'both members seen on both nodes');
  return { newsA, newsB, presenceA, presenceB };
}

/** Front-end threads per node: with more than 1 (npm run test:threads), each has its own command connection. */
const THREADS = Number(process.env.HERALD_FRONT_END_THREADS || 1);

/**
 * The Redis connections of these nodes (CLIENT SETNAME), sorted: each node's command and
 * subscriber connections, each front-end thread's command connection (several threads), and its
 * shard's shared webhook outbox's two (one shard per node).
 */
function connectionsOf(...nodeIds: string[]): string[] {
  const threads = (id: string): string[] => (THREADS > 1 ? Array.from({ length: THREADS }, (_, t) => `herald-${id}-t${t}`) : []);
  return nodeIds.flatMap((id) => [`herald-${id}`, `herald-${id}-sub`, ...threads(id), `herald-${id}-webhooks-s0`, `herald-${id}-webhooks-s0-sub`]).sort();
}

describe.skipIf(ONE_PROCESS)('Redis behind Sentinel', () => {
  it('nodes find the master through the sentinel, follow a failover to the replica, and keep delivering and counting with nobody leaving', async () => {
    const [a, b] = [node('sen-a'), node('sen-b', redis, true)];
    await Promise.all([a.start(), b.start()]);
    expect(await heraldClientsSettled(connectionsOf('sen-a', 'sen-b'))).toEqual(connectionsOf('sen-a', 'sen-b'));

    const { newsA, newsB, presenceA, presenceB } = await twoMembers(a, b, ['ua', 'ub']);
    const sdkA = pool.sdk(a);
    const sdkB = pool.sdk(b);
    await sdkA.trigger('sen-news', 'before', 1);
    await until(() => newsB.data('before').length === 1, 'cross-node delivery before the failover');
    const hooks = (): string[] => distinctEvents(receiver.deliveredEvents()).map(eventLabel);
    // Every webhook of the joins delivered (they may go out through either node's shard).
    const before = ['member_added:presence-sen:ua', 'member_added:presence-sen:ub', 'channel_occupied:presence-sen', 'channel_occupied:sen-news'];
    await until(() => before.every((l) => hooks().includes(l)), 'webhooks before the failover');
    const hooksBefore = hooks().length;

    await redis.failOver();
    // Both nodes are on the new master and deliver across nodes again, both ways.
    await deliveryResumes(sdkA, 'sen-news', newsB, 'resumed-a-to-b');
    await deliveryResumes(sdkB, 'sen-news', newsA, 'resumed-b-to-a');
    expect(await heraldClientsSettled(connectionsOf('sen-a', 'sen-b'))).toEqual(connectionsOf('sen-a', 'sen-b'));
    await sdkA.trigger('sen-news', 'after', 'from A');
    await sdkB.trigger('sen-news', 'after', 'from B');
    await until(() => newsA.data('after').length === 2 && newsB.data('after').length === 2, 'both ways after the failover');

    // Longer than the node timeout: a node back first must not reap the other, which was cut
    // off by the same failover, not dead.
    // time: the node timeout passes (a reap, wrongly, would come within it).
    await sleep(NODE_TIMEOUT_MS * 2);
    expect(presenceA.data('pusher:member_removed')).toEqual([]);
    expect(presenceB.data('pusher:member_removed')).toEqual([]);
    expect([presenceA.memberIds(), presenceB.memberIds()]).toEqual([['ua', 'ub'], ['ua', 'ub']]);
    // Shared state answered from the new master, the same on both nodes.
    for (const sdk of [sdkA, sdkB]) {
      const users = (await (await sdk.get({ path: '/channels/presence-sen/users' })).json()) as { users: { id: string }[] };
      expect(users.users.map((u) => u.id).sort()).toEqual(['ua', 'ub']);
      const info = (await (await sdk.get({ path: '/channels/presence-sen', params: { info: 'user_count' } })).json()) as Record<string, unknown>;
      expect(info).toEqual({ occupied: true, user_count: 2 });
      expect(await (await sdk.get({ path: '/channels/sen-news' })).json()).toEqual({ occupied: true });
    }
    // No webhook came of the failover: no member left, no channel was vacated or occupied again.
    expect(hooks().slice(hooksBefore)).toEqual([]);
  }, 60_000);

  it('a planned failover (the old master stays up, demoted to replica): the nodes leave it for the new master', async () => {
    const set = await new RedisSentinelSet().start();
    try {
      const [a, b] = [node('sen-c', set), node('sen-d', set)];
      await Promise.all([a.start(), b.start()]);
      const oldMaster = set.master.port;
      const { newsA, newsB, presenceA, presenceB } = await twoMembers(a, b, ['uc', 'ud']);

      await set.switchOver();
      await deliveryResumes(pool.sdk(a), 'sen-news', newsB, 'switched-a-to-b');
      await deliveryResumes(pool.sdk(b), 'sen-news', newsA, 'switched-b-to-a');
      // Every Herald connection moved; none is left on the demoted master, still running.
      expect(await heraldClientsSettled(connectionsOf('sen-c', 'sen-d'), set)).toEqual(connectionsOf('sen-c', 'sen-d'));
      expect(await heraldClients(set, oldMaster)).toEqual([]);
      // time: the node timeout passes: neither node reaps the other (a reap would come within it).
      await sleep(NODE_TIMEOUT_MS * 2);
      expect(presenceA.data('pusher:member_removed')).toEqual([]);
      expect(presenceB.data('pusher:member_removed')).toEqual([]);
      const users = (await (await pool.sdk(b).get({ path: '/channels/presence-sen/users' })).json()) as { users: { id: string }[] };
      expect(users.users.map((u) => u.id).sort()).toEqual(['uc', 'ud']);
    } finally {
      await set.stop();
    }
  }, 60_000);
});
