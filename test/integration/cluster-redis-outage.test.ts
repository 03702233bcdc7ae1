/**
 * Redis killed and started again on the same port, empty (issue 14, docs/scaling.md "Redis
 * outage"): nodes keep their local sockets; the channel HTTP API answers 503 CLUSTER_UNAVAILABLE
 * (nothing done, retry) rather than a partial delivery; once Redis is back the nodes register
 * what they hold again and cross-node delivery resumes by itself.
 */
import { describe, expect, it } from 'vitest';
import type PusherServer from 'pusher';
import { rawConnection, refusal } from '../helpers/channel-clients.js';
import { deliveryResumes, distinctEvents, eventLabel, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { clusterWebhookBed } from '../helpers/cluster-webhooks.js';
import { flushedBy, sleep, until } from '../helpers/wait.js';

const APP = { id: 'out-app', key: 'out-key', secret: 'out-secret', clientEvents: true };
/** An app with a connection limit: its new connections need Redis to be counted. */
const LIMITED = { id: 'out-limited', key: 'out-limited-key', secret: 'out-limited-secret', maxConnections: 10 };
const setup = clusterWebhookBed('outage', APP);
const { bed, pool } = setup;

/** Labels of the delivered webhook events. */
const hooks = (): string[] => setup.labels();

const count = (labels: string[], label: string): number => labels.filter((l) => l === label).length;

/** Triggers through `sdk` until it is refused (the node noticed the outage); the refusal. */
async function firstRefusal(sdk: PusherServer, channel: string, timeoutMs = 10_000): Promise<{ status: number | undefined; body: Record<string, unknown> }> {
  return until(() => refusal(sdk.trigger(channel, 'probe', 'during outage')).catch(() => null), 'a trigger refused after the outage', timeoutMs);
}

/**
 * Runs `call` until it is not refused with 503 (a node registers again a moment after Redis is
 * back; 503 means nothing was done, retry), for up to `timeoutMs`.
 */
async function retried<T>(call: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  let last: unknown;
  const outcome = await until(
    () =>
      call().then(
        (value) => ({ value }),
        (err: unknown) => {
          last = err;
          return (err as { status?: number }).status === 503 ? null : { err };
        },
      ),
    () => `an answer other than 503 (last: ${String(last)})`,
    timeoutMs,
  );
  if ('err' in outcome) throw outcome.err;
  return outcome.value;
}

describe.skipIf(ONE_PROCESS)('Redis killed and restarted', () => {
  it('nodes keep their sockets, triggers answer 503 CLUSTER_UNAVAILABLE, delivery across nodes resumes by itself', async () => {
    const webhooks = [{ url: setup.receiver.url('/outage'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
    const cluster = await bed.start({
      apps: [{ ...APP, webhooks }, LIMITED],
      config: { webhookDelivery: { batchWindowMs: 50, pageReloadDebounceMs: 300, retryBaseMs: 50 } },
      cluster: { subscriptionWaitMs: 1000 },
    });
    const s1 = await pool.connect(cluster.a, { userId: 'ua' });
    const s2 = await pool.connect(cluster.a, { userId: 'ua2' });
    const sB = await pool.connect(cluster.b, { userId: 'ub' });
    const news1 = await s1.subscribe('out-news');
    const newsB = await sB.subscribe('out-news');
    const chat1 = await s1.subscribe('private-out-chat');
    const chat2 = await s2.subscribe('private-out-chat');
    const presence1 = await s1.subscribe('presence-out');
    const presenceB = await sB.subscribe('presence-out');
    await until(() => presence1.memberIds().length === 2, 'ub seen on node A');
    const sdkA = pool.sdk(cluster.a);
    const sdkB = pool.sdk(cluster.b);
    await sdkA.trigger('out-news', 'before', 1);
    await until(() => newsB.data('before').length === 1, 'cross-node delivery before the outage');
    const socketIds = [s1.socketId, s2.socketId, sB.socketId];
    await until(() => count(hooks(), 'member_added:presence-out:ub') === 1 && count(hooks(), 'channel_occupied:out-news') === 1, 'webhooks before the outage');

    await cluster.killRedis();
    const refused = await firstRefusal(sdkA, 'out-news');
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({ code: 'CLUSTER_UNAVAILABLE', error: expect.any(String) });
    // Refused whole, on either node, for channel queries too.
    await firstRefusal(sdkB, 'out-news');
    expect(await refusal(sdkA.trigger('out-news', 'during', 1))).toMatchObject({ status: 503, body: { code: 'CLUSTER_UNAVAILABLE' } });
    expect(await refusal(sdkB.trigger('out-news', 'during', 2))).toMatchObject({ status: 503, body: { code: 'CLUSTER_UNAVAILABLE' } });
    expect(await refusal(sdkB.get({ path: '/channels' }))).toMatchObject({ status: 503, body: { code: 'CLUSTER_UNAVAILABLE' } });
    // Local sockets stay, and client events between sockets of one node go on.
    chat1.channel.trigger('client-local', { during: 'outage' });
    await until(() => chat2.data('client-local').length === 1, 'client event on node A during the outage');
    expect([s1.state, s2.state, sB.state]).toEqual(['connected', 'connected', 'connected']);
    // New connections of an app with a connection limit are told to come back (4200); new
    // subscriptions wait for Redis, and are refused with 503 once cluster.subscriptionWaitMs
    // (1 s here) has passed (docs/scaling.md).
    const limited = await rawConnection(cluster.b, LIMITED.key);
    expect(limited.first).toMatchObject({ event: 'pusher:error', data: { code: 4200 } });
    expect(await limited.closed).toBe(4200);
    await expect(s2.subscribe('out-late')).rejects.toThrow(/"status":503/);
    // A refused trigger delivered nothing anywhere.
    expect(news1.data('during')).toEqual([]);
    expect(newsB.data('during')).toEqual([]);

    // time: the outage lasts a while (the nodes' Redis calls fail and are retried meanwhile).
    await sleep(500);
    await cluster.restartRedis();
    // Cross-node delivery resumes by itself, both ways: keep triggering until the other node's
    // subscriber has one (a node accepts triggers again once it registered; the other node's
    // subscriber connection may come back a moment later).
    await deliveryResumes(sdkA, 'out-news', newsB, 'resumed-a-to-b');
    await deliveryResumes(sdkB, 'out-news', news1, 'resumed-b-to-a');
    // Then exactly once, both ways.
    await sdkA.trigger('out-news', 'after', 'from A');
    await sdkB.trigger('out-news', 'after', 'from B');
    await until(() => news1.data('after').length === 2 && newsB.data('after').length === 2, 'both ways after the restart');
    // Nothing more (no duplicate) arrives: a marker from each node, sent after, arrives on both after them.
    await flushedBy(
      () => Promise.all([sdkA.trigger('out-news', 'marker', 'A'), sdkB.trigger('out-news', 'marker', 'B')]),
      () => news1.data('marker').length === 2 && newsB.data('marker').length === 2,
      'the markers on both nodes',
    );
    expect(news1.data('after').sort()).toEqual(['from A', 'from B']);
    expect(newsB.data('after').sort()).toEqual(['from A', 'from B']);
    // Presence subscribers saw no one leave or arrive: the members never changed.
    expect(presence1.data('pusher:member_removed')).toEqual([]);
    expect(presenceB.data('pusher:member_removed')).toEqual([]);
    expect(presence1.data('pusher:member_added')).toEqual([expect.objectContaining({ id: 'ub' })]);
    expect(presenceB.data('pusher:member_added')).toEqual([]);
    expect([presence1.memberIds(), presenceB.memberIds()]).toEqual([['ua', 'ub'], ['ua', 'ub']]);
    // The sockets never reconnected, and the state Redis lost was registered again by both nodes.
    expect([s1.socketId, s2.socketId, sB.socketId]).toEqual(socketIds);
    const users = await until(async () => {
      const ids = ((await (await sdkB.get({ path: '/channels/presence-out/users' })).json()) as { users: { id: string }[] }).users.map((u) => u.id).sort();
      return ids.length === 2 && ids;
    }, 'two users listed on node B');
    expect(users).toEqual(['ua', 'ub']);
    expect(await (await retried(() => sdkA.get({ path: '/channels', params: { filter_by_prefix: 'out-' } }))).json()).toEqual({ channels: { 'out-news': {} } });
    // Redis came back empty: each channel is occupied again, each member added again, once for
    // the cluster (docs/scaling.md), though both nodes registered their subscribers; nothing left.
    await until(() => count(hooks(), 'channel_occupied:out-news') >= 2 && count(hooks(), 'member_added:presence-out:ub') >= 2, 'webhooks of the re-registration');
    // time: webhooks go out through either node's shards, in no order between them: a duplicate would come within a second.
    await sleep(1000);
    const labels = hooks();
    for (const label of ['channel_occupied:out-news', 'channel_occupied:private-out-chat', 'channel_occupied:presence-out', 'member_added:presence-out:ua', 'member_added:presence-out:ub']) {
      expect(count(labels, label), label).toBe(2);
    }
    expect(labels.filter((l) => l.startsWith('channel_vacated') || l.startsWith('member_removed'))).toEqual([]);
  });

  it('a subscription made while Redis is away, or as soon as it listens again, waits for it and succeeds; events triggered after reach it', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const onA = await pool.connect(cluster.a, { userId: 'wa' });
    const onB = await pool.connect(cluster.b, { userId: 'wb' });
    const sdkA = pool.sdk(cluster.a);
    const sdkB = pool.sdk(cluster.b);

    await cluster.killRedis();
    await firstRefusal(sdkA, 'back-news');
    await firstRefusal(sdkB, 'back-news');
    // pusher-js does not retry a subscription error by itself: these wait for Redis.
    const news = onA.subscribe('back-news', 30_000);
    const presence = onB.subscribe('presence-back', 30_000);
    await cluster.restartRedis();
    // A client that connects and subscribes as soon as Redis listens again, before the nodes
    // have registered again.
    const late = await pool.connect(cluster.b, { userId: 'wl' });
    const lateNews = await late.subscribe('back-news', 30_000);
    const [newsA, presenceB] = await Promise.all([news, presence]);
    expect(presenceB.memberIds()).toEqual(['wb']);

    // Events triggered afterwards reach them, across nodes (a trigger is refused, nothing done,
    // until the node has registered again).
    await retried(() => sdkB.trigger('back-news', 'after', 'from B'));
    await retried(() => sdkA.trigger('presence-back', 'after', 'from A'));
    await until(() => newsA.data('after').length === 1 && lateNews.data('after').length === 1, 'the event after Redis returned, on both nodes');
    await until(() => presenceB.data('after').length === 1, 'the presence event from the other node');
    expect([newsA.data('after'), lateNews.data('after'), presenceB.data('after')]).toEqual([['from B'], ['from B'], ['from A']]);
  }, 60_000);

  it('members and channels that left while Redis was away and came back empty are reported once for the cluster (member_removed, channel_vacated, frames)', async () => {
    const webhooks = [{ url: setup.receiver.url('/gap'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }];
    const cluster = await bed.start({ apps: [{ ...APP, webhooks }], config: { webhookDelivery: { batchWindowMs: 50, pageReloadDebounceMs: 300, retryBaseMs: 50 } } });
    // Node A: five users who leave during the gap (on presence-gap, and alone on presence-gone
    // and gap-news), one who stays, and one who leaves A but stays connected on B.
    const leavers = await Promise.all(['g1', 'g2', 'g3', 'g4', 'g5'].map((userId) => pool.connect(cluster.a, { userId })));
    const stayer = await pool.connect(cluster.a, { userId: 'gstay' });
    const sharedOnA = await pool.connect(cluster.a, { userId: 'gshared' });
    const watcherB = await pool.connect(cluster.b, { userId: 'gb' });
    const sharedOnB = await pool.connect(cluster.b, { userId: 'gshared' });
    for (const c of [...leavers, stayer, sharedOnA]) await c.subscribe('presence-gap');
    for (const c of leavers) await c.subscribe('presence-gone');
    await leavers[0]!.subscribe('gap-news');
    await sharedOnB.subscribe('presence-gap');
    const seenOnB = await watcherB.subscribe('presence-gap');
    await until(() => seenOnB.memberIds().length === 8, 'every member seen on node B');
    const labels = (): string[] => distinctEvents(setup.receiver.deliveredEvents()).map(eventLabel).filter((l) => l.includes('gap') || l.includes('gone'));
    await until(() => count(labels(), 'member_added:presence-gap:gb') === 1 && count(labels(), 'channel_occupied:gap-news') === 1, 'webhooks before the outage');
    const before = labels().length;

    await cluster.killRedis();
    await firstRefusal(pool.sdk(cluster.a), 'gap-news');
    for (const c of [...leavers, sharedOnA]) c.disconnect();
    await Promise.all([...leavers, sharedOnA].map((c) => c.gone()));
    // time: the outage lasts a while after the leaves.
    await sleep(500);
    await cluster.restartRedis();

    const left = ['g1', 'g2', 'g3', 'g4', 'g5'];
    const due = [...left.map((u) => `member_removed:presence-gap:${u}`), ...left.map((u) => `member_removed:presence-gone:${u}`), 'channel_vacated:presence-gone', 'channel_vacated:gap-news'];
    await until(() => due.every((l) => labels().includes(l)), `the leaves of the gap: ${due.join(', ')}`, 30_000);
    // The members still on the channel see them go, on either node.
    await until(() => seenOnB.memberIds().join() === 'gb,gshared,gstay', 'node B subscriber seeing the leavers go', 10_000);
    // time: nobody else is reported gone within two reaper periods.
    await sleep(cluster.nodeTimeoutMs * 2);
    const after = labels().slice(before);
    for (const label of due) expect(count(after, label), label).toBe(1);
    // Nobody still connected somewhere is reported gone; presence-gap is still occupied.
    expect(after.filter((l) => /member_removed:presence-gap:(gb|gstay|gshared)$/.test(l) || l === 'channel_vacated:presence-gap')).toEqual([]);
    expect(seenOnB.data('pusher:member_removed').map((m) => (m as { id: string }).id).sort()).toEqual(left);
    const users = await until(async () => {
      const ids = ((await (await pool.sdk(cluster.b).get({ path: '/channels/presence-gap/users' })).json()) as { users: { id: string }[] }).users.map((u) => u.id).sort();
      return ids.length === 3 && ids;
    }, 'three users listed on node B');
    expect(users).toEqual(['gb', 'gshared', 'gstay']);
  }, 90_000);

  it('Redis hung (SIGSTOP, connections left open): triggers are refused within seconds instead of waiting, and everything resumes with nobody leaving', async () => {
    const cluster = await bed.start({ apps: [APP] });
    const s1 = await pool.connect(cluster.a, { userId: 'ha' });
    const sB = await pool.connect(cluster.b, { userId: 'hb' });
    const news1 = await s1.subscribe('hung-news');
    const newsB = await sB.subscribe('hung-news');
    const presence1 = await s1.subscribe('presence-hung');
    const presenceB = await sB.subscribe('presence-hung');
    await until(() => presence1.memberIds().length === 2 && presenceB.memberIds().length === 2, 'both members on both nodes');
    const sdkA = pool.sdk(cluster.a);
    const sdkB = pool.sdk(cluster.b);

    bed.redis.pause();
    try {
      // The first trigger waits for Redis, until the node gives up on the silent connection
      // (replyTimeoutMs: 2 s here), then is refused; the node's own subscriber still got it.
      const started = Date.now();
      const refused = await refusal(sdkA.trigger('hung-news', 'during', 1));
      const waited = Date.now() - started;
      expect(refused).toMatchObject({ status: 503, body: { code: 'CLUSTER_UNAVAILABLE' } });
      expect(waited).toBeLessThan(8_000);
      await until(() => news1.data('during').length === 1, 'the trigger node delivering to its own subscriber');
      // The next ones are refused at once, on both nodes, and deliver nothing.
      const next = Date.now();
      expect(await refusal(sdkA.trigger('hung-news', 'later', 1))).toMatchObject({ status: 503, body: { code: 'CLUSTER_UNAVAILABLE' } });
      expect(Date.now() - next).toBeLessThan(1_000);
      await firstRefusal(sdkB, 'hung-news');
      expect(news1.data('later')).toEqual([]);
      expect(newsB.data('later')).toEqual([]);
    } finally {
      bed.redis.resume();
    }
    await deliveryResumes(sdkA, 'hung-news', newsB, 'resumed-a-to-b');
    await deliveryResumes(sdkB, 'hung-news', news1, 'resumed-b-to-a');
    // time: nobody is reaped within two reaper periods.
    await sleep(cluster.nodeTimeoutMs * 2);
    // The nodes were alive: nobody was reaped, no member left.
    expect(presence1.data('pusher:member_removed')).toEqual([]);
    expect(presenceB.data('pusher:member_removed')).toEqual([]);
    expect([presence1.memberIds(), presenceB.memberIds()]).toEqual([['ha', 'hb'], ['ha', 'hb']]);
  }, 60_000);
});
