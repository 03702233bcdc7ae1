/**
 * The recovery plugin (`withRecovery`, the package's `./recovery` export) with real pusher-js 8
 * and Laravel Echo's pusher connector, through a TCP proxy on loopback that cuts the connection:
 * events published while the client is away arrive once, in order, after the reconnect, then
 * live events; the seam holds under a steady publish rate; a history that no longer reaches
 * back answers herald:recovery_failed; a client's own client event, and a trigger with its
 * previous socket id as socket_id, are not replayed to it under its new socket id.
 */
import Echo from 'laravel-echo';
import PusherJs from 'pusher-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { withRecovery } from '../../src/client/recovery.js';
import { numbered, record } from '../helpers/channel-record.js';
import { DroppingProxy } from '../helpers/dropping-proxy.js';
import { HeraldProcess, appConfig, startHerald } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient, type PusherJsOptions } from '../helpers/sdk-clients.js';
import { sleep, until } from '../helpers/wait.js';

const APP = { id: 'rec-app', key: 'rec-key', secret: 'rec-secret' };
const SMALL = { id: 'rec-small', key: 'rec-small-key', secret: 'rec-small-secret' };

let herald: HeraldProcess;
let proxy: DroppingProxy;
const clients: PusherJsClient[] = [];

beforeAll(async () => {
  herald = await startHerald({
    config: {
      apps: [
        appConfig({ ...APP, clientEvents: true, history: { channels: ['history-*', 'private-history-*'], maxEvents: 1000, ttlSeconds: 300 } }),
        appConfig({ ...SMALL, history: { channels: ['history-*'], maxEvents: 3, ttlSeconds: 300 } }),
      ],
    },
  });
  proxy = await new DroppingProxy(herald.port).start();
});

afterAll(async () => {
  for (const c of clients) c.disconnect();
  await proxy?.close();
  await herald?.dispose();
});

/** pusher-js options that authorise private channels of APP as its server would (the official SDK signs). */
function authorisedByApp(): PusherJsOptions {
  const signer = channelsSdk(herald.port, APP);
  return { channelAuthorization: { endpoint: '/unused', transport: 'ajax', customHandler: ({ socketId, channelName }, callback) => callback(null, signer.authorizeChannel(socketId, channelName)) } };
}

/** A pusher-js client through the proxy, with recovery on (WebSocket unless `transport` names an HTTP fallback). */
function recoveringClient(key: string, transport?: 'xhr_streaming' | 'xhr_polling', options: PusherJsOptions = {}): ReturnType<typeof withRecovery<PusherJsClient>> {
  const fallback = transport ? { enabledTransports: [transport], httpHost: '127.0.0.1', httpPort: proxy.port } : {};
  const pusher = withRecovery(pusherJsClient(proxy.port, key, { activityTimeout: 5000, pongTimeout: 2000, ...fallback, ...options }));
  clients.push(pusher);
  return pusher;
}

/** Cuts the client off and resolves once pusher-js knows it lost the connection. */
async function cutOff(pusher: PusherJsClient): Promise<void> {
  proxy.cut();
  await until(() => pusher.connection.state !== 'connected', 'pusher-js to notice the cut');
}

describe('withRecovery (pusher-js over WebSocket)', () => {
  it('delivers the events published while away once, in order, after the reconnect, then live ones', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const pusher = recoveringClient(APP.key);
    const channel = pusher.subscribe('history-gap');
    const seen = record(channel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription');
    for (let i = 0; i < 3; i++) await sdk.trigger('history-gap', 'n', i);
    await until(() => numbered(seen).length === 3, 'the first 3 events');

    await cutOff(pusher);
    for (let i = 3; i < 10; i++) expect((await sdk.trigger('history-gap', 'n', i)).status).toBe(200);
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
    for (let i = 10; i < 13; i++) await sdk.trigger('history-gap', 'n', i);
    await until(() => numbered(seen).length === 13, () => `13 events, got ${JSON.stringify(numbered(seen))}`);

    expect(numbered(seen)).toEqual(Array.from({ length: 13 }, (_, i) => i));
    expect(seen.filter(([e]) => e.startsWith('herald:'))).toEqual([['herald:recovered', { missed: 7 }]]);
    // herald:recovered comes after the replayed events and before the live ones.
    expect(seen.findIndex(([e]) => e === 'herald:recovered')).toBe(10);
    expect(pusher.recovery.lastSerial('history-gap')).toMatch(/^\d{13}-\d{12}$/);
  });

  it('holds the seam under a steady publish rate: every event once, in order', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const pusher = recoveringClient(APP.key);
    const channel = pusher.subscribe('history-steady');
    const seen = record(channel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription');
    let sent = 0;
    let publishing = true;
    const publisher = (async () => {
      while (publishing) {
        expect((await sdk.trigger('history-steady', 'n', sent)).status).toBe(200);
        sent++;
        // Unpaced, a quiet machine can publish over a thousand a second and evict the gap before
        // the client is back (herald:recovery_failed, rightly).
        // time: at most 50 events a second, so that the 1,000 kept events reach over the reconnect.
        await sleep(20);
      }
    })();
    await until(() => numbered(seen).length >= 10, 'events before the cut');
    await cutOff(pusher);
    const cutAt = sent;
    await until(() => sent >= cutAt + 20, 'events while away');
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
    const recoveredAt = sent;
    await until(() => sent >= recoveredAt + 20, 'live events after the recovery');
    publishing = false;
    await publisher;
    await until(() => numbered(seen).length === sent, () => `${sent} events, got ${numbered(seen).length}`);
    expect(numbered(seen)).toEqual(Array.from({ length: sent }, (_, i) => i));
  });

  it('emits herald:recovery_failed when the history no longer reaches back, then goes on live', async () => {
    const sdk = channelsSdk(herald.port, SMALL);
    const pusher = recoveringClient(SMALL.key);
    const channel = pusher.subscribe('history-short');
    const seen = record(channel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription');
    await sdk.trigger('history-short', 'n', 0);
    await until(() => numbered(seen).length === 1, 'the first event');
    await cutOff(pusher);
    // maxEvents is 3: of these 5, the first 2 are evicted.
    for (let i = 1; i < 6; i++) await sdk.trigger('history-short', 'n', i);
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovery_failed'), 'herald:recovery_failed', 20_000);
    await sdk.trigger('history-short', 'n', 6);
    await until(() => numbered(seen).includes(6), 'the live event');
    expect(seen).toEqual([['n', 0], ['herald:recovery_failed', { reason: 'history_evicted' }], ['n', 6]]);
  });
});

describe('withRecovery: what was left out for the client stays left out', () => {
  it('does not replay its own client event, nor a trigger with its previous socket id, after it reconnects with a new one', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const name = 'private-history-echo';
    const pusher = recoveringClient(APP.key, undefined, authorisedByApp());
    const channel = pusher.subscribe(name);
    const seen = record(channel);
    // Another client, straight to Herald (not through the proxy): it stays connected.
    const other = pusherJsClient(herald.port, APP.key, authorisedByApp());
    clients.push(other);
    const otherChannel = other.subscribe(name);
    const otherSeen = record(otherChannel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed && (otherChannel as unknown as { subscribed: boolean }).subscribed, 'both subscriptions');
    await sdk.trigger(name, 'n', 0);
    await until(() => numbered(seen).length === 1 && numbered(otherSeen).length === 1, 'the first event on both');
    const before = pusher.connection.socket_id;

    // Left out for this socket live: its own client event, and a trigger naming it (toOthers()).
    channel.trigger('client-said', { from: 'me' });
    await until(() => numbered(otherSeen, 'client-said').length === 1, 'the client event at the other client');
    expect((await sdk.trigger(name, 'n', 1, { socket_id: before })).status).toBe(200);
    await until(() => numbered(otherSeen).length === 2, 'the toOthers trigger at the other client');

    await cutOff(pusher);
    // What others publish meanwhile is replayed.
    expect((await sdk.trigger(name, 'n', 2)).status).toBe(200);
    otherChannel.trigger('client-said', { from: 'other' });
    await until(() => numbered(otherSeen).length === 3, 'the trigger while away at the other client');
    const kept = async (): Promise<number> => ((await (await sdk.get({ path: `/channels/${name}/history` })).json()) as { events: unknown[] }).events.length;
    await until(async () => (await kept()) === 5, 'the other client\'s client event kept');
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
    expect(pusher.connection.socket_id).not.toBe(before);
    await sdk.trigger(name, 'n', 3);
    await until(() => numbered(seen).includes(3), 'the live event');

    expect(seen).toEqual([
      ['n', 0],
      ['n', 2],
      ['client-said', { from: 'other' }],
      ['herald:recovered', { missed: 2 }],
      ['n', 3],
    ]);
  });
});

describe('withRecovery on a flaky network', () => {
  it('keeps recovering after more reconnects than previous_socket_ids may name (8), never told its ids are malformed', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const name = 'history-flaky';
    const pusher = recoveringClient(APP.key);
    const channel = pusher.subscribe(name);
    const seen = record(channel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription');
    await sdk.trigger(name, 'n', 0);
    await until(() => numbered(seen).length === 1, 'the first event');
    // The last serial stays the one of connection 1: each recovering subscribe names every
    // socket since, up to the newest 8.
    const sockets = new Set([pusher.connection.socket_id]);
    const recoveries = (): number => seen.filter(([e]) => e === 'herald:recovered').length;
    for (let drop = 1; drop <= 10; drop++) {
      await cutOff(pusher);
      proxy.restore();
      await until(() => recoveries() === drop || seen.some(([e]) => e === 'herald:recovery_failed'), `recovery ${drop}`, 20_000);
      expect(seen.filter(([e]) => e === 'herald:recovery_failed'), `after reconnect ${drop}`).toEqual([]);
      sockets.add(pusher.connection.socket_id);
    }
    expect(sockets.size).toBe(11);
    await sdk.trigger(name, 'n', 1);
    await until(() => numbered(seen).includes(1), 'the live event');
    expect(seen).toEqual([['n', 0], ...Array.from({ length: 10 }, () => ['herald:recovered', { missed: 0 }]), ['n', 1]]);
  });
});

describe.each(['xhr_streaming', 'xhr_polling'] as const)('withRecovery (pusher-js over %s)', (transport) => {
  it('delivers the events published while away once, in order, after the reconnect', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const name = `history-${transport}`;
    const pusher = recoveringClient(APP.key, transport);
    const channel = pusher.subscribe(name);
    const seen = record(channel);
    await until(() => (channel as unknown as { subscribed: boolean }).subscribed, 'subscription');
    expect((pusher.connection as unknown as { connection: { transport: { name: string } } }).connection.transport.name).toBe(transport);
    await sdk.trigger(name, 'n', 0);
    await until(() => numbered(seen).length === 1, 'the first event');
    await cutOff(pusher);
    for (let i = 1; i < 5; i++) await sdk.trigger(name, 'n', i);
    proxy.restore();
    await until(() => seen.some(([e]) => e === 'herald:recovered'), 'herald:recovered', 20_000);
    await sdk.trigger(name, 'n', 5);
    await until(() => numbered(seen).length === 6, () => `6 events, got ${JSON.stringify(seen)}`);
    expect(seen).toEqual([['n', 0], ['n', 1], ['n', 2], ['n', 3], ['n', 4], ['herald:recovered', { missed: 4 }], ['n', 5]]);
  });
});

describe('withRecovery (Laravel Echo, pusher connector)', () => {
  it('recovers what an Echo listener missed', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const echo = new Echo({
      broadcaster: 'pusher',
      key: APP.key,
      cluster: 'local',
      wsHost: '127.0.0.1',
      wsPort: proxy.port,
      forceTLS: false,
      enabledTransports: ['ws'],
      disableStats: true,
      activityTimeout: 5000,
      pongTimeout: 2000,
      Pusher: PusherJs as never,
    });
    const pusher = withRecovery(echo.connector.pusher);
    clients.push(pusher);
    const got: unknown[] = [];
    let recovered: unknown;
    echo.channel('history-echo').listen('.n', (data: unknown) => got.push(data)).listen('.herald:recovered', (data: unknown) => (recovered = data));
    await until(() => (pusher.channel('history-echo') as unknown as { subscribed: boolean } | undefined)?.subscribed, 'subscription');
    await sdk.trigger('history-echo', 'n', 0);
    await until(() => got.length === 1, 'the first event');
    await cutOff(pusher);
    for (let i = 1; i < 4; i++) await sdk.trigger('history-echo', 'n', i);
    proxy.restore();
    await until(() => recovered !== undefined, 'herald:recovered', 20_000);
    await sdk.trigger('history-echo', 'n', 4);
    await until(() => got.length === 5, () => `5 events, got ${JSON.stringify(got)}`);
    expect(got).toEqual([0, 1, 2, 3, 4]);
    expect(recovered).toEqual({ missed: 3 });
  });
});
