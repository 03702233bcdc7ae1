/**
 * Pusher protocol 7 over WebSocket, driven by the official clients: pusher-js (Node) for what
 * browsers do, the `pusher` server SDK to sign subscriptions and sign-ins exactly as an app
 * server would, and raw `ws` sockets for failure paths and close codes.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, type Socket } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import PusherServer from 'pusher';
import WebSocket from 'ws';
import { channelShardFor } from '../../src/shards/hash.js';
import { nextPusherEvent, roundTrip } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk, pusherJsClient, type PusherJsClient as Pusher } from '../helpers/sdk-clients.js';
import { flushedBy, nextEvent, sleep, until } from '../helpers/wait.js';

const MASTER_KEY = Buffer.alloc(32, 7).toString('base64');

const APP_A = {
  id: 'app-a', key: 'key-a', secret: 'secret-a', clientEvents: true, userAuthentication: true, subscriptionCount: true,
  activityTimeout: 30, maxPresenceMembers: 3, maxPresenceUserInfoBytes: 64, maxEventDataBytes: 1024, cacheTtlSeconds: 2,
};
const APP_B = { id: 'app-b', key: 'key-b', secret: 'secret-b', clientEvents: true };
/** Client events, sign-in and subscription counts off (the defaults). */
const APP_QUIET = { id: 'app-quiet', key: 'key-quiet', secret: 'secret-quiet' };
const APP_OFF = { id: 'app-off', key: 'key-off', secret: 'secret-off', enabled: false };
const APP_SMALL = { id: 'app-small', key: 'key-small', secret: 'secret-small', maxConnections: 2 };
type App = { id: string; key: string; secret: string };

/** Shard workers (the file picks channels on one shard). */
const SHARDS = 2;

let herald: HeraldProcess;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  herald = await startHerald({ shards: SHARDS, config: { apps: [APP_A, APP_B, APP_QUIET, APP_OFF, APP_SMALL], maxWebSocketFrameBytes: 16 * 1024 } });
});
afterAll(async () => {
  for (const c of cleanups) c();
  await herald?.dispose();
});

function sdk(app: App): PusherServer {
  return channelsSdk(herald.port, app, { encryptionMasterKeyBase64: MASTER_KEY });
}

interface ClientOptions {
  /** Presence member this client subscribes as. */
  member?: { user_id: string; user_info?: Record<string, unknown> };
  /** User this client signs in as. */
  user?: { id: string; watchlist?: string[] };
  /** Sign with this secret instead of the app's (bad signatures). */
  wrongSecret?: boolean;
}

/** A pusher-js client whose auth handlers sign locally with the official server SDK. */
function client(app: App, opts: ClientOptions = {}): Pusher {
  const signer = sdk(opts.wrongSecret ? { ...app, secret: 'not-the-secret' } : app);
  const pusher = pusherJsClient(herald.port, app.key, {
    channelAuthorization: {
      endpoint: '/unused',
      transport: 'ajax',
      customHandler: ({ socketId, channelName }: { socketId: string; channelName: string }, cb: (err: Error | null, data: PusherServer.ChannelAuthResponse) => void) => {
        const presence = channelName.startsWith('presence-') ? (opts.member ?? { user_id: 'anon' }) : undefined;
        cb(null, signer.authorizeChannel(socketId, channelName, presence));
      },
    },
    userAuthentication: {
      endpoint: '/unused',
      transport: 'ajax',
      customHandler: ({ socketId }: { socketId: string }, cb: (err: Error | null, data: PusherServer.UserAuthResponse) => void) =>
        cb(null, signer.authenticateUser(socketId, opts.user ?? { id: 'nobody' })),
    },
  });
  cleanups.push(() => pusher.disconnect());
  return pusher;
}

async function connected(pusher: Pusher): Promise<void> {
  await until(() => pusher.connection.state === 'connected', () => `pusher-js connected (state ${pusher.connection.state})`);
}

/** Open connections of `app` as the server counts them (GET /metrics). */
async function openConnections(app: App): Promise<number> {
  const res = await fetch(`${herald.baseUrl}/metrics`);
  return series(parsePrometheus(await res.text()), 'herald_connections', { app_id: app.id });
}

/** A channel named `<prefix>-<n>` on the same shard as `channel` of `app`. */
function onShardOf(app: App, channel: string, prefix: string): string {
  const shard = channelShardFor(app.id, channel, SHARDS);
  let n = 0;
  while (channelShardFor(app.id, `${prefix}-${n}`, SHARDS) !== shard) n++;
  return `${prefix}-${n}`;
}

async function subscribed(pusher: Pusher, name: string) {
  const channel = pusher.subscribe(name);
  const data = await nextPusherEvent<unknown>(channel, 'pusher:subscription_succeeded');
  return { channel, data };
}

/** A bare protocol client: every frame received, with `data` JSON-decoded when it is a string. */
class RawClient {
  readonly frames: Frame[] = [];
  private taken = new Set<Frame>();
  readonly closed: Promise<{ code: number; reason: string }>;

  constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      this.frames.push(decodeFrame(raw.toString()));
    });
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    cleanups.push(() => ws.terminate());
  }

  static async open(path: string): Promise<RawClient> {
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}${path}`);
    const c = new RawClient(ws);
    await nextEvent(ws, 'open', `WebSocket ${path} open`);
    return c;
  }

  /** Connects to an app and resolves with the client and its socket id. */
  static async connect(app: App): Promise<{ raw: RawClient; socketId: string }> {
    const raw = await RawClient.open(`/app/${app.key}?protocol=7&client=js&version=8.4.0&flash=false`);
    const established = await raw.next((f) => f.event === 'pusher:connection_established');
    return { raw, socketId: (established.data as { socket_id: string }).socket_id };
  }

  send(message: unknown): void {
    this.ws.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** The first frame not yet taken that matches (waits for it up to `ms`). */
  async next(match: (f: Frame) => boolean, ms = 10_000): Promise<Frame> {
    const found = await until(() => this.frames.find((f) => !this.taken.has(f) && match(f)), () => `a matching frame; got ${JSON.stringify(this.frames.slice(-5))}`, ms);
    this.taken.add(found);
    return found;
  }

  event(name: string, ms?: number): Promise<Frame> {
    return this.next((f) => f.event === name, ms);
  }
}

describe('connection', () => {
  it('establishes with a unique <int>.<int> socket id and the app activity timeout', async () => {
    const a = await RawClient.open(`/app/${APP_A.key}?protocol=7&client=js&version=8.4.0&flash=false`);
    const b = await RawClient.open(`/app/${APP_A.key}?protocol=7`);
    const [ea, eb] = await Promise.all([a.event('pusher:connection_established'), b.event('pusher:connection_established')]);
    expect(ea.data).toMatchObject({ activity_timeout: 30 });
    const ida = (ea.data as { socket_id: string }).socket_id;
    const idb = (eb.data as { socket_id: string }).socket_id;
    expect(ida).toMatch(/^\d+\.\d+$/);
    expect(idb).toMatch(/^\d+\.\d+$/);
    expect(ida).not.toBe(idb);
    const p = client(APP_A);
    await connected(p);
    expect(p.connection.socket_id).toMatch(/^\d+\.\d+$/);
  });

  it.each([
    ['unknown key', '/app/no-such-key?protocol=7', 4001],
    ['disabled app', `/app/${APP_OFF.key}?protocol=7`, 4003],
    ['wrong path', `/apps/${APP_A.key}?protocol=7`, 4005],
    ['protocol not a number', `/app/${APP_A.key}?protocol=seven`, 4006],
    ['unsupported protocol', `/app/${APP_A.key}?protocol=4`, 4007],
    ['no protocol', `/app/${APP_A.key}`, 4008],
  ])('refuses %s (%s) with pusher:error and close code %i', async (_what, path, code) => {
    const raw = await RawClient.open(path);
    const error = await raw.event('pusher:error');
    expect(error.data).toMatchObject({ code });
    expect(typeof (error.data as { message: string }).message).toBe('string');
    expect((await raw.closed).code).toBe(code);
  });

  it('pusher-js sees the refusal of an unknown key and does not reconnect', async () => {
    const p = pusherJsClient(herald.port, 'no-such-key');
    cleanups.push(() => p.disconnect());
    const err = await nextPusherEvent<{ error?: { data?: { code?: number; message?: string } } }>(p.connection, 'error');
    expect(err.error?.data).toMatchObject({ code: 4001, message: "no app has key 'no-such-key' (apps[].key)" });
    const states: string[] = [];
    p.connection.bind('state_change', ({ current }: { current: string }) => states.push(current));
    // time: pusher-js retries a connection it may retry within a second; 1.5 s shows it does not.
    await sleep(1500);
    expect(p.connection.state).toBe('disconnected');
    expect(states).not.toContain('connecting');
  });

  it('enforces maxConnections per app with 4004, and frees the slot on close', async () => {
    const one = await RawClient.connect(APP_SMALL);
    await RawClient.connect(APP_SMALL);
    const third = await RawClient.open(`/app/${APP_SMALL.key}?protocol=7`);
    expect((await third.event('pusher:error')).data).toMatchObject({ code: 4004 });
    expect((await third.closed).code).toBe(4004);
    // Another app is not affected by this app's quota.
    await RawClient.connect(APP_B);
    one.raw.ws.close();
    await one.raw.closed;
    // The slot is free once the server has handled the close: until then a new one is refused.
    const again = await until(async () => {
      const attempt = await RawClient.open(`/app/${APP_SMALL.key}?protocol=7`);
      const first = await attempt.next(() => true);
      return first.event === 'pusher:connection_established' && first;
    }, 'a connection to the app whose slot was freed');
    expect((again.data as { socket_id: string }).socket_id).toMatch(/^\d+\.\d+$/);
  });

  it('answers pusher:ping with pusher:pong', async () => {
    const { raw } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:ping', data: {} });
    await raw.event('pusher:pong');
  });

  it('answers invalid JSON, unknown events and binary frames with pusher:error and stays open', async () => {
    const { raw } = await RawClient.connect(APP_A);
    raw.send('{not json');
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null, message: expect.stringMatching(/JSON/) });
    raw.send({ event: 'pusher:unheard-of', data: {} });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null, message: expect.stringMatching(/Unknown event/) });
    raw.send(JSON.stringify([1, 2]));
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null });
    raw.ws.send(Buffer.from('{"event":"pusher:ping"}'), { binary: true });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null, message: expect.stringMatching(/Binary/) });
    raw.send({ event: 'pusher:ping', data: {} });
    await raw.event('pusher:pong');
    expect(raw.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('closes on a frame over maxWebSocketFrameBytes with an explanation', async () => {
    const { raw } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:ping', data: { pad: 'x'.repeat(20 * 1024) } });
    expect((await raw.event('pusher:error')).data).toMatchObject({ message: expect.stringMatching(/larger than the limit of 16384 bytes/) });
    expect((await raw.closed).code).toBe(1009);
  });

  it('closes a socket that sends invalid UTF-8, and only that socket', async () => {
    const bystander = await RawClient.connect(APP_A);
    const { raw } = await RawClient.connect(APP_A);
    // A masked text frame whose payload (0xC3 0x28) is not UTF-8, written under the ws library.
    const socket = (raw.ws as unknown as { _socket: Socket })._socket;
    socket.write(Buffer.from([0x81, 0x82, 0, 0, 0, 0, 0xc3, 0x28]));
    const { code } = await raw.closed;
    expect([1006, 1007]).toContain(code);
    bystander.raw.send({ event: 'pusher:ping', data: {} });
    await bystander.raw.event('pusher:pong');
  });

  it('keeps raw TCP garbage from affecting the server', async () => {
    const sock = connect(herald.port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    sock.write('GET /app/key-a?protocol=7 HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
    // time: the socket goes away while the server is (most likely) in the middle of the upgrade.
    await sleep(50);
    sock.destroy();
    const { raw } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:ping', data: {} });
    await raw.event('pusher:pong');
  });
});

describe('channels and authorisation', () => {
  it('subscribes to public, private, encrypted and presence channels with pusher-js', async () => {
    const p = client(APP_A, { member: { user_id: 'kind-tester' } });
    await connected(p);
    for (const name of ['public-news', 'private-notes', 'private-encrypted-secrets', 'presence-kinds']) {
      await subscribed(p, name);
    }
    const presence = p.channel('presence-kinds') as unknown as { members: { count: number; me: { id: string } } };
    expect(presence.members.count).toBe(1);
    expect(presence.members.me.id).toBe('kind-tester');
  });

  it('accepts a private channel authorised with channel_data, as the SDK signs it and pusher-js sends it', async () => {
    const signer = sdk(APP_A);
    const p = pusherJsClient(herald.port, APP_A.key, {
      channelAuthorization: {
        endpoint: '/unused',
        transport: 'ajax',
        // The SDK signs socket:channel:channel_data whenever data is given, private channels included.
        customHandler: ({ socketId, channelName }: { socketId: string; channelName: string }, cb: (err: Error | null, data: PusherServer.ChannelAuthResponse) => void) =>
          cb(null, signer.authorizeChannel(socketId, channelName, { user_id: 'priv-user', user_info: { plan: 'pro' } })),
      },
    });
    cleanups.push(() => p.disconnect());
    await connected(p);
    await subscribed(p, 'private-with-data');

    // The signature still covers channel_data: a tampered one is refused.
    const { raw, socketId } = await RawClient.connect(APP_A);
    const signed = signer.authorizeChannel(socketId, 'private-with-data', { user_id: 'u1' });
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-with-data', auth: signed.auth, channel_data: JSON.stringify({ user_id: 'u2' }) } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError', status: 401 });
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-with-data', ...signed } });
    await raw.event('pusher_internal:subscription_succeeded');
  });

  it('refuses a bad signature with subscription_error AuthError 401', async () => {
    const p = client(APP_A, { wrongSecret: true, member: { user_id: 'mallory' } });
    await connected(p);
    for (const name of ['private-vault', 'presence-vault', 'private-encrypted-vault']) {
      const channel = p.subscribe(name);
      const err = await nextPusherEvent<{ type: string; error: string; status: number }>(channel, 'pusher:subscription_error');
      expect(err).toMatchObject({ type: 'AuthError', status: 401 });
      expect(err.error).toMatch(/Invalid signature/);
    }
  });

  it('refuses missing auth, another app key, tampered channel_data and invalid names', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-x' } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError', status: 401 });

    const otherApp = sdk(APP_B).authorizeChannel(socketId, 'private-x');
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-x', auth: otherApp.auth } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError' });

    const signed = sdk(APP_A).authorizeChannel(socketId, 'presence-x', { user_id: 'alice' });
    raw.send({ event: 'pusher:subscribe', data: { channel: 'presence-x', auth: signed.auth, channel_data: JSON.stringify({ user_id: 'admin' }) } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError', status: 401 });

    raw.send({ event: 'pusher:subscribe', data: { channel: 'bad channel!' } });
    const invalid = await raw.event('pusher:subscription_error');
    expect(invalid).toMatchObject({ channel: 'bad channel!', data: { status: 400 } });

    // The right signature still works on the same connection.
    raw.send({ event: 'pusher:subscribe', data: { channel: 'presence-x', ...signed } });
    const ok = await raw.event('pusher_internal:subscription_succeeded');
    expect(ok).toMatchObject({ channel: 'presence-x', data: { presence: { ids: ['alice'], count: 1 } } });
  });

  it('stops delivering after unsubscribe', async () => {
    const sender = client(APP_A);
    const receiver = client(APP_A);
    await Promise.all([connected(sender), connected(receiver)]);
    const { channel: out } = await subscribed(sender, 'private-unsub');
    const { channel: inbox } = await subscribed(receiver, 'private-unsub');
    const got: unknown[] = [];
    inbox.bind('client-note', (d: unknown) => got.push(d));
    out.trigger('client-note', { n: 1 });
    await until(() => got.length === 1, 'the first note');
    receiver.unsubscribe('private-unsub');
    // Its unsubscribe is handled before its ping; the sender's note before the sender's ping; and
    // the receiver's next pong comes after anything the server sent it before.
    await roundTrip(receiver);
    out.trigger('client-note', { n: 2 });
    await roundTrip(sender);
    await roundTrip(receiver);
    expect(got).toEqual([{ n: 1 }]);
  });
});

describe('presence', () => {
  it('adds a user on its first connection, removes it on its last, and counts it once', async () => {
    const watcher = client(APP_A, { member: { user_id: 'watcher', user_info: { name: 'W' } } });
    await connected(watcher);
    const { channel } = await subscribed(watcher, 'presence-room');
    const added: { id: string; info: unknown }[] = [];
    const removed: string[] = [];
    channel.bind('pusher:member_added', (m: { id: string; info: unknown }) => added.push(m));
    channel.bind('pusher:member_removed', (m: { id: string }) => removed.push(m.id));

    const tab1 = client(APP_A, { member: { user_id: 'bob', user_info: { name: 'Bob' } } });
    const tab2 = client(APP_A, { member: { user_id: 'bob', user_info: { name: 'Bob' } } });
    await Promise.all([connected(tab1), connected(tab2)]);
    const { data: first } = await subscribed(tab1, 'presence-room');
    expect(first).toMatchObject({ count: 2, me: { id: 'bob', info: { name: 'Bob' } } });
    await until(() => isDeepStrictEqual(added, [{ id: 'bob', info: { name: 'Bob' } }]), () => `bob added once (got ${JSON.stringify(added)})`);
    const { data: second } = await subscribed(tab2, 'presence-room');
    expect(second).toMatchObject({ count: 2 });
    // A member_added for tab2 would be published as its subscription succeeded: before an event
    // triggered after that.
    const marks: unknown[] = [];
    channel.bind('marker', (d: unknown) => marks.push(d));
    await flushedBy(() => sdk(APP_A).trigger('presence-room', 'marker', {}), () => marks.length === 1, 'the marker after the second tab subscribed');
    expect(added).toHaveLength(1);

    const before = await openConnections(APP_A);
    tab1.disconnect();
    // Once the server counts one connection less it has queued tab1's leave on the channel's shard;
    // a join on that shard queued after it answers after it, and so after any member_removed.
    await until(async () => (await openConnections(APP_A)) === before - 1, "the server handled tab1's close");
    const marker = onShardOf(APP_A, 'presence-room', 'room-marker');
    await flushedBy(() => watcher.subscribe(marker), () => watcher.channel(marker).subscribed, "a join queued after tab1's leave");
    expect(removed).toEqual([]);
    tab2.unsubscribe('presence-room');
    await until(() => isDeepStrictEqual(removed, ['bob']), () => `bob removed (got ${JSON.stringify(removed)})`);
    expect((channel as unknown as { members: { count: number } }).members.count).toBe(1);
  });

  it('refuses members over maxPresenceMembers but lets a present user open more connections', async () => {
    const users = ['m1', 'm2', 'm3'];
    for (const user_id of users) {
      const p = client(APP_A, { member: { user_id } });
      await connected(p);
      await subscribed(p, 'presence-full');
    }
    const fourth = client(APP_A, { member: { user_id: 'm4' } });
    await connected(fourth);
    const err = await nextPusherEvent<{ type: string; status: number; error: string }>(fourth.subscribe('presence-full'), 'pusher:subscription_error');
    expect(err).toMatchObject({ type: 'LimitReached', status: 403 });
    expect(err.error).toMatch(/maximum of 3 members/);
    const again = client(APP_A, { member: { user_id: 'm2' } });
    await connected(again);
    const { data } = await subscribed(again, 'presence-full');
    expect(data).toMatchObject({ count: 3 });
  });

  it('refuses user_info larger than maxPresenceUserInfoBytes', async () => {
    const p = client(APP_A, { member: { user_id: 'big', user_info: { bio: 'x'.repeat(100) } } });
    await connected(p);
    const err = await nextPusherEvent<{ type: string; error: string }>(p.subscribe('presence-bio'), 'pusher:subscription_error');
    expect(err.type).toBe('LimitReached');
    expect(err.error).toMatch(/limit is 64 bytes/);
  });
});

describe('client events', () => {
  it('relays on private channels without echo, and adds user_id on presence channels', async () => {
    const alice = client(APP_A, { member: { user_id: 'alice' } });
    const bob = client(APP_A, { member: { user_id: 'bob2' } });
    await Promise.all([connected(alice), connected(bob)]);
    const { channel: aPriv } = await subscribed(alice, 'private-chat');
    const { channel: bPriv } = await subscribed(bob, 'private-chat');
    const echoed: unknown[] = [];
    aPriv.bind('client-typing', (d: unknown) => echoed.push(d));
    const got = nextPusherEvent<unknown>(bPriv, 'client-typing');
    aPriv.trigger('client-typing', { who: 'alice' });
    expect(await got).toEqual({ who: 'alice' });

    const { channel: aPres } = await subscribed(alice, 'presence-chat');
    const { channel: bPres } = await subscribed(bob, 'presence-chat');
    let withMeta: { data: unknown; meta: { user_id?: string } } | undefined;
    bPres.bind('client-wave', (data: unknown, meta: { user_id?: string }) => (withMeta = { data, meta }));
    aPres.trigger('client-wave', 'hello');
    const wave = await until(() => withMeta, "alice's wave");
    expect(wave.data).toBe('hello');
    expect(wave.meta.user_id).toBe('alice');
    // An echo of alice's events would come before the pong to her next ping.
    await roundTrip(alice);
    expect(echoed).toEqual([]);
  });

  it('refuses client events on public and encrypted channels, before subscribing, and when too large', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    const signer = sdk(APP_A);
    raw.send({ event: 'pusher:subscribe', data: { channel: 'open-room' } });
    await raw.event('pusher_internal:subscription_succeeded');
    raw.send({ event: 'client-x', channel: 'open-room', data: {} });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null, message: expect.stringMatching(/private and presence/) });

    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-encrypted-box', ...signer.authorizeChannel(socketId, 'private-encrypted-box') } });
    await raw.event('pusher_internal:subscription_succeeded');
    raw.send({ event: 'client-x', channel: 'private-encrypted-box', data: {} });
    expect((await raw.event('pusher:error')).data).toMatchObject({ message: expect.stringMatching(/encrypted/) });

    raw.send({ event: 'client-x', channel: 'private-never-joined', data: {} });
    expect((await raw.event('pusher:error')).data).toMatchObject({ message: expect.stringMatching(/not subscribed/) });

    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-big', ...signer.authorizeChannel(socketId, 'private-big') } });
    await raw.event('pusher_internal:subscription_succeeded');
    raw.send({ event: 'client-x', channel: 'private-big', data: 'y'.repeat(2000) });
    expect((await raw.event('pusher:error')).data).toMatchObject({ message: expect.stringMatching(/limit is 1024 bytes/) });
    expect(raw.ws.readyState).toBe(WebSocket.OPEN);
  });

  it('refuses client events when the app does not enable them', async () => {
    const { raw, socketId } = await RawClient.connect(APP_QUIET);
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-q', ...sdk(APP_QUIET).authorizeChannel(socketId, 'private-q') } });
    await raw.event('pusher_internal:subscription_succeeded');
    raw.send({ event: 'client-x', channel: 'private-q', data: {} });
    // Advice for both places an app can live: the config file, or the admin API and dashboard.
    expect((await raw.event('pusher:error')).data).toMatchObject({
      message: `Client events are not enabled for app ${APP_QUIET.id}: set its clientEvents to true (apps[] in the config file for an app defined there; the admin API (PATCH /admin/v1/apps/<id>) or the dashboard's Apps page for one created there)`,
    });
  });

  it('closes with 4301 past maxClientEventsPerSecond', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-spam', ...sdk(APP_A).authorizeChannel(socketId, 'private-spam') } });
    await raw.event('pusher_internal:subscription_succeeded');
    for (let i = 0; i < 11; i++) raw.send({ event: 'client-spam', channel: 'private-spam', data: { i } });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: 4301 });
    expect((await raw.closed).code).toBe(4301);
  });
});

describe('user sign-in and watchlist', () => {
  it('signs in with pusher-js and reports watched users online and offline', async () => {
    const watcher = client(APP_A, { user: { id: 'carol', watchlist: ['dave', 'erin'] } });
    const events: { name: string; user_ids: string[] }[] = [];
    watcher.user.watchlist.bind('online', (e: { name: string; user_ids: string[] }) => events.push(e));
    watcher.user.watchlist.bind('offline', (e: { name: string; user_ids: string[] }) => events.push(e));
    watcher.signin();
    await connected(watcher);
    await watcher.user.signinDonePromise;
    expect(watcher.user.user_data).toMatchObject({ id: 'carol' });
    await until(() => isDeepStrictEqual(events, [{ name: 'offline', user_ids: ['dave', 'erin'] }]), () => `both watched users offline (got ${JSON.stringify(events)})`);

    const dave = client(APP_A, { user: { id: 'dave' } });
    dave.signin();
    await connected(dave);
    await until(() => isDeepStrictEqual(events.at(-1), { name: 'online', user_ids: ['dave'] }), () => `dave online (got ${JSON.stringify(events)})`);
    dave.disconnect();
    await until(() => isDeepStrictEqual(events.at(-1), { name: 'offline', user_ids: ['dave'] }), () => `dave offline (got ${JSON.stringify(events)})`);
  });

  it('subscribes the signed-in user to its own server-to-user channel only', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:subscribe', data: { channel: '#server-to-user-frank', auth: '' } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError' });
    const auth = sdk(APP_A).authenticateUser(socketId, { id: 'frank' });
    raw.send({ event: 'pusher:signin', data: auth });
    const ok = await raw.event('pusher:signin_success');
    expect(JSON.parse((ok.data as { user_data: string }).user_data)).toEqual({ id: 'frank' });
    raw.send({ event: 'pusher:subscribe', data: { channel: '#server-to-user-frank', auth: '' } });
    await raw.event('pusher_internal:subscription_succeeded');
    raw.send({ event: 'pusher:subscribe', data: { channel: '#server-to-user-grace', auth: '' } });
    expect((await raw.event('pusher:subscription_error')).data).toMatchObject({ type: 'AuthError' });
  });

  it('closes with 4009 on a bad sign-in signature', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    const forged = sdk({ ...APP_A, secret: 'guess' }).authenticateUser(socketId, { id: 'root' });
    raw.send({ event: 'pusher:signin', data: forged });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: 4009, message: expect.stringContaining(`check the secret of app ${APP_A.id} (apps[].secret)`) });
    expect((await raw.closed).code).toBe(4009);
  });

  it('signs in a user_data whose id is a number (as Laravel sends it), as its decimal string', async () => {
    const { raw, socketId } = await RawClient.connect(APP_A);
    // Signed by hand, as Laravel's PHP SDK does: the Node SDK refuses a number before signing.
    const userData = JSON.stringify({ id: 42 });
    const auth = `${APP_A.key}:${createHmac('sha256', APP_A.secret).update(`${socketId}::user::${userData}`).digest('hex')}`;
    raw.send({ event: 'pusher:signin', data: { user_data: userData, auth } });
    const ok = await raw.event('pusher:signin_success');
    expect(JSON.parse((ok.data as { user_data: string }).user_data)).toEqual({ id: 42 });
    // Signed in as "42": its server-to-user channel is open to it.
    raw.send({ event: 'pusher:subscribe', data: { channel: '#server-to-user-42', auth: '' } });
    await raw.event('pusher_internal:subscription_succeeded');
  });

  it('refuses sign-in when the app does not enable user authentication', async () => {
    const { raw, socketId } = await RawClient.connect(APP_QUIET);
    raw.send({ event: 'pusher:signin', data: sdk(APP_QUIET).authenticateUser(socketId, { id: 'u' }) });
    expect((await raw.event('pusher:error')).data).toMatchObject({ code: null, message: expect.stringContaining('set its userAuthentication to true (apps[] in the config file for an app defined there; the admin API (PATCH /admin/v1/apps/<id>)') });
  });
});

describe('cache channels and subscription counts', () => {
  it('replays the last event right after subscription_succeeded, or sends cache_miss', async () => {
    const writer = client(APP_A);
    await connected(writer);
    const missed = writer.subscribe('cache-empty');
    await nextPusherEvent(missed, 'pusher:cache_miss');

    const { channel } = await subscribed(writer, 'private-cache-scores');
    channel.trigger('client-score', { home: 1 });
    channel.trigger('client-score', { home: 2 });
    await until(async () => {
      const res = await sdk(APP_A).get({ path: '/channels/private-cache-scores', params: { info: 'cache' } });
      return isDeepStrictEqual(((await res.json()) as { cache?: { data?: string } }).cache?.data, JSON.stringify({ home: 2 }));
    }, 'the second score cached');

    const { raw, socketId } = await RawClient.connect(APP_A);
    raw.send({ event: 'pusher:subscribe', data: { channel: 'private-cache-scores', ...sdk(APP_A).authorizeChannel(socketId, 'private-cache-scores') } });
    await raw.event('pusher_internal:subscription_succeeded');
    await raw.event('client-score');
    const i = raw.frames.findIndex((f) => f.event === 'pusher_internal:subscription_succeeded');
    expect(raw.frames[i + 1]).toMatchObject({ event: 'client-score', channel: 'private-cache-scores', data: { home: 2 } });
    expect(raw.frames.filter((f) => f.event === 'client-score')).toHaveLength(1);

    // cacheTtlSeconds is 2 for this app: the entry expires.
    // time: the cache TTL is what is tested.
    await sleep(2100);
    const late = client(APP_A);
    await connected(late);
    await nextPusherEvent(late.subscribe('private-cache-scores'), 'pusher:cache_miss');
  });

  it('sends subscription_count on non-presence channels when the app enables it', async () => {
    const first = client(APP_A);
    const second = client(APP_A);
    await Promise.all([connected(first), connected(second)]);
    const counts: number[] = [];
    const ch1 = first.subscribe('counted');
    ch1.bind('pusher:subscription_count', (d: { subscription_count: number }) => counts.push(d.subscription_count));
    await nextPusherEvent(ch1, 'pusher:subscription_succeeded');
    const countsAre = (want: number[]) => () => isDeepStrictEqual(counts, want);
    const seen = () => `counts ${JSON.stringify(counts)}`;
    await until(countsAre([1]), seen);
    await subscribed(second, 'counted');
    await until(countsAre([1, 2]), seen);
    second.unsubscribe('counted');
    await until(countsAre([1, 2, 1]), seen);

    const quiet = client(APP_QUIET);
    await connected(quiet);
    const quietCounts: unknown[] = [];
    const q = quiet.subscribe('counted');
    q.bind('pusher:subscription_count', (d: unknown) => quietCounts.push(d));
    await nextPusherEvent(q, 'pusher:subscription_succeeded');
    const pres = client(APP_A, { member: { user_id: 'p' } });
    await connected(pres);
    const pc: unknown[] = [];
    const presCh = pres.subscribe('presence-counted');
    presCh.bind('pusher:subscription_count', (d: unknown) => pc.push(d));
    await nextPusherEvent(presCh, 'pusher:subscription_succeeded');
    // A count would be published as the subscription succeeded: before an event triggered after it.
    const quietMarks: unknown[] = [];
    const presMarks: unknown[] = [];
    q.bind('marker', (d: unknown) => quietMarks.push(d));
    presCh.bind('marker', (d: unknown) => presMarks.push(d));
    await flushedBy(
      () => Promise.all([sdk(APP_QUIET).trigger('counted', 'marker', {}), sdk(APP_A).trigger('presence-counted', 'marker', {})]),
      () => quietMarks.length === 1 && presMarks.length === 1,
      'a marker on each channel',
    );
    expect(quietCounts).toEqual([]);
    expect(pc).toEqual([]);
  });
});

describe('per-app isolation', () => {
  it('never delivers one app’s events to another app on the same channel name', async () => {
    const a1 = client(APP_A, { member: { user_id: 'same' } });
    const a2 = client(APP_A, { member: { user_id: 'a2' } });
    const b1 = client(APP_B, { member: { user_id: 'b1' } });
    await Promise.all([connected(a1), connected(a2), connected(b1)]);
    const { channel: a1c } = await subscribed(a1, 'private-shared');
    const { channel: a2c } = await subscribed(a2, 'private-shared');
    const { channel: b1c } = await subscribed(b1, 'private-shared');
    const bGot: unknown[] = [];
    const aGot: unknown[] = [];
    b1c.bind('client-msg', (d: unknown) => bGot.push(d));
    a2c.bind('client-msg', (d: unknown) => aGot.push(d));
    a1c.trigger('client-msg', { from: 'a' });
    await until(() => isDeepStrictEqual(aGot, [{ from: 'a' }]), () => `a's message (got ${JSON.stringify(aGot)})`);
    b1c.trigger('client-msg', { from: 'b' });
    // Handled by the server before b1's next ping; had it reached a2, before an event triggered after.
    await roundTrip(b1);
    const marks: unknown[] = [];
    a2c.bind('marker', (d: unknown) => marks.push(d));
    await flushedBy(() => sdk(APP_A).trigger('private-shared', 'marker', {}), () => marks.length === 1, 'the marker on app A');
    expect(bGot).toEqual([]);
    expect(aGot).toEqual([{ from: 'a' }]);

    const { data: bPresence } = await subscribed(b1, 'presence-shared');
    // pusher-js's members object is live (b2 joins below): its count as b1 subscribed.
    expect(bPresence).toMatchObject({ count: 1 });
    await subscribed(a1, 'presence-shared');
    await subscribed(a2, 'presence-shared');
    const { data: bAgain } = await subscribed(client(APP_B, { member: { user_id: 'b2' } }), 'presence-shared');
    expect((bAgain as { members: Record<string, unknown> }).members).toEqual({ b1: null, b2: null });
  });
});

describe('server events through the HTTP API', () => {
  it('delivers triggers to subscribers and leaves out the socket_id given', async () => {
    const one = client(APP_A);
    const two = client(APP_A);
    await Promise.all([connected(one), connected(two)]);
    const { channel: c1 } = await subscribed(one, 'news-feed');
    const { channel: c2 } = await subscribed(two, 'news-feed');
    const got1: unknown[] = [];
    const got2: unknown[] = [];
    c1.bind('headline', (d: unknown) => got1.push(d));
    c2.bind('headline', (d: unknown) => got2.push(d));
    await sdk(APP_A).trigger('news-feed', 'headline', { n: 1 });
    await sdk(APP_A).trigger('news-feed', 'headline', { n: 2 }, { socket_id: one.connection.socket_id });
    await until(() => isDeepStrictEqual(got2, [{ n: 1 }, { n: 2 }]), () => `both headlines on the second socket (got ${JSON.stringify(got2)})`);
    // Triggers on one channel arrive in order: once a later marker is on the first socket, n: 2 would be too.
    const marks: unknown[] = [];
    c1.bind('marker', (d: unknown) => marks.push(d));
    await flushedBy(() => sdk(APP_A).trigger('news-feed', 'marker', {}), () => marks.length === 1, 'the marker on the first socket');
    expect(got1).toEqual([{ n: 1 }]);
  });

  it('leaves out the socket_id given even when that socket is the channel\'s only subscriber', async () => {
    const alone = client(APP_A);
    await connected(alone);
    const { channel } = await subscribed(alone, 'solo-feed');
    const got: unknown[] = [];
    channel.bind('update', (d: unknown) => got.push(d));
    await sdk(APP_A).trigger('solo-feed', 'update', { n: 1 }, { socket_id: alone.connection.socket_id });
    // Without the socket_id it is delivered; in order after n: 1, which did not come before it.
    await sdk(APP_A).trigger('solo-feed', 'update', { n: 2 });
    await until(() => got.length >= 1, 'the second update');
    expect(got).toEqual([{ n: 2 }]);
  });

  it('keeps a triggered event on a cache channel for the next subscriber', async () => {
    await sdk(APP_A).trigger('cache-weather', 'forecast', { sky: 'clear' });
    const late = client(APP_A);
    await connected(late);
    const channel = late.subscribe('cache-weather');
    expect(await nextPusherEvent(channel, 'forecast')).toEqual({ sky: 'clear' });
  });

  it('does not deliver another app’s trigger on the same channel name', async () => {
    const a = client(APP_A);
    await connected(a);
    const { channel } = await subscribed(a, 'same-name');
    const got: unknown[] = [];
    channel.bind('ping', (d: unknown) => got.push(d));
    // App B's trigger is answered (handed to delivery) before app A's is sent: had it reached
    // this socket, it would have come before app A's.
    await sdk(APP_B).trigger('same-name', 'ping', { from: 'b' });
    await sdk(APP_A).trigger('same-name', 'ping', { from: 'a' });
    await until(() => got.length >= 1, "app A's ping");
    expect(got).toEqual([{ from: 'a' }]);
  });

  it('terminate_connections closes every connection of a signed-in user with 4009', async () => {
    const tabs = [client(APP_A, { user: { id: 'henry' } }), client(APP_A, { user: { id: 'henry' } })];
    const other = client(APP_A, { user: { id: 'iris' } });
    for (const p of [...tabs, other]) {
      p.signin();
      await connected(p);
      await p.user.signinDonePromise;
    }
    const errors = tabs.map((p) => nextPusherEvent<{ data?: { code?: number } }>(p.connection, 'error'));
    const res = await sdk(APP_A).terminateUserConnections('henry');
    expect(res.status).toBe(200);
    for (const e of await Promise.all(errors)) expect(e.data?.code).toBe(4009);
    await until(() => tabs.every((p) => p.connection.state === 'disconnected'), () => `both tabs disconnected (${tabs.map((p) => p.connection.state).join(', ')})`);
    expect(other.connection.state).toBe('connected');
  });
});
