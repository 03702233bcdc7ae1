/**
 * A shard worker crashing under the built server (HERALD_TEST_HOOKS=1 and the test-only
 * `POST /debug/shards/:n/crash`): the requests the worker held answer 500 at once (not after
 * the request timeout), the process keeps serving, the shard comes back in /health, acknowledged
 * device writes are still there, and the channel state the worker kept in memory (subscribers,
 * presence members with their user_info) is restored from the connected pusher-js clients.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import PusherServer from 'pusher';
import { channelShardFor, deviceShardFor } from '../../src/shards/hash.js';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { channelsSdk, pusherJsClient, type PusherJsClient as Pusher } from '../helpers/sdk-clients.js';
import { call, committedOnShards, DeviceApi, tokenFor } from './device-api-helpers.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { flushedBy, sleep, until } from '../helpers/wait.js';

const APP = { id: 'crash-app', key: 'crash-key', secret: 'crash-secret', subscriptionCount: true };
const SHARDS = 2;
/** The shard made to crash; the channels and some devices of the test live on it. */
const CRASHED = 0;
/** Far above what a crash may take: an answer near it would mean a hang, not a clean failure. */
const REQUEST_TIMEOUT_MS = 20_000;
/** How long the dying worker blocks before it exits, holding what is sent to it meanwhile. */
const STALL_MS = 800;

/** The first name `prefix-<n>` that lives on the crashed shard. */
function channelOnCrashedShard(prefix: string): string {
  for (let n = 0; ; n++) {
    const name = `${prefix}-${n}`;
    if (channelShardFor(APP.id, name, SHARDS) === CRASHED) return name;
  }
}
const PRESENCE = channelOnCrashedShard('presence-lobby');
const PUBLIC = channelOnCrashedShard('news');

let herald: HeraldProcess;
const clients: Pusher[] = [];

beforeAll(async () => {
  herald = await startHerald({
    shards: SHARDS,
    env: { HERALD_TEST_HOOKS: '1' },
    config: { apps: [APP], push: [{ ...DEFAULT_PUSH, web: null }], shardRequestTimeoutMs: REQUEST_TIMEOUT_MS },
  });
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await herald?.dispose();
});

function sdk(): PusherServer {
  return channelsSdk(herald.port, APP);
}

/** A pusher-js client whose presence subscriptions are signed for `member`. */
function client(member?: { user_id: string; user_info: Record<string, unknown> }): Pusher {
  const signer = sdk();
  const pusher = pusherJsClient(herald.port, APP.key, {
    channelAuthorization: {
      endpoint: '/unused',
      transport: 'ajax',
      customHandler: ({ socketId, channelName }: { socketId: string; channelName: string }, cb: (err: Error | null, data: PusherServer.ChannelAuthResponse) => void) =>
        cb(null, signer.authorizeChannel(socketId, channelName, member)),
    },
  });
  clients.push(pusher);
  return pusher;
}

/** The next emission of `event` on a pusher-js channel (bound now, so call it before the cause). */
async function next<T = unknown>(channel: { bind(e: string, cb: (d: T) => void): unknown; unbind(e: string, cb: (d: T) => void): unknown }, event: string, ms = 3000): Promise<T> {
  const got: T[] = [];
  const cb = (data: T): void => void got.push(data);
  channel.bind(event, cb);
  try {
    const [first] = await until(() => got.length > 0 && got, event, ms);
    return first!;
  } finally {
    channel.unbind(event, cb);
  }
}

async function subscribe(pusher: Pusher, name: string) {
  const channel = pusher.subscribe(name);
  await next(channel, 'pusher:subscription_succeeded', 5000);
  return channel;
}

/** Status and JSON body of a signed channel API GET; SDK errors (4xx/5xx) become their status. */
/**
 * GET /health once it answers 200: every shard answers a ping, so a crashed shard's new worker
 * is up (under CPU load its start can take longer than the 2 s a single /health waits).
 */
async function healthy(baseUrl: string, timeoutMs = 20_000): ReturnType<typeof call> {
  let last: Awaited<ReturnType<typeof call>> | undefined;
  return until(
    async () => {
      last = await call(baseUrl, 'GET', '/health');
      return last.status === 200 && last;
    },
    () => `GET /health to answer 200 (last: ${JSON.stringify(last)})`,
    timeoutMs,
  );
}

async function channelGet(path: string, params?: Record<string, string>): Promise<{ status: number; body: unknown }> {
  try {
    const res = await sdk().get(params ? { path, params } : { path });
    return { status: res.status, body: await res.json() };
  } catch (err) {
    const e = err as { status?: number; body?: string };
    if (e.status === undefined) throw err;
    return { status: e.status, body: e.body };
  }
}

/** The channel state the test expects back after the crash. */
async function channelState() {
  const [users, presence, news] = await Promise.all([
    channelGet(`/channels/${PRESENCE}/users`),
    channelGet(`/channels/${PRESENCE}`, { info: 'user_count' }),
    channelGet(`/channels/${PUBLIC}`, { info: 'subscription_count' }),
  ]);
  // The users endpoint promises no order; with several front-end threads the restored roster's
  // order is the order the threads re-announced their sockets in.
  const byId = (a: { id: string }, b: { id: string }) => a.id.localeCompare(b.id);
  const listed = users.body as { users?: { id: string }[] };
  const roster = listed?.users ? { ...listed, users: [...listed.users].sort(byId) } : listed;
  return { users: roster, presence: presence.body, news: news.body };
}

describe('a crashed shard worker', () => {
  it('fails what it held with a quick 500, is replaced, keeps the data and gets its channel state back', async () => {
    // Devices on both shards, acknowledged (200) before the crash.
    const api = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
    const devices: { id: string; shard: number }[] = [];
    for (let n = 0; n < 30 && (devices.filter((d) => d.shard === CRASHED).length < 2 || devices.length < 4); n++) {
      const id = await api.registerOk('fcm', tokenFor('fcm', `crash-${n}`));
      expect((await api.addInterest('fcm', id, 'before-crash')).status).toBe(200);
      devices.push({ id, shard: deviceShardFor(id, SHARDS) });
    }
    const onCrashed = devices.find((d) => d.shard === CRASHED)!;
    expect(onCrashed).toBeDefined();

    // Two presence members with user_info, three subscribers of a public channel.
    const alice = client({ user_id: 'alice', user_info: { name: 'Alice' } });
    const bob = client({ user_id: 'bob', user_info: { name: 'Bob' } });
    const carol = client();
    const alicePresence = await subscribe(alice, PRESENCE);
    await subscribe(bob, PRESENCE);
    const news = await Promise.all([subscribe(alice, PUBLIC), subscribe(bob, PUBLIC), subscribe(carol, PUBLIC)]);
    const expected = {
      users: { users: [{ id: 'alice' }, { id: 'bob' }] },
      presence: { occupied: true, user_count: 2 },
      news: { occupied: true, subscription_count: 3 },
    };
    expect(await channelState()).toEqual(expected);

    // The crash: the worker blocks for STALL_MS, then exits. Requests sent meanwhile are held by it.
    const started = Date.now();
    const crash = call(herald.baseUrl, 'POST', `/debug/shards/${CRASHED}/crash?stall_ms=${STALL_MS}`, { noContentType: true });
    // time: the crash request reaches the worker, which then blocks for STALL_MS: the next two are sent within the stall.
    await sleep(150);
    const heldInfo = channelGet(`/channels/${PRESENCE}`, { info: 'user_count' });
    const heldDevice = api.get('fcm', onCrashed.id);
    const crashed = await crash;
    const crashMs = Date.now() - started;
    expect(crashed.status).toBe(500);
    expect(crashed.body).toMatchObject({ error: expect.any(String) });
    expect((await heldInfo).status).toBe(500);
    const device = await heldDevice;
    expect(device.status).toBe(500);
    expect(device.body).toEqual({ error: expect.any(String), description: expect.any(String) });
    // Quick: the stall plus a little, nowhere near the request timeout.
    expect(crashMs).toBeLessThan(STALL_MS + 2000);
    expect(Date.now() - started).toBeLessThan(STALL_MS + 3000);

    // The process lives on and the shard is back.
    expect(herald.child?.exitCode).toBeNull();
    const health = await healthy(herald.baseUrl);
    expect(health.status).toBe(200);
    expect(health.body.shards.map((s: { shard: number }) => s.shard)).toEqual([0, 1]);
    // The crashed shard's worker is new: its uptime is shorter than the time since the crash began.
    expect(health.body.shards[CRASHED].uptimeMs).toBeLessThan(Date.now() - started - STALL_MS / 2);

    // Acknowledged writes survived, on both shards.
    for (const d of devices) {
      const got = await api.get('fcm', d.id);
      expect(got.status, d.id).toBe(200);
      expect(await api.allInterests('fcm', d.id)).toEqual(['before-crash']);
    }

    // Channel state is restored from the connected sockets within a second or two.
    let state: unknown;
    await until(
      async () => {
        state = await channelState();
        return JSON.stringify(state) === JSON.stringify(expected);
      },
      () => `the channel state restored (last: ${JSON.stringify(state)})`,
      2000,
    );
    expect(state).toEqual(expected);
    const listed = await channelGet('/channels', { filter_by_prefix: 'presence-', info: 'user_count' });
    expect(listed.body).toEqual({ channels: { [PRESENCE]: { user_count: 2 } } });

    // Events still reach every subscriber.
    const received = news.map((ch) => next<{ n: number }>(ch, 'after-crash'));
    const presenceEvent = next<{ n: number }>(alicePresence, 'after-crash');
    await sdk().trigger([PUBLIC, PRESENCE], 'after-crash', { n: 1 });
    expect(await Promise.all(received)).toEqual([{ n: 1 }, { n: 1 }, { n: 1 }]);
    expect(await presenceEvent).toEqual({ n: 1 });

    // The restored member leaves for real: the others are told, and the shard agrees.
    const removed = next<{ id: string }>(alicePresence, 'pusher:member_removed');
    bob.disconnect();
    expect((await removed).id).toBe('bob');
    expect((await channelGet(`/channels/${PRESENCE}/users`)).body).toEqual({ users: [{ id: 'alice' }] });
    expect(herald.child?.exitCode).toBeNull();
  }, 30_000);

  it('refuses bad crash requests without crashing anything', async () => {
    expect((await call(herald.baseUrl, 'POST', '/debug/shards/9/crash', { noContentType: true })).status).toBe(400);
    expect((await call(herald.baseUrl, 'POST', `/debug/shards/${CRASHED}/crash?stall_ms=-1`, { noContentType: true })).status).toBe(400);
    expect((await call(herald.baseUrl, 'GET', '/health')).status).toBe(200);
  });

  it('has no crash route without HERALD_TEST_HOOKS=1', async () => {
    const plain = await startHerald({ shards: 1 });
    try {
      const res = await call(plain.baseUrl, 'POST', '/debug/shards/0/crash', { noContentType: true });
      expect(res.status).toBe(404);
      expect((await call(plain.baseUrl, 'GET', '/health')).status).toBe(200);
    } finally {
      await plain.dispose();
    }
  });
});

describe('a crashed shard worker of an app with webhooks', () => {
  const HOOK_APP = { id: 'crash-hook-app', key: 'crash-hook-key', secret: 'crash-hook-secret' };
  const LEAVE_DEBOUNCE_MS = 400;
  let receiver: WebhookReceiver;
  let hooked: HeraldProcess;
  const hookClients: Pusher[] = [];

  beforeAll(async () => {
    receiver = await WebhookReceiver.start();
    hooked = await startHerald({
      shards: SHARDS,
      env: { HERALD_TEST_HOOKS: '1' },
      config: {
        apps: [{ ...HOOK_APP, webhooks: [{ url: receiver.url('/hook') }] }],
        webhookDelivery: { batchWindowMs: 20, pageReloadDebounceMs: LEAVE_DEBOUNCE_MS, retryBaseMs: 50 },
      },
    });
  });
  afterAll(async () => {
    for (const c of hookClients) c.disconnect();
    await hooked?.dispose();
    await receiver?.close();
  });

  function onCrashedShard(prefix: string): string {
    for (let n = 0; ; n++) {
      if (channelShardFor(HOOK_APP.id, `${prefix}-${n}`, SHARDS) === CRASHED) return `${prefix}-${n}`;
    }
  }

  const labels = (): string[] =>
    receiver.deliveredEvents().map((e) => `${String(e.name)}:${String(e.channel)}${e.user_id === undefined ? '' : `:${String(e.user_id)}`}`);

  it('sends no channel_vacated or member_removed for the subscriptions restored from the live sockets', async () => {
    const presence = onCrashedShard('presence-kept');
    const plain = onCrashedShard('kept');
    const signer = new PusherServer({ appId: HOOK_APP.id, key: HOOK_APP.key, secret: HOOK_APP.secret, host: '127.0.0.1' });
    const pusher = pusherJsClient(hooked.port, HOOK_APP.key, {
      channelAuthorization: {
        endpoint: '/unused',
        transport: 'ajax',
        customHandler: ({ socketId, channelName }: { socketId: string; channelName: string }, cb: (err: Error | null, data: PusherServer.ChannelAuthResponse) => void) =>
          cb(null, signer.authorizeChannel(socketId, channelName, { user_id: 'stays' })),
      },
    });
    hookClients.push(pusher);
    await subscribe(pusher, presence);
    await subscribe(pusher, plain);
    await until(() => [`channel_occupied:${presence}`, `member_added:${presence}:stays`, `channel_occupied:${plain}`].every((l) => labels().includes(l)), 'occupied', 5000);
    // The occupancy record is on disk before the crash.
    await committedOnShards(hooked.baseUrl, SHARDS, [CRASHED], 'committed');

    const crashed = await call(hooked.baseUrl, 'POST', `/debug/shards/${CRASHED}/crash`, { noContentType: true });
    expect(crashed.status).toBe(500);
    expect((await healthy(hooked.baseUrl)).status).toBe(200);
    // The new worker finds both channels recorded occupied and emits their leave into the
    // debounce; the restore of the live subscriptions cancels it. The marker: a leave of another
    // channel of that shard, held by the debounce after those and so sent after them.
    const marker = onCrashedShard('marker');
    await subscribe(pusher, marker);
    await flushedBy(() => pusher.unsubscribe(marker), () => labels().includes(`channel_vacated:${marker}`), 'the marker channel_vacated', LEAVE_DEBOUNCE_MS + 5000);
    expect(labels().filter((l) => l.includes(presence) || l.includes(plain))).toEqual([
      `channel_occupied:${presence}`,
      `member_added:${presence}:stays`,
      `channel_occupied:${plain}`,
    ]);
    const metrics = (await call(hooked.baseUrl, 'GET', '/metrics?format=json')).body as { webhooks: { shards: { shard: number; suppressed: number }[] } };
    expect(metrics.webhooks.shards[CRASHED]!.suppressed).toBe(3);

    // A real leave afterwards is still sent.
    pusher.disconnect();
    await until(() => labels().includes(`channel_vacated:${plain}`) && labels().includes(`member_removed:${presence}:stays`), 'vacated after leave', 5000);
  }, 30_000);
});
