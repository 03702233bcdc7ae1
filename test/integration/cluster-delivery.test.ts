/**
 * Delivery across the nodes of a cluster (issue 14): real Herald processes sharing a private
 * redis-server, official pusher-js clients on different nodes, the official `pusher` SDK
 * triggering through one node. Every assertion names a client on the *other* node, so a node
 * that delivers only locally fails.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool, settled, type ChannelClient, type ChannelRecord } from '../helpers/channel-clients.js';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { sleep, until } from '../helpers/wait.js';

const APP = { id: 'cl-app', key: 'cl-key', secret: 'cl-secret', clientEvents: true, userAuthentication: true };
const bed = heraldClusterBed('delivery');
const pool = new ClientPool(APP);

afterEach(() => pool.disconnectAll());

/** Waits until every record got `event` once, then a little longer for stray duplicates. */
async function allGot(records: ChannelRecord[], event: string): Promise<void> {
  await until(() => records.every((r) => r.data(event).length >= 1), `${event} on every subscriber`);
  await sleep(200);
}

describe('triggers through one node', () => {
  it('reach subscribers on both nodes exactly once (public, private, presence), socket_id leaving out a socket on the other node', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onA = await pool.connect(cluster.a, { userId: 'ua' });
    const onB = await pool.connect(cluster.b, { userId: 'ub' });
    const channels = ['news', 'private-news', 'presence-news'];
    const atA: ChannelRecord[] = [];
    const atB: ChannelRecord[] = [];
    for (const name of channels) {
      atA.push(await onA.subscribe(name));
      atB.push(await onB.subscribe(name));
    }
    const sdkA = pool.sdk(cluster.a);
    const sdkB = pool.sdk(cluster.b);
    // Right after subscription_succeeded: a subscriber must get what is triggered next, from any node.
    await sdkA.trigger(channels, 'headline', { n: 1 });
    await sdkA.trigger(channels, 'headline', { n: 2 }, { socket_id: onB.socketId });
    await sdkB.trigger(channels, 'headline', { n: 3 }, { socket_id: onA.socketId });
    await sdkA.trigger(channels, 'marker', 'end');
    await allGot([...atA, ...atB], 'marker');
    for (const record of atA) expect(record.data('headline'), `node A, ${record.channel.name}`).toEqual([{ n: 1 }, { n: 2 }]);
    for (const record of atB) expect(record.data('headline'), `node B, ${record.channel.name}`).toEqual([{ n: 1 }, { n: 3 }]);
  });

  it('batch_events (C2) through node B reach subscribers on both nodes once, in order, with cluster-wide user_count', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onA = await pool.connect(cluster.a, { userId: 'ua' });
    const onB = await pool.connect(cluster.b, { userId: 'ub' });
    const plainA = await onA.subscribe('batch-plain');
    const plainB = await onB.subscribe('batch-plain');
    const presA = await onA.subscribe('presence-batch');
    const presB = await onB.subscribe('presence-batch');
    const res = await pool.sdk(cluster.b).triggerBatch([
      { channel: 'batch-plain', name: 'one', data: '1st' },
      { channel: 'presence-batch', name: 'two', data: '2nd', info: 'user_count' },
      { channel: 'batch-plain', name: 'three', data: '3rd' },
    ]);
    expect(await res.json()).toEqual({ batch: [{}, { user_count: 2 }, {}] });
    await until(() => [plainA, plainB].every((r) => r.data('three').length === 1) && [presA, presB].every((r) => r.data('two').length === 1), 'batch on both nodes');
    await sleep(200);
    for (const r of [plainA, plainB]) expect(r.events.filter((e) => !e.event.startsWith('pusher'))).toEqual([{ event: 'one', data: '1st' }, { event: 'three', data: '3rd' }]);
    for (const r of [presA, presB]) expect(r.events.filter((e) => !e.event.startsWith('pusher'))).toEqual([{ event: 'two', data: '2nd' }]);
  });

  it('sendToUser through node A reaches the user on both nodes once; socket_id on the user channel leaves out the connection on the other node', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const danaA = await pool.signedIn(cluster.a, { userId: 'dana' });
    const danaB = await pool.signedIn(cluster.b, { userId: 'dana' });
    const eveB = await pool.signedIn(cluster.b, { userId: 'eve' });
    const res = await pool.sdk(cluster.a).sendToUser('dana', 'hello', { a: 1 });
    expect(res.status).toBe(200);
    await pool.sdk(cluster.b).post({ path: '/events', body: { name: 'hello', data: 'not A', channels: ['#server-to-user-dana'], socket_id: danaA.socketId } as unknown as string });
    await pool.sdk(cluster.a).sendToUser('eve', 'marker', 'for eve');
    await until(() => danaA.userEvents.length >= 1 && danaB.userEvents.length >= 2 && eveB.userEvents.length >= 1, 'user events');
    await sleep(200);
    expect(danaA.userEvents).toEqual([{ event: 'hello', data: { a: 1 } }]);
    expect(danaB.userEvents).toEqual([{ event: 'hello', data: { a: 1 } }, { event: 'hello', data: 'not A' }]);
    expect(eveB.userEvents).toEqual([{ event: 'marker', data: 'for eve' }]);
  });
});

describe.skipIf(ONE_PROCESS)('delivery cost', () => {
  it('a node listens to a channel on Redis only while it has subscribers on it', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const redis = bed.redis.client();
    try {
      // docs/scaling.md: one pub/sub channel per Herald channel, <keyPrefix>msg:<appId>:<channel>.
      const listeners = async (): Promise<number> => {
        const reply = (await redis.pubsub('NUMSUB', `${cluster.keyPrefix}msg:${APP.id}:solo`)) as [string, number];
        return Number(reply[1]);
      };
      const listening = async (n: number, what: string): Promise<void> => {
        expect(await settled(listeners, (count) => count === n, 5000), what).toBe(n);
      };
      await listening(0, 'no subscriber anywhere');
      const onA = await pool.connect(cluster.a);
      const onA2 = await pool.connect(cluster.a);
      await onA.subscribe('solo');
      await onA2.subscribe('solo');
      await listening(1, 'two subscribers on node A');
      const onB = await pool.connect(cluster.b);
      await onB.subscribe('solo');
      await listening(2, 'subscribers on both nodes');
      onB.unsubscribe('solo');
      await listening(1, 'node B has none left');
      onA.disconnect();
      await sleep(300);
      expect(await listeners(), 'node A still has one').toBe(1);
      onA2.disconnect();
      await listening(0, 'no subscriber left');
    } finally {
      redis.disconnect();
    }
  });
});

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
    await sleep(200);
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
    await sleep(200);
    expect(waves).toEqual([{ data: 'hello', userId: 'alice' }]);
    expect(presAlice.data('client-wave')).toEqual([]);
  });
});

describe('watchlist', () => {
  it('reports users signing in and out on another node online and offline', async () => {
    const cluster = await bed.start({ apps: [APP] });
    await pool.signedIn(cluster.b, { userId: 'dave' });
    const carol = await pool.signedIn(cluster.a, { userId: 'carol', watchlist: ['dave', 'erin'] });
    // dave is online (on node B) when carol signs in on node A; erin is not.
    await until(() => carol.watchlist.some((e) => e.name === 'online') && carol.watchlist.some((e) => e.name === 'offline'), 'initial watchlist state');
    expect(carol.watchlist).toEqual(expect.arrayContaining([{ name: 'online', user_ids: ['dave'] }, { name: 'offline', user_ids: ['erin'] }]));
    const before = carol.watchlist.length;

    const erin = await pool.signedIn(cluster.b, { userId: 'erin' });
    await until(() => carol.watchlist.length > before, 'erin online');
    expect(carol.watchlist.slice(before)).toEqual([{ name: 'online', user_ids: ['erin'] }]);
    erin.disconnect();
    await until(() => carol.watchlist.length > before + 1, 'erin offline');
    expect(carol.watchlist.slice(before)).toEqual([
      { name: 'online', user_ids: ['erin'] },
      { name: 'offline', user_ids: ['erin'] },
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
    await sleep(200);
    expect(iris.state).toBe('connected');
  });
});
