/**
 * Client events, the watchlist and terminate_connections across the nodes of a cluster
 * (issue 14): real Herald processes sharing a private redis-server, official pusher-js clients
 * on different nodes, the official `pusher` SDK for terminate_connections. Every assertion names
 * a client on the *other* node, so a node that acts only locally fails.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool, type ChannelClient, type ChannelRecord } from '../helpers/channel-clients.js';
import { heraldClusterBed } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { flushedBy, until } from '../helpers/wait.js';

const APP = { id: 'cl-app', key: 'cl-key', secret: 'cl-secret', clientEvents: true, userAuthentication: true };
const bed = heraldClusterBed('users');
const pool = new ClientPool(APP);

afterEach(() => pool.disconnectAll());

/** Open WebSocket connections of the app on `node` (herald_connections). */
async function connections(node: HeraldProcess): Promise<number> {
  return series(parsePrometheus(await (await fetch(`${node.baseUrl}/metrics`)).text()), 'herald_connections', { app_id: APP.id });
}

describe('client events', () => {
  it('cross nodes on private and presence channels, once, without echo, with user_id on presence', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const alice = await pool.connect(cluster.a, { userId: 'alice' });
    const carl = await pool.connect(cluster.a, { userId: 'carl' });
    const bob = await pool.connect(cluster.b, { userId: 'bob' });
    const priv = new Map<ChannelClient, ChannelRecord>();
    for (const c of [alice, carl, bob]) priv.set(c, await c.subscribe('private-chat'));
    priv.get(alice)!.channel.trigger('client-typing', { who: 'alice' });
    priv.get(bob)!.channel.trigger('client-typing', { who: 'bob' });
    await until(() => priv.get(carl)!.data('client-typing').length === 2 && priv.get(bob)!.data('client-typing').length === 1 && priv.get(alice)!.data('client-typing').length === 1, 'client events on both nodes');
    // A marker from each node, sent after the client events were relayed, arrives after any echo or duplicate of them.
    await flushedBy(
      () => Promise.all([pool.sdk(cluster.a).trigger('private-chat', 'marker', 'A'), pool.sdk(cluster.b).trigger('private-chat', 'marker', 'B')]),
      () => [alice, carl, bob].every((c) => priv.get(c)!.data('marker').length === 2),
      'the markers on every client',
    );
    expect(priv.get(bob)!.data('client-typing')).toEqual([{ who: 'alice' }]);
    expect(priv.get(alice)!.data('client-typing')).toEqual([{ who: 'bob' }]);
    expect(priv.get(carl)!.data('client-typing')).toEqual(expect.arrayContaining([{ who: 'alice' }, { who: 'bob' }]));
    expect(priv.get(carl)!.data('client-typing')).toHaveLength(2);

    const presAlice = await alice.subscribe('presence-chat');
    const presBob = await bob.subscribe('presence-chat');
    const waves: { data: unknown; userId: string | undefined }[] = [];
    presBob.channel.bind('client-wave', (data: unknown, meta: { user_id?: string }) => waves.push({ data, userId: meta?.user_id }));
    presAlice.channel.trigger('client-wave', 'hello');
    await until(() => waves.length === 1, 'client-wave on node B');
    await flushedBy(() => pool.sdk(cluster.a).trigger('presence-chat', 'marker', 'A'), () => presAlice.data('marker').length === 1 && presBob.data('marker').length === 1, 'the marker on both nodes');
    expect(waves).toEqual([{ data: 'hello', userId: 'alice' }]);
    expect(presAlice.data('client-wave')).toEqual([]);
  });
});

describe('watchlist', () => {
  it('reports users signing in and out on another node online and offline', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const daveB = await pool.signedIn(cluster.b, { userId: 'dave' });
    const carol = await pool.signedIn(cluster.a, { userId: 'carol', watchlist: ['dave', 'erin'] });
    // dave is online (on node B) when carol signs in on node A; erin is not.
    await until(() => carol.watchlist.some((e) => e.name === 'online') && carol.watchlist.some((e) => e.name === 'offline'), 'initial watchlist state');
    expect(carol.watchlist).toEqual(expect.arrayContaining([{ name: 'online', user_ids: ['dave'] }, { name: 'offline', user_ids: ['erin'] }]));
    const before = carol.watchlist.length;

    // erin signs in on node B, then on node A too: online once; offline only when both are gone.
    const erinB = await pool.signedIn(cluster.b, { userId: 'erin' });
    await until(() => carol.watchlist.length > before, 'erin online');
    const erinA = await pool.signedIn(cluster.a, { userId: 'erin' });
    erinB.disconnect();
    // Once node B has closed erin's connection (one connection fewer), dave's leaving node B is
    // recorded after erin's there: its offline reaches carol after any offline of erin's.
    await until(async () => (await connections(cluster.b)) === 1, 'erin closed on node B');
    await flushedBy(() => daveB.disconnect(), () => carol.watchlist.length > before + 1, 'dave offline, after erin left node B');
    expect(carol.watchlist.slice(before)).toEqual([{ name: 'online', user_ids: ['erin'] }, { name: 'offline', user_ids: ['dave'] }]);
    erinA.disconnect();
    await until(() => carol.watchlist.length > before + 2, 'erin offline');
    // dave coming back on node A, where erin left last: his online comes after any second offline of erin's.
    await flushedBy(() => pool.signedIn(cluster.a, { userId: 'dave' }), () => carol.watchlist.length > before + 3, 'dave online again');
    expect(carol.watchlist.slice(before)).toEqual([
      { name: 'online', user_ids: ['erin'] },
      { name: 'offline', user_ids: ['dave'] },
      { name: 'offline', user_ids: ['erin'] },
      { name: 'online', user_ids: ['dave'] },
    ]);
  });
});

describe('terminate_connections', () => {
  it('through node A closes the user’s connections on both nodes with 4009, and no one else’s', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const henryA = await pool.signedIn(cluster.a, { userId: 'henry' });
    const henryB = await pool.signedIn(cluster.b, { userId: 'henry' });
    const iris = await pool.signedIn(cluster.b, { userId: 'iris' });
    const res = await pool.sdk(cluster.a).terminateUserConnections('henry');
    expect(res.status).toBe(200);
    await henryB.gone();
    await henryA.gone();
    expect(henryB.errorCodes).toContain(4009);
    expect(henryA.errorCodes).toContain(4009);
    // Node B has closed henry's connection: a message to iris through it comes after any close of hers.
    await flushedBy(() => pool.sdk(cluster.b).sendToUser('iris', 'marker', {}), () => iris.userEvents.some((e) => e.event === 'marker'), 'the marker to iris');
    expect(iris.state).toBe('connected');
  });
});
