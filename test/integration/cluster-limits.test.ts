/**
 * Per-app limits are cluster-wide (issue 14): an app's maxConnections and messageQuota are
 * counted in Redis, so connections and messages spread over the nodes add up; so are the
 * per-app rate limits (issue 29). And a node with no
 * `cluster` block runs with no Redis at all.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool, rawConnection, refusal } from '../helpers/channel-clients.js';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { startHerald } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { flushedBy, until } from '../helpers/wait.js';

const SMALL = { id: 'small-app', key: 'small-key', secret: 'small-secret', maxConnections: 2 };
const QUOTA = { id: 'quota-app', key: 'quota-key', secret: 'quota-secret', messageQuota: 4, maxPresenceMembers: 2 };
const RATED = { id: 'rated-app', key: 'rated-key', secret: 'rated-secret', maxHttpRequestsPerSecond: 5, maxNewConnectionsPerSecond: 3 };
const bed = heraldClusterBed('limits');
const pool = new ClientPool(QUOTA);
const sockets: { close(): void }[] = [];

afterEach(() => {
  pool.disconnectAll();
  for (const ws of sockets.splice(0)) ws.close();
});

async function connection(node: Parameters<typeof rawConnection>[0]) {
  const conn = await rawConnection(node, SMALL.key);
  sockets.push(conn.ws);
  return conn;
}

describe('limits across nodes', () => {
  it('maxConnections 2 with one connection on each node refuses a third on either node with 4004', async () => {
    const cluster = await bed.start({ apps: [SMALL, QUOTA] });
    const onA = await connection(cluster.a);
    expect(onA.first.event).toBe('pusher:connection_established');
    const onB = await connection(cluster.b);
    expect(onB.first.event).toBe('pusher:connection_established');
    for (const node of [cluster.a, cluster.b]) {
      const third = await connection(node);
      expect(third.first, `third connection on port ${node.port}`).toMatchObject({ event: 'pusher:error', data: { code: 4004 } });
      expect(await third.closed).toBe(4004);
    }
    // Closing the one on node A frees a slot for node B.
    onA.ws.close();
    await onA.closed;
    // Node A records the close after the socket is gone: each try is a new connection.
    const again = await until(async () => {
      const conn = await connection(cluster.b);
      return conn.first.event === 'pusher:connection_established' && conn;
    }, 'a slot freed for node B', 5000);
    expect(again.first.event).toBe('pusher:connection_established');
  });

  it.skipIf(ONE_PROCESS)('the connections of a node killed with SIGKILL count until it is reaped, then free their slots', async () => {
    const cluster = await bed.start({ apps: [SMALL, QUOTA] });
    await connection(cluster.a);
    await connection(cluster.b);
    expect((await connection(cluster.a)).first).toMatchObject({ event: 'pusher:error', data: { code: 4004 } });
    await cluster.killNode(cluster.b);
    // Reaped within nodeTimeoutMs (2 s) plus a few seconds: then node A accepts one more.
    const again = await until(async () => {
      const conn = await connection(cluster.a);
      return conn.first.event === 'pusher:connection_established' && conn;
    }, 'node B reaped: a slot freed for node A', cluster.nodeTimeoutMs + 5000);
    expect(again.first.event).toBe('pusher:connection_established');
    expect((await connection(cluster.a)).first).toMatchObject({ event: 'pusher:error', data: { code: 4004 } });
  });

  it('maxPresenceMembers 2 counts the members of every node, a present user may add connections anywhere', async () => {
    const cluster = await bed.start({ apps: [SMALL, QUOTA] });
    await (await pool.connect(cluster.a, { userId: 'm1' })).subscribe('presence-full');
    await (await pool.connect(cluster.b, { userId: 'm2' })).subscribe('presence-full');
    for (const node of [cluster.a, cluster.b]) {
      const third = await pool.connect(node, { userId: 'm3' });
      await expect(third.subscribe('presence-full')).rejects.toThrow(/LimitReached/);
    }
    const again = await (await pool.connect(cluster.b, { userId: 'm1' })).subscribe('presence-full');
    expect(again.memberIds()).toEqual(['m1', 'm2']);
  });

  it('messageQuota 4 counts triggers through both nodes: the fifth is refused with 403 on either', async () => {
    const cluster = await bed.start({ apps: [SMALL, QUOTA] });
    const onB = await pool.connect(cluster.b);
    const feed = await onB.subscribe('quota-feed');
    // A member on node A whose leave, after the refused triggers, tells onB that nothing of them comes.
    const watched = await onB.subscribe('presence-quota-mark');
    const member = await pool.connect(cluster.a, { userId: 'marker' });
    await member.subscribe('presence-quota-mark');
    await until(() => watched.memberIds().length === 2, 'the marker member seen on node B');
    const sdkA = pool.sdk(cluster.a);
    const sdkB = pool.sdk(cluster.b);
    await sdkA.trigger('quota-feed', 'ev', 1);
    await sdkB.trigger('quota-feed', 'ev', 2);
    await sdkA.trigger('quota-feed', 'ev', 3);
    await sdkB.trigger('quota-feed', 'ev', 4);
    for (const sdk of [sdkA, sdkB]) {
      const refused = await refusal(sdk.trigger('quota-feed', 'ev', 'over'));
      expect(refused).toMatchObject({ status: 403, body: { code: 'APP_OVER_QUOTA' } });
    }
    await until(() => feed.data('ev').length === 4, 'the four accepted events');
    // A refused trigger published anyway would have gone out before its answer: before this leave
    // through node A (over Redis), and to node B's socket at once.
    await flushedBy(() => member.unsubscribe('presence-quota-mark'), () => watched.data('pusher:member_removed').length === 1, 'the marker member gone on node B');
    expect(feed.data('ev')).toEqual([1, 2, 3, 4]);
  });

  it('rate limits count every node: maxHttpRequestsPerSecond 5 and maxNewConnectionsPerSecond 3 hold for both nodes together', async () => {
    const cluster = await bed.start({ apps: [SMALL, QUOTA, RATED] });
    const sdks = [channelsSdk(cluster.a.port, RATED), channelsSdk(cluster.b.port, RATED)];
    // One burst within one second (Redis' clock is this machine's): 12 requests on each node.
    await until(() => Date.now() % 1000 < 50, 'the start of a second');
    const results = await Promise.allSettled(sdks.flatMap((sdk) => Array.from({ length: 12 }, (_, i) => sdk.get({ path: '/channels', params: { i } }))));
    const accepted = results.filter((r) => r.status === 'fulfilled').length;
    // Counted per node, each node alone would accept at least 5 (10 in all).
    expect(accepted).toBeGreaterThanOrEqual(5);
    expect(accepted).toBeLessThan(10);
    const refused = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
    expect(await refusal(Promise.reject(refused.reason))).toMatchObject({ status: 429, body: { code: 'APP_RATE_LIMITED' } });

    await until(() => Date.now() % 1000 < 50, 'the start of a second');
    const conns = await Promise.all([cluster.a, cluster.b, cluster.a, cluster.b, cluster.a, cluster.b, cluster.a, cluster.b].map((n) => rawConnection(n, RATED.key)));
    for (const c of conns) sockets.push(c.ws);
    const established = conns.filter((c) => c.first.event === 'pusher:connection_established').length;
    expect(established).toBeGreaterThanOrEqual(3);
    expect(established).toBeLessThan(6);
    expect(conns.find((c) => c.first.event === 'pusher:error')!.first.data).toMatchObject({ code: 4301 });
  });
});

describe('no cluster block', () => {
  it('a node runs with no Redis at all', async () => {
    const single = await startHerald({ config: { apps: [QUOTA] }, env: { HERALD_REDIS_URL: '' } });
    try {
      const client = await pool.connect(single);
      const feed = await client.subscribe('solo');
      await pool.sdk(single).trigger('solo', 'ev', 'alone');
      await until(() => feed.data('ev').length === 1, 'event on the single node');
      expect((await fetch(`${single.baseUrl}/ready`)).status).toBe(200);
    } finally {
      pool.disconnectAll();
      await single.dispose();
    }
  });
});
