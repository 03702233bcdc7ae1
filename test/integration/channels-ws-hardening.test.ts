/**
 * The WebSocket endpoint against input and timing that well-behaved clients never produce:
 * user ids that are not well-formed UTF-16 (they must be refused, never take the process down),
 * and an event triggered on a cache channel while a subscription to it is in flight (the new
 * subscriber must get that event as the latest, not an older one). Uses the test-only
 * `POST /debug/shards/:n/stall` (HERALD_TEST_HOOKS=1) to make the race deterministic.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import PusherServer from 'pusher';
import WebSocket from 'ws';
import { channelShardFor } from '../../src/shards/hash.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { sleep, until } from '../helpers/wait.js';

const APP = { id: 'hard-app', key: 'hard-key', secret: 'hard-secret', userAuthentication: true, clientEvents: true };
const SHARDS = 2;
/** A user id with a lone (high) surrogate: valid in JSON (`"\ud800"`), not in UTF-8. */
const LONE = 'a\ud800b';

let herald: HeraldProcess;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  herald = await startHerald({ shards: SHARDS, env: { HERALD_TEST_HOOKS: '1' }, config: { apps: [APP] } });
});
afterAll(async () => {
  for (const c of cleanups) c();
  await herald?.dispose();
});

function sdk(): PusherServer {
  return channelsSdk(herald.port, APP);
}

/** A bare protocol client: every frame, with `data` JSON-decoded when it is a string. */
class RawClient {
  readonly frames: Frame[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  socketId = '';

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      this.frames.push(decodeFrame(raw.toString()));
    });
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    cleanups.push(() => ws.terminate());
  }

  static async connect(): Promise<RawClient> {
    const c = new RawClient(new WebSocket(`ws://127.0.0.1:${herald.port}/app/${APP.key}?protocol=7&client=js&version=8.4.0`));
    const established = await c.next('pusher:connection_established');
    c.socketId = (established.data as { socket_id: string }).socket_id;
    return c;
  }

  send(message: unknown): void {
    this.ws.send(JSON.stringify(message));
  }

  async next(event: string, ms = 10_000): Promise<Frame> {
    return until(() => this.frames.find((f) => f.event === event), () => `${event}; got ${JSON.stringify(this.frames.slice(-5))}`, ms);
  }

  /**
   * Sends pusher:ping and waits for the pong: the server has handled what this socket sent
   * before, and what it sent this socket before has arrived.
   */
  async roundTrip(): Promise<void> {
    const pongs = this.frames.filter((f) => f.event === 'pusher:pong').length;
    this.send({ event: 'pusher:ping', data: {} });
    await until(() => this.frames.filter((f) => f.event === 'pusher:pong').length > pongs, 'pusher:pong');
  }
}

/** The event cached on `channel`, as the HTTP API reads it from the channel's shard. */
async function cached(channel: string): Promise<unknown> {
  const res = await sdk().get({ path: `/channels/${channel}`, params: { info: 'cache' } });
  return ((await res.json()) as { cache?: unknown }).cache;
}

/**
 * The server still serves: a new client connects and gets a pong, every shard answers (the
 * requests queue behind whatever the close sent the shards), and the process still runs.
 */
async function stillServing(): Promise<void> {
  const probe = await RawClient.connect();
  probe.send({ event: 'pusher:ping', data: {} });
  await probe.next('pusher:pong');
  expect((await sdk().get({ path: '/channels' })).status).toBe(200);
  expect(herald.child?.exitCode).toBeNull();
  expect(herald.child?.signalCode).toBeNull();
}

describe('user ids that are not well-formed UTF-16', () => {
  it('refuses a signed sign-in whose id has a lone surrogate (4009), and survives its close', async () => {
    const raw = await RawClient.connect();
    raw.send({ event: 'pusher:signin', data: sdk().authenticateUser(raw.socketId, { id: LONE }) });
    expect((await raw.next('pusher:error')).data).toMatchObject({ code: 4009 });
    expect((await raw.closed).code).toBe(4009);
    await stillServing();
  });

  it('refuses a watchlist entry with a lone surrogate (4009), and survives its close', async () => {
    const raw = await RawClient.connect();
    raw.send({ event: 'pusher:signin', data: sdk().authenticateUser(raw.socketId, { id: 'fine', watchlist: ['ok', 'x\udc00'] }) });
    expect((await raw.next('pusher:error')).data).toMatchObject({ code: 4009 });
    expect((await raw.closed).code).toBe(4009);
    await stillServing();
  });

  it('refuses presence channel_data whose user_id has a lone surrogate, and survives the close', async () => {
    const raw = await RawClient.connect();
    const auth = sdk().authorizeChannel(raw.socketId, 'presence-lone', { user_id: LONE });
    raw.send({ event: 'pusher:subscribe', data: { channel: 'presence-lone', ...auth } });
    expect(await raw.next('pusher:subscription_error')).toMatchObject({ channel: 'presence-lone', data: { type: 'AuthError', status: 401 } });
    raw.ws.close();
    await raw.closed;
    await stillServing();
  });

  it('answers 400 to a trigger to #server-to-user-<id with a lone surrogate>', async () => {
    const err = (await sdk().sendToUser(LONE, 'hello', {}).then(
      () => null,
      (e: unknown) => e,
    )) as { status?: number; body?: string } | null;
    expect(err?.status).toBe(400);
    expect(JSON.parse(err!.body!)).toMatchObject({ code: 'INVALID_CHANNEL_NAME' });
    // A well-formed id is still accepted.
    expect((await sdk().sendToUser('good-user', 'hello', {})).status).toBe(200);
    await stillServing();
  });
});

describe('a cache channel event racing a subscription', () => {
  it('replays the event triggered while the subscription was in flight, not the one cached before', async () => {
    let channel = '';
    for (let n = 0; channelShardFor(APP.id, (channel = `cache-race-${n}`), SHARDS) !== 0; n++);
    await sdk().trigger(channel, 'score', { n: 1 });
    await until(async () => (await cached(channel)) !== null, 'score 1 cached on the shard');

    // The channel's shard stalls; the subscribe's join waits behind the stall.
    const stalled = fetch(`${herald.baseUrl}/debug/shards/0/stall?stall_ms=700`, { method: 'POST' });
    // The stall must have begun before the subscribe, and nothing says so from outside (the
    // metrics and admin views ask the stalled shard too).
    // time: 100 ms of the 700 ms stall for the stall request to reach the shard.
    await sleep(100);
    const raw = await RawClient.connect();
    raw.send({ event: 'pusher:subscribe', data: { channel } });
    // Handled before the ping: the join is on its way to the stalled shard.
    await raw.roundTrip();
    // Published while the join is queued: the socket is not on the topic yet, and the shard
    // reads its cache (score 1) before it stores this one.
    await sdk().trigger(channel, 'score', { n: 2 });
    expect((await stalled).status).toBe(200);

    await raw.next('pusher_internal:subscription_succeeded');
    // A second score (live) would come before the pong.
    await raw.roundTrip();
    const i = raw.frames.findIndex((f) => f.event === 'pusher_internal:subscription_succeeded');
    expect(raw.frames[i + 1]).toMatchObject({ event: 'score', channel, data: { n: 2 } });
    expect(raw.frames.filter((f) => f.event === 'score')).toHaveLength(1);

    // And a later subscriber gets the same latest event from the shard.
    const late = await RawClient.connect();
    late.send({ event: 'pusher:subscribe', data: { channel } });
    await late.next('score');
    expect(late.frames.filter((f) => f.event === 'score').map((f) => f.data)).toEqual([{ n: 2 }]);
  });
});
