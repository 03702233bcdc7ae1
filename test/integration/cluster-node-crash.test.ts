/**
 * A Herald node of a cluster killed with SIGKILL (issue 14): the survivor reaps it within
 * nodeTimeoutMs plus a few seconds: its presence members get member_removed on the survivor's
 * subscribers, channels only it held are vacated (one webhook each), and C3 / C4 / C6 keep no
 * ghost. A node stopped gracefully leaves at once.
 */
import { describe, expect, it } from 'vitest';
import type PusherServer from 'pusher';
import { deliveryResumes, ONE_PROCESS } from '../helpers/herald-cluster.js';
import { clusterWebhookBed } from '../helpers/cluster-webhooks.js';
import { sleep, until } from '../helpers/wait.js';

const CREDS = { id: 'crash-app', key: 'crash-key', secret: 'crash-secret' };
const NODE_TIMEOUT_MS = 2000;
/** "nodeTimeoutMs plus a few seconds": reaper period, the reap itself, a loaded machine. */
const REAP_BOUND_MS = NODE_TIMEOUT_MS + 5000;
/** Bound on a woken node's re-registration being reported (its timers and sockets catch up first on a loaded host). */
const WAKE_BOUND_MS = NODE_TIMEOUT_MS + 12_000;

const setup = clusterWebhookBed('crash', CREDS);
const { bed, pool } = setup;

function config(pageReloadDebounceMs = 300): { apps: Record<string, unknown>[]; config: Record<string, unknown> } {
  return {
    apps: [{ ...CREDS, subscriptionCount: true, userAuthentication: true, webhooks: [{ url: setup.receiver.url('/crash'), events: ['channel_occupied', 'channel_vacated', 'member_added', 'member_removed'] }] }],
    config: { webhookDelivery: { batchWindowMs: 50, pageReloadDebounceMs, retryBaseMs: 50, maxAttempts: 30, timeoutMs: 2000 } },
  };
}

/** Labels of delivered webhook events on channels containing `tag`. */
const hooks = setup.labels;

async function json(sdk: PusherServer, path: string, params?: Record<string, string>): Promise<unknown> {
  return (await sdk.get({ path, ...(params && { params }) })).json();
}

describe.skipIf(ONE_PROCESS)('a node killed with SIGKILL', () => {
  it('is reaped by the survivors: members removed on their subscribers, channels vacated once, no ghost in C3 / C4 / C6', async () => {
    const cluster = await bed.start({ ...config(), nodes: 3, nodeTimeoutMs: NODE_TIMEOUT_MS });
    const vicB = await pool.signedIn(cluster.b, { userId: 'vic' });
    const watcher = await pool.signedIn(cluster.a, { userId: 'watcher', watchlist: ['vic'] });
    const watcherC = await pool.connect(cluster.c, { userId: 'watcher-c' });
    const bothA = await pool.connect(cluster.a, { userId: 'both' });
    const bothB = await pool.connect(cluster.b, { userId: 'both' });
    const room = await watcher.subscribe('presence-k1');
    const roomC = await watcherC.subscribe('presence-k1');
    await bothA.subscribe('presence-k1');
    await vicB.subscribe('presence-k1');
    await bothB.subscribe('presence-k1');
    const shared = await watcher.subscribe('k1-shared');
    await vicB.subscribe('k1-shared');
    await vicB.subscribe('k1-only-b');
    const sdkA = pool.sdk(cluster.a);
    await until(() => hooks('k1').includes('channel_occupied:k1-only-b') && hooks('k1').includes('member_added:presence-k1:vic'), 'webhooks before the kill');
    // 30 s: the suite may run this beside the 10,000-client storm file (it timed out at 10 s in
    // two of five full runs; the cause was not caught, the message below says what each node
    // saw). A frame lost for good still fails it.
    await until(() => room.memberIds().length === 4 && roomC.memberIds().length === 4, 'four members seen on nodes A and C', 30_000).catch((err: unknown) => {
      throw new Error(`${String(err)}: A ${JSON.stringify(room.memberIds())} C ${JSON.stringify(roomC.memberIds())} added A ${JSON.stringify(room.data('pusher:member_added'))} C ${JSON.stringify(roomC.data('pusher:member_added'))}`);
    });
    expect(room.memberIds()).toEqual(['both', 'vic', 'watcher', 'watcher-c']);
    expect(await json(sdkA, '/channels/k1-shared', { info: 'subscription_count' })).toEqual({ occupied: true, subscription_count: 2 });
    // The count of 1 (the watcher alone) may arrive first: wait for the latest to be 2.
    const lastCount = (): unknown => shared.data('pusher:subscription_count').at(-1);
    await until(() => JSON.stringify(lastCount()) === '{"subscription_count":2}' && watcher.watchlist.length > 0, 'count and watchlist before the kill');
    expect(lastCount()).toEqual({ subscription_count: 2 });
    expect(watcher.watchlist).toEqual([{ name: 'online', user_ids: ['vic'] }]);

    const killedAt = Date.now();
    await cluster.killNode(cluster.b);
    vicB.disconnect();
    bothB.disconnect();
    await until(() => room.data('pusher:member_removed').length >= 1 && roomC.data('pusher:member_removed').length >= 1, 'member_removed for vic on nodes A and C', REAP_BOUND_MS);
    await until(() => hooks('k1').includes('channel_vacated:k1-only-b'), 'channel_vacated webhook for k1-only-b', REAP_BOUND_MS);
    expect(Date.now() - killedAt, 'reaped within nodeTimeoutMs plus a few seconds').toBeLessThan(REAP_BOUND_MS + 1000);
    // The rest of what the reap reports (it may come in more than one piece): vic offline, the
    // count without vic, the member_removed webhook.
    await until(
      () => watcher.watchlist.length >= 2 && JSON.stringify(lastCount()) === '{"subscription_count":1}' && hooks('k1').includes('member_removed:presence-k1:vic'),
      () => `the rest of the reap (watchlist ${JSON.stringify(watcher.watchlist)}, count ${JSON.stringify(lastCount())}, webhooks ${JSON.stringify(hooks('k1'))})`,
      REAP_BOUND_MS,
    );
    // time: more reaper passes on both survivors (every nodeTimeoutMs / 2): nothing more may come of them.
    await sleep(NODE_TIMEOUT_MS);
    await setup.markersDelivered([cluster.a, cluster.c], 'reaped');
    expect(room.data('pusher:member_removed')).toEqual([expect.objectContaining({ id: 'vic' })]);
    expect(roomC.data('pusher:member_removed')).toEqual([expect.objectContaining({ id: 'vic' })]);
    expect(room.memberIds()).toEqual(['both', 'watcher', 'watcher-c']);
    // The reaped node's signed-in user goes offline; its subscription leaves the count.
    expect(watcher.watchlist).toEqual([{ name: 'online', user_ids: ['vic'] }, { name: 'offline', user_ids: ['vic'] }]);
    expect(shared.data('pusher:subscription_count').at(-1)).toEqual({ subscription_count: 1 });
    const after = hooks('k1').filter((l) => l.startsWith('member_removed') || l.startsWith('channel_vacated'));
    expect(after.sort()).toEqual(['channel_vacated:k1-only-b', 'member_removed:presence-k1:vic']);

    for (const node of [cluster.a, cluster.c]) {
      const sdk = pool.sdk(node);
      const users = (await json(sdk, '/channels/presence-k1/users')) as { users: { id: string }[] };
      expect(users.users.map((u) => u.id).sort()).toEqual(['both', 'watcher', 'watcher-c']);
      expect(await json(sdk, '/channels/presence-k1', { info: 'user_count' })).toEqual({ occupied: true, user_count: 3 });
      expect(await json(sdk, '/channels', { filter_by_prefix: 'k1-' })).toEqual({ channels: { 'k1-shared': {} } });
      expect(await json(sdk, '/channels/k1-shared', { info: 'subscription_count' })).toEqual({ occupied: true, subscription_count: 1 });
      expect(await json(sdk, '/channels/k1-only-b')).toEqual({ occupied: false });
    }
  }, 90_000);
});

/**
 * Node B stalled (SIGSTOP: a VM freeze, a swap storm) past nodeTimeoutMs, then woken: node A
 * reaps it meanwhile; awake, B registers what it holds again. `frames`: also check what the
 * presence subscribers of both nodes were told.
 */
async function stallNodeB(frames: boolean): Promise<void> {
  // Channel names of their own per variant: the webhook log is shared by the file's tests.
  const k = frames ? 'k4' : 'k3';
  const cluster = await bed.start({ ...config(), nodeTimeoutMs: NODE_TIMEOUT_MS });
  const watcher = await pool.connect(cluster.a, { userId: 'watcher' });
  const room = await watcher.subscribe(`presence-${k}`);
  const feedA = await watcher.subscribe(`${k}-feed`);
  const sleeper = await pool.connect(cluster.b, { userId: 'sleeper' });
  const roomB = await sleeper.subscribe(`presence-${k}`);
  const feedB = await sleeper.subscribe(`${k}-feed`);
  await sleeper.subscribe(`${k}-only-b`);
  await until(() => room.memberIds().length === 2 && hooks(k).includes(`channel_occupied:${k}-only-b`), 'sleeper seen on node A');

  cluster.b.signal('SIGSTOP');
  try {
    await until(() => room.data('pusher:member_removed').length === 1, 'the stalled node reaped', REAP_BOUND_MS);
    await until(() => hooks(k).includes(`channel_vacated:${k}-only-b`), `${k}-only-b vacated`, REAP_BOUND_MS);
    expect(await json(pool.sdk(cluster.a), `/channels/presence-${k}/users`)).toEqual({ users: [{ id: 'watcher' }] });
  } finally {
    cluster.b.signal('SIGCONT');
  }
  // Awake: node B finds its session gone and registers what it holds again, reported once.
  await until(() => hooks(k).filter((l) => l === `channel_occupied:${k}-only-b`).length >= 2, `${k}-only-b occupied again`, WAKE_BOUND_MS);
  await until(() => hooks(k).filter((l) => l === `member_added:presence-${k}:sleeper`).length >= 2, 'sleeper added again', WAKE_BOUND_MS);
  for (const node of [cluster.a, cluster.b]) {
    const users = await until(async () => {
      const ids = ((await json(pool.sdk(node), `/channels/presence-${k}/users`)) as { users: { id: string }[] }).users.map((u) => u.id).sort();
      return ids.length === 2 && ids;
    }, `two users listed on port ${node.port}`);
    expect(users, `C6 on port ${node.port}`).toEqual(['sleeper', 'watcher']);
  }
  expect(sleeper.state).toBe('connected');
  // Delivery both ways (node B may answer 503 for a moment while it registers).
  await pool.sdk(cluster.a).trigger(`${k}-feed`, 'from-a', 1);
  await until(() => feedB.data('from-a').length === 1, 'node A to the woken node B');
  await deliveryResumes(pool.sdk(cluster.b), `${k}-feed`, feedA, 'from-b');
  expect(feedA.data('from-b').length).toBeGreaterThan(0);
  // Both nodes decide one more webhook after the re-registration: a duplicate of it would be before.
  await setup.markersDelivered([cluster.a, cluster.b], frames ? 'woken-frames' : 'woken');
  expect(hooks(k).filter((l) => l === `member_added:presence-${k}:sleeper`)).toHaveLength(2);
  expect(hooks(k).filter((l) => l === `channel_occupied:${k}-only-b`)).toHaveLength(2);
  if (!frames) return;
  // What the clients were told matches C6: watcher saw sleeper leave and come back; sleeper's
  // own connection never saw itself leave (or saw it come back). The frames of the
  // re-registration may come after its webhooks.
  const told = () => JSON.stringify([room.memberIds(), roomB.memberIds()]);
  await until(() => told() === JSON.stringify([['sleeper', 'watcher'], ['sleeper', 'watcher']]), () => `both subscribers told sleeper is back (${told()})`, WAKE_BOUND_MS).catch(() => undefined);
  expect(room.memberIds()).toEqual(['sleeper', 'watcher']);
  expect(roomB.memberIds()).toEqual(['sleeper', 'watcher']);
}

describe.skipIf(ONE_PROCESS)('a node stalled (SIGSTOP) longer than nodeTimeoutMs', () => {
  it('is reaped, then on waking registers again (webhooks once, C6 whole again) and delivery both ways resumes', async () => {
    await stallNodeB(false);
  });

  // A registration's member_added goes out as a frame too (with the user_info the node holds):
  // the watcher on node A gets sleeper back, and sleeper's own connection, which heard the
  // reaper's member_removed once awake, is told it is back.
  it('its members come back for the presence subscribers of every node too', async () => {
    await stallNodeB(true);
  });
});

/**
 * A graceful stop (SIGTERM) of node B, whose only subscriber leaves `<tag>-only-b` and
 * `presence-<tag>` as the node closes its sockets (4200): node A sees the member go at once, and the
 * leave webhooks B decided are in the shared outbox before B exits and arrive with B gone (a node
 * may not come back: a cluster scaled down), once: not again when B starts again.
 * Each test has its own tag: the webhook receiver is shared by the file.
 */
async function stopNodeB(pageReloadDebounceMs: number, tag: string): Promise<void> {
  const cluster = await bed.start({ ...config(pageReloadDebounceMs), nodeTimeoutMs: 30_000 });
  const watcher = await pool.connect(cluster.a, { userId: 'watcher' });
  const room = await watcher.subscribe(`presence-${tag}`);
  const leaver = await pool.connect(cluster.b, { userId: 'leaver' });
  await leaver.subscribe(`presence-${tag}`);
  await leaver.subscribe(`${tag}-only-b`);
  await until(() => room.data('pusher:member_added').length === 1, 'leaver added on node A');
  await until(() => hooks(tag).includes(`channel_occupied:${tag}-only-b`) && hooks(tag).includes(`member_added:presence-${tag}:leaver`), 'webhooks before the stop');
  await cluster.b.stop('SIGTERM');
  leaver.disconnect();
  await until(() => room.data('pusher:member_removed').length === 1, 'member_removed on node A', 8000);
  const sdkA = pool.sdk(cluster.a);
  expect(await json(sdkA, `/channels/presence-${tag}/users`)).toEqual({ users: [{ id: 'watcher' }] });
  expect(await json(sdkA, '/channels', { filter_by_prefix: `${tag}-` })).toEqual({ channels: {} });
  const leaveHooks = (): string[] => hooks(tag).filter((l) => !l.startsWith('channel_occupied') && !l.startsWith('member_added')).sort();
  // B has exited: what it decided is in the shared outbox and arrives, with B not restarted.
  const decided = [`channel_vacated:${tag}-only-b`, `member_removed:presence-${tag}:leaver`];
  await until(() => leaveHooks().length >= 2, `leave webhooks ${decided.join(', ')} with B gone`, 10_000);
  expect(leaveHooks()).toEqual(decided);
  await cluster.b.restart();
  // time: a leave debounce passes after B's restart (a held leave sent again would be released by then).
  await sleep(pageReloadDebounceMs + 1000);
  await setup.markersDelivered([cluster.a, cluster.b], `restarted-${pageReloadDebounceMs}`);
  expect(leaveHooks()).toEqual([`channel_vacated:${tag}-only-b`, `member_removed:presence-${tag}:leaver`]);
}

describe.skipIf(ONE_PROCESS)('a node stopped gracefully', () => {
  it('leaves at once (members removed long before nodeTimeoutMs, no ghost); its leave webhooks are sent once, before it exits', async () => {
    await stopNodeB(0, 'k2');
  });

  // With a leave debounce the leaves of a stopping node's sockets are held in Redis, and the
  // other node releases them when their debounce is over.
  it('with a leave debounce, its held leave webhooks are not lost either', async () => {
    await stopNodeB(300, 'k5');
  });
});
