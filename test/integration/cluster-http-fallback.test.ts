/**
 * HTTP fallback sessions in a cluster: a session on one node is a connection of the cluster
 * like a WebSocket. Events triggered on the other node, client events and presence members
 * cross between a session on node A and a WebSocket client on node B, through Redis. A
 * session stays bound to its address when requests reach it through another node, and a node
 * that cannot read the session directory (Redis away) answers 503, never a second session.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool } from '../helpers/channel-clients.js';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { connectSession, pollFrom, pollUntil, send, sendFrom, sessionBase, type Lines } from '../helpers/fallback-session.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const APP = { id: 'fb-app', key: 'fb-key', secret: 'fb-secret', clientEvents: true };
const bed = heraldClusterBed('fallback');
const pool = new ClientPool(APP);

afterEach(() => pool.disconnectAll());

describe('HTTP fallback sessions in a cluster', () => {
  it('a session on node A gets events triggered on node B, members and client events of a WebSocket client on node B', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const session = sessionBase(cluster.a.baseUrl, APP.key);
    const socketId = await connectSession(session);
    const sdkA = channelsSdk(cluster.a.port, APP);
    const channel = 'presence-fb-cluster';
    const channelData = JSON.stringify({ user_id: 'session-user' });
    const auth = sdkA.authorizeChannel(socketId, channel, { user_id: 'session-user' });
    expect(auth.channel_data).toBe(channelData);
    await send(session, [{ event: 'pusher:subscribe', data: { channel, auth: auth.auth, channel_data: channelData } }]);
    await pollUntil(session, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));

    const bob = await pool.connect(cluster.b, { userId: 'bob' });
    const onB = await bob.subscribe(channel);
    expect(onB.memberIds()).toEqual(['bob', 'session-user']);
    const added = await pollUntil(session, (l) => l.frames.some((f) => f.event === 'pusher_internal:member_added'));
    expect(JSON.parse(added.frames.find((f) => f.event === 'pusher_internal:member_added')!.data as string)).toMatchObject({ user_id: 'bob' });

    await channelsSdk(cluster.b.port, APP).trigger(channel, 'from-b', { n: 1 });
    const got = await pollUntil(session, (l) => l.frames.some((f) => f.event === 'from-b'));
    expect(JSON.parse(got.frames.find((f) => f.event === 'from-b')!.data as string)).toEqual({ n: 1 });

    await send(session, [{ event: 'client-from-session', channel, data: { hi: 'bob' } }]);
    await until(() => onB.data('client-from-session').length === 1, 'bob to get the session client event');
    expect(onB.data('client-from-session')[0]).toEqual({ hi: 'bob' });

    onB.channel.trigger('client-from-bob', { hi: 'session' });
    const fromBob = await pollUntil(session, (l) => l.frames.some((f) => f.event === 'client-from-bob'));
    const frame = fromBob.frames.find((f) => f.event === 'client-from-bob')!;
    expect(frame.user_id).toBe('bob');
    expect(JSON.parse(frame.data as string)).toEqual({ hi: 'session' });

    bob.unsubscribe(channel);
    await pollUntil(session, (l) => l.frames.some((f) => f.event === 'pusher_internal:member_removed'));
  }, 60_000);

  it('without sticky sessions: sends and polls that reach the other node are relayed to the session\'s node', async () => {
    const cluster = await bed.start({ apps: [APP] });
    // The same session path on both nodes; requests alternate between them (round robin).
    const onA = sessionBase(cluster.a.baseUrl, APP.key);
    const onB = onA.replace(cluster.a.baseUrl, cluster.b.baseUrl);
    const bases = [onA, onB];
    let turn = 0;
    const next = (): string => bases[turn++ % 2]!;
    // Opened once, on node A: no poll on node B opens the session again.
    const pollRoundRobin = (done: (l: Lines) => boolean): Promise<Lines> =>
      pollUntil(next, done, (l, before) => {
        if (before.opened) expect(l.opened).toBe(false);
      });
    const first = await pollRoundRobin((l) => l.frames.some((f) => f.event === 'pusher:connection_established'));
    const socketId = (JSON.parse(first.frames.find((f) => f.event === 'pusher:connection_established')!.data as string) as { socket_id: string }).socket_id;

    const channel = 'private-fb-round-robin';
    const auth = channelsSdk(cluster.a.port, APP).authorizeChannel(socketId, channel);
    expect((await send(next(), [{ event: 'pusher:subscribe', data: { channel, auth: auth.auth } }])).status).toBe(204);
    await pollRoundRobin((l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));

    const carol = await pool.connect(cluster.a, { userId: 'carol' });
    const carolChannel = await carol.subscribe(channel);
    for (let i = 0; i < 4; i++) await channelsSdk((i % 2 === 0 ? cluster.a : cluster.b).port, APP).trigger(channel, 'tick', { i });
    const ticks = await pollRoundRobin((l) => l.frames.filter((f) => f.event === 'tick').length === 4);
    expect(ticks.frames.filter((f) => f.event === 'tick').map((f) => (JSON.parse(f.data as string) as { i: number }).i)).toEqual([0, 1, 2, 3]);

    for (let i = 0; i < 4; i++) expect((await send(next(), [{ event: 'client-hop', channel, data: { i } }])).status).toBe(204);
    await until(() => carolChannel.data('client-hop').length === 4, 'carol to get the four client events');
    expect(carolChannel.data('client-hop').map((d) => (d as { i: number }).i).sort()).toEqual([0, 1, 2, 3]);
    expect(cluster.a.stderr + cluster.b.stderr).not.toMatch(/http fallback: .* failed/);
  }, 60_000);

  it("a request from another address through the other node reaches no session of the owner's", async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onA = sessionBase(cluster.a.baseUrl, APP.key);
    const onB = onA.replace(cluster.a.baseUrl, cluster.b.baseUrl);
    const socketId = await connectSession(onA);
    const channel = 'private-fb-bound';
    const auth = channelsSdk(cluster.a.port, APP).authorizeChannel(socketId, channel);
    await send(onA, [{ event: 'pusher:subscribe', data: { channel, auth: auth.auth } }]);
    await pollUntil(onA, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));

    const other = { localAddress: '127.0.0.2' };
    const foreign = await sendFrom(onB, other, [{ event: 'client-as-owner', channel, data: {} }]);
    expect(foreign.status).toBe(404);
    expect(JSON.parse(foreign.text)).toMatchObject({ code: 'FALLBACK_SESSION_NOT_FOUND' });
    // A poll through node B opens a session of its own there; the owner's stays on node A.
    const opened = await pollFrom(onB, other);
    expect(opened.lines.opened).toBe(true);
    expect(opened.lines.frames.filter((f) => f.event !== 'pusher:connection_established')).toEqual([]);
    await channelsSdk(cluster.b.port, APP).trigger(channel, 'for-owner', { n: 1 });
    const got = await pollUntil(onB, (l) => l.frames.some((f) => f.event === 'for-owner'), (l) => expect(l.opened).toBe(false));
    expect(got.frames.some((f) => f.event === 'client-as-owner')).toBe(false);
  }, 60_000);

  it.skipIf(ONE_PROCESS)('a node that cannot read the session directory answers 503 with Retry-After, never a session of its own; the session goes on once Redis is back', async () => {
    const cluster = await bed.start({ apps: [APP], config: { httpFallback: { heartbeatMs: 1000, sessionTimeoutMs: 30_000 } } });
    const onA = sessionBase(cluster.a.baseUrl, APP.key);
    const onB = onA.replace(cluster.a.baseUrl, cluster.b.baseUrl);
    await connectSession(onA);
    const channel = 'fb-outage';
    await send(onA, [{ event: 'pusher:subscribe', data: { channel } }]);
    await pollUntil(onA, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));

    await cluster.killRedis();
    // Node B cannot tell whether a node holds the session: "retry", never a session of its own.
    const refused = await until(async () => {
      const answer = await pollFrom(onB, {});
      expect(answer.lines.opened).toBe(false);
      return answer.status === 503 ? answer : null;
    }, 'node B to answer 503 while Redis is away', 20_000);
    expect(refused.headers['retry-after']).toBe('1');
    expect(JSON.parse(refused.text)).toMatchObject({ code: 'CLUSTER_UNAVAILABLE' });
    const send503 = await sendFrom(onB, {}, []);
    expect(send503.status).toBe(503);
    expect(send503.headers['retry-after']).toBe('1');
    // Node A still serves its session.
    const onNodeA = await pollFrom(onA, {});
    expect(onNodeA.status).toBe(200);
    expect(onNodeA.lines.opened).toBe(false);

    // Redis back, empty: node A records its session again, so node B relays to it rather than open one.
    await cluster.restartRedis();
    const sdkB = channelsSdk(cluster.b.port, APP);
    await until(() => sdkB.get({ path: `/channels/${channel}` }).then(() => true, () => false), 'node B answering from Redis again', 20_000);
    await until(() => channelsSdk(cluster.a.port, APP).trigger(channel, 'after', { n: 2 }).then(() => true, () => false), 'a trigger through node A once Redis is back', 20_000);
    const after = await pollUntil(onB, (l) => l.frames.some((f) => f.event === 'after'), (l) => expect(l.opened).toBe(false));
    expect(JSON.parse(after.frames.find((f) => f.event === 'after')!.data as string)).toEqual({ n: 2 });
  }, 90_000);
});
