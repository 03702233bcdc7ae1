/**
 * Channel history in a cluster (two real nodes over a private redis-server): the history API
 * answers the same from either node, with serials strictly increasing across the nodes; a
 * pusher-js client with the recovery plugin that drops from node A and comes back through
 * node B gets the events published meanwhile once, in order, then live ones, also under a
 * steady publish rate through both nodes; client events are kept through either node and
 * reach the other subscribers on both nodes once; an event answered 200 survives kill -9 of the node
 * that took it; an evicted history answers herald:recovery_failed; maxHistoryBytes bounds the
 * app's events across the nodes; deleting the app drops its history from Redis; a client that
 * moves from node A to node B is not replayed its own client event, nor a trigger naming its
 * socket on A.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { withRecovery } from '../../src/client/recovery.js';
import { numbered, record } from '../helpers/channel-record.js';
import { adminRequest } from '../helpers/admin-client.js';
import { ClientPool } from '../helpers/channel-clients.js';
import { DroppingProxy } from '../helpers/dropping-proxy.js';
import { heraldClusterBed, ONE_PROCESS, type HeraldCluster } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient, type PusherJsOptions } from '../helpers/sdk-clients.js';
import { signedQuery } from '../helpers/signed-request.js';
import { flushedBy, sleep, until } from '../helpers/wait.js';

const TOKEN = 'cluster-history-token-0123456789';
const APP = { id: 'chist-app', key: 'chist-key', secret: 'chist-secret' };
const SMALL = { id: 'chist-small', key: 'chist-small-key', secret: 'chist-small-secret' };
/** maxHistoryBytes 400: ten events of 40 bytes (`history-b-N`, `n`, 28 bytes of data). */
const BYTES = { id: 'chist-bytes', key: 'chist-bytes-key', secret: 'chist-bytes-secret' };
const APPS = [
  { ...APP, clientEvents: true, history: { channels: ['history-*', 'private-history-*'], maxEvents: 1000, ttlSeconds: 300 } },
  { ...SMALL, history: { channels: ['history-*'], maxEvents: 3, ttlSeconds: 300 } },
  { ...BYTES, history: { channels: ['history-*'], maxEvents: 1000, ttlSeconds: 300 }, maxHistoryBytes: 400 },
];

const bed = heraldClusterBed('chist');
const clients: PusherJsClient[] = [];
const proxies: DroppingProxy[] = [];

afterEach(async () => {
  for (const c of clients.splice(0)) c.disconnect();
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

interface HistoryBody {
  events: { serial: string; event: string; data: string; published_at: number }[];
  complete: boolean;
}

async function historyOf(node: HeraldProcess, app: typeof APP, channel: string, params: Record<string, string> = {}): Promise<HistoryBody> {
  const path = `/apps/${app.id}/channels/${channel}/history`;
  const res = await fetch(`${node.baseUrl}${path}?${signedQuery(app, 'GET', path, { params })}`);
  expect(res.status).toBe(200);
  return (await res.json()) as HistoryBody;
}

/** A recovering pusher-js client reaching the cluster through a proxy in front of `node` (`options`: auth handlers). */
async function recoveringClientOf(node: HeraldProcess, key: string, options: PusherJsOptions = {}): Promise<{ pusher: ReturnType<typeof withRecovery<PusherJsClient>>; proxy: DroppingProxy }> {
  const proxy = await new DroppingProxy(node.port).start();
  proxies.push(proxy);
  const pusher = withRecovery(pusherJsClient(proxy.port, key, { activityTimeout: 5000, pongTimeout: 2000, ...options }));
  clients.push(pusher);
  return { pusher, proxy };
}

const subscribed = (channel: unknown) => () => (channel as { subscribed: boolean }).subscribed;

/** Cuts the client off node A and lets it come back through node B (held until `restore`). */
async function moveToB(cluster: HeraldCluster, pusher: PusherJsClient, proxy: DroppingProxy): Promise<void> {
  proxy.cut();
  proxy.upstreamPort = cluster.b.port;
  await until(() => pusher.connection.state !== 'connected', 'pusher-js to notice the cut');
}

describe.skipIf(ONE_PROCESS)('channel history in a cluster', () => {
  it('answers the history API the same from both nodes, serials increasing across them', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaA = channelsSdk(cluster.a.port, APP);
    const viaB = channelsSdk(cluster.b.port, APP);
    for (let i = 0; i < 6; i++) expect((await (i % 2 === 0 ? viaA : viaB).trigger('history-api', 'n', i)).status).toBe(200);
    const fromA = await historyOf(cluster.a, APP, 'history-api');
    const fromB = await historyOf(cluster.b, APP, 'history-api');
    expect(fromB).toEqual(fromA);
    expect(fromA.complete).toBe(true);
    expect(fromA.events.map((e) => JSON.parse(e.data))).toEqual([0, 1, 2, 3, 4, 5]);
    const serials = fromA.events.map((e) => e.serial);
    for (const s of serials) expect(s).toMatch(/^\d{13}-\d{12}$/);
    expect([...serials].sort()).toEqual(serials);
    expect(new Set(serials).size).toBe(6);
    const after = await historyOf(cluster.b, APP, 'history-api', { since: serials[3]!, limit: '1' });
    expect(after).toEqual({ events: [fromA.events[4]], complete: false });
    expect(await historyOf(cluster.a, APP, 'history-api', { since: serials[3]! })).toEqual({ events: fromA.events.slice(4), complete: true });
  }, 60_000);

  it('recovers a client that drops from node A and comes back through node B: missed events once, in order, then live ones', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaA = channelsSdk(cluster.a.port, APP);
    const viaB = channelsSdk(cluster.b.port, APP);
    const { pusher, proxy } = await recoveringClientOf(cluster.a, APP.key);
    const channel = pusher.subscribe('history-move');
    const seen = record(channel);
    await until(subscribed(channel), 'subscription on node A');
    for (let i = 0; i < 3; i++) await viaA.trigger('history-move', 'n', i);
    await until(() => numbered(seen).length === 3, 'the first 3 events');

    await moveToB(cluster, pusher, proxy);
    for (let i = 3; i < 10; i++) expect((await viaB.trigger('history-move', 'n', i)).status).toBe(200);
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
    for (let i = 10; i < 14; i++) await (i % 2 === 0 ? viaA : viaB).trigger('history-move', 'n', i);
    await until(() => numbered(seen).length === 14, () => `14 events, got ${JSON.stringify(numbered(seen))}`);

    expect(numbered(seen)).toEqual(Array.from({ length: 14 }, (_, i) => i));
    expect(seen.filter(([e]) => e.startsWith('herald:'))).toEqual([['herald:recovered', { missed: 7 }]]);
    expect(seen.findIndex(([e]) => e === 'herald:recovered')).toBe(10);
  }, 60_000);

  it('holds the seam on node B while both nodes publish: every event once, in order', async () => {
    const cluster = await bed.start({ apps: APPS });
    const sdks = [channelsSdk(cluster.a.port, APP), channelsSdk(cluster.b.port, APP)];
    const { pusher, proxy } = await recoveringClientOf(cluster.a, APP.key);
    const channel = pusher.subscribe('history-steady');
    const seen = record(channel);
    await until(subscribed(channel), 'subscription on node A');
    let sent = 0;
    let publishing = true;
    // One publisher, alternating nodes: each trigger is answered before the next, so the order is known.
    const publisher = (async () => {
      while (publishing) {
        expect((await sdks[sent % 2]!.trigger('history-steady', 'n', sent)).status).toBe(200);
        sent++;
        // Unpaced, a quiet machine published 1,700 a second and evicted the gap before pusher-js
        // was back (herald:recovery_failed, rightly).
        // time: at most 50 events a second, so that the 1,000 kept events reach over the reconnect.
        await sleep(20);
      }
    })();
    await until(() => numbered(seen).length >= 10, 'events before the cut');
    await moveToB(cluster, pusher, proxy);
    const cutAt = sent;
    await until(() => sent >= cutAt + 20, 'events while away');
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), () => `herald:recovered, got ${JSON.stringify(seen.filter(([e]) => e.startsWith('herald:')))}`, 20_000);
    const recoveredAt = sent;
    await until(() => sent >= recoveredAt + 20, 'live events after the recovery');
    publishing = false;
    await publisher;
    await until(() => numbered(seen).length === sent, () => `${sent} events, got ${numbered(seen).length}`);
    expect(numbered(seen)).toEqual(Array.from({ length: sent }, (_, i) => i));
  }, 90_000);

  it('keeps client events through either node, each sent to the other subscribers on both nodes once, not to its sender', async () => {
    const cluster = await bed.start({ apps: APPS });
    const pool = new ClientPool(APP);
    try {
      const [onA, alsoOnA, onB] = await Promise.all([pool.connect(cluster.a), pool.connect(cluster.a), pool.connect(cluster.b)]);
      const channel = 'private-history-chat';
      const [fromA, seenA, seenB] = await Promise.all([onA.subscribe(channel), alsoOnA.subscribe(channel), onB.subscribe(channel)]);
      fromA.channel.trigger('client-said', { n: 1 });
      await until(() => seenB.data('client-said').length === 1 && seenA.data('client-said').length === 1, 'the client event on both nodes');
      seenB.channel.trigger('client-said', { n: 2 });
      await until(() => fromA.data('client-said').length === 1 && seenA.data('client-said').length === 2, 'the reply on node A');
      const kept = await historyOf(cluster.a, APP, channel);
      expect(kept.events.map((e) => [e.event, JSON.parse(e.data)])).toEqual([['client-said', { n: 1 }], ['client-said', { n: 2 }]]);
      expect(await historyOf(cluster.b, APP, channel)).toEqual(kept);
      // Once each, the sender left out (it does not get its own event).
      await flushedBy(() => channelsSdk(cluster.b.port, APP).trigger(channel, 'end', 0), () => [fromA, seenA, seenB].every((r) => r.data('end').length === 1), 'a later event on all three');
      expect(fromA.data('client-said')).toEqual([{ n: 2 }]);
      expect(seenA.data('client-said')).toEqual([{ n: 1 }, { n: 2 }]);
      expect(seenB.data('client-said')).toEqual([{ n: 1 }]);
    } finally {
      pool.disconnectAll();
    }
  }, 60_000);

  it('does not replay to a client that moves from node A to node B its own client event, nor a trigger naming its socket on A', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaA = channelsSdk(cluster.a.port, APP);
    const viaB = channelsSdk(cluster.b.port, APP);
    const name = 'private-history-echo';
    const authorised: PusherJsOptions = {
      channelAuthorization: { endpoint: '/unused', transport: 'ajax', customHandler: ({ socketId, channelName }, callback) => callback(null, viaA.authorizeChannel(socketId, channelName)) },
    };
    const { pusher, proxy } = await recoveringClientOf(cluster.a, APP.key, authorised);
    const channel = pusher.subscribe(name);
    const seen = record(channel);
    const pool = new ClientPool(APP);
    try {
      const other = await (await pool.connect(cluster.b)).subscribe(name);
      await until(subscribed(channel), 'subscription on node A');
      await viaA.trigger(name, 'n', 0);
      await until(() => numbered(seen).length === 1 && other.data('n').length === 1, 'the first event on both');
      const before = pusher.connection.socket_id;
      channel.trigger('client-said', { from: 'me' });
      await until(() => other.data('client-said').length === 1, 'the client event on node B');
      expect((await viaB.trigger(name, 'n', 1, { socket_id: before })).status).toBe(200);
      await until(() => other.data('n').length === 2, 'the toOthers trigger on node B');

      await moveToB(cluster, pusher, proxy);
      expect((await viaB.trigger(name, 'n', 2)).status).toBe(200);
      other.channel.trigger('client-said', { from: 'other' });
      await until(async () => (await historyOf(cluster.a, APP, name)).events.length === 5, 'the other client\'s client event kept');
      proxy.restore();
      await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
      expect(pusher.connection.socket_id).not.toBe(before);
      await viaA.trigger(name, 'n', 3);
      await until(() => numbered(seen).includes(3), 'the live event');
      expect(seen).toEqual([
        ['n', 0],
        ['n', 2],
        ['client-said', { from: 'other' }],
        ['herald:recovered', { missed: 2 }],
        ['n', 3],
      ]);
    } finally {
      pool.disconnectAll();
    }
  }, 60_000);

  it('loses no event answered 200 when the node that took it is killed (kill -9)', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaA = channelsSdk(cluster.a.port, APP);
    const triggers = await Promise.all(Array.from({ length: 30 }, (_, i) => viaA.trigger('history-kill', 'n', i)));
    for (const t of triggers) expect(t.status).toBe(200);
    await cluster.killNode(cluster.a);
    const kept = await historyOf(cluster.b, APP, 'history-kill');
    expect(kept.complete).toBe(true);
    expect(kept.events.map((e) => JSON.parse(e.data)).sort((x: number, y: number) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i));
    const serials = kept.events.map((e) => e.serial);
    expect([...serials].sort()).toEqual(serials);
  }, 60_000);

  it('answers herald:recovery_failed on node B when the history no longer reaches back, then goes on live', async () => {
    const cluster = await bed.start({ apps: APPS });
    const viaB = channelsSdk(cluster.b.port, SMALL);
    const { pusher, proxy } = await recoveringClientOf(cluster.a, SMALL.key);
    const channel = pusher.subscribe('history-short');
    const seen = record(channel);
    await until(subscribed(channel), 'subscription on node A');
    await channelsSdk(cluster.a.port, SMALL).trigger('history-short', 'n', 0);
    await until(() => numbered(seen).length === 1, 'the first event');
    await moveToB(cluster, pusher, proxy);
    // maxEvents is 3: of these 5, the first 2 are evicted.
    for (let i = 1; i < 6; i++) await viaB.trigger('history-short', 'n', i);
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovery_failed'), 'herald:recovery_failed', 20_000);
    await viaB.trigger('history-short', 'n', 6);
    await until(() => numbered(seen).includes(6), 'the live event');
    expect(seen).toEqual([['n', 0], ['herald:recovery_failed', { reason: 'history_evicted' }], ['n', 6]]);
    const kept = await historyOf(cluster.a, SMALL, 'history-short');
    expect(kept.events.map((e) => JSON.parse(e.data))).toEqual([4, 5, 6]);
  }, 60_000);

  it('bounds the app by maxHistoryBytes once for all nodes, evicting its oldest events first', async () => {
    const cluster = await bed.start({ apps: APPS });
    const data = 'x'.repeat(28);
    // 40 bytes each (channel 11 + event 1 + data 28): the app keeps the last ten, whichever node took them.
    for (let i = 0; i < 8; i++) expect((await channelsSdk(cluster.a.port, BYTES).trigger('history-b-1', 'n', data)).status).toBe(200);
    for (let i = 0; i < 6; i++) expect((await channelsSdk(cluster.b.port, BYTES).trigger('history-b-2', 'n', data)).status).toBe(200);
    for (const node of [cluster.a, cluster.b]) {
      expect((await historyOf(node, BYTES, 'history-b-1')).events).toHaveLength(4);
      expect((await historyOf(node, BYTES, 'history-b-2')).events).toHaveLength(6);
    }
  }, 60_000);

  it('drops the history of an app deleted through the admin API from Redis', async () => {
    const cluster = await bed.start({ apps: APPS, config: { admin: { token: TOKEN } } });
    const made = { id: 'chist-made', key: 'chist-made-key', secret: 'chist-made-secret', history: { channels: ['history-*'] } };
    expect((await adminRequest(cluster.a.baseUrl, TOKEN, '/apps', { method: 'POST', body: made })).status).toBe(201);
    await until(async () => (await fetch(`${cluster.b.baseUrl}/apps/${made.id}/channels/history-x/history?${signedQuery(made, 'GET', `/apps/${made.id}/channels/history-x/history`)}`)).status === 200, 'the app on node B');
    for (let i = 0; i < 3; i++) expect((await channelsSdk(cluster.b.port, made).trigger(`history-${i}`, 'n', i)).status).toBe(200);
    const redis = bed.redis.client();
    try {
      const keys = () => redis.keys(`${cluster.keyPrefix}hist:*${made.id}*`);
      expect((await keys()).length).toBeGreaterThan(0);
      expect((await adminRequest(cluster.a.baseUrl, TOKEN, `/apps/${made.id}`, { method: 'DELETE' })).status).toBe(204);
      await until(async () => (await keys()).length === 0, 'the app history keys gone from Redis');
    } finally {
      redis.disconnect();
    }
    expect((await adminRequest(cluster.a.baseUrl, TOKEN, '/apps', { method: 'POST', body: made })).status).toBe(201);
    await until(async () => {
      const path = `/apps/${made.id}/channels/history-0/history`;
      const res = await fetch(`${cluster.b.baseUrl}${path}?${signedQuery(made, 'GET', path)}`);
      return res.status === 200 && ((await res.json()) as HistoryBody).events.length === 0;
    }, 'the app made again, with no history on node B');
  }, 60_000);
});
