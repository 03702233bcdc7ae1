/**
 * pusher-js clients of one app on any Herald node (several nodes of a cluster in the cluster
 * tests), authorised and signed in with the official `pusher` SDK exactly as an app server
 * would, recording what every subscribed channel, the user channel and the watchlist receive.
 * A ClientPool disconnects everything it opened. Also a bare `ws` socket for close codes.
 */
import type PusherServer from 'pusher';
import type { Channel } from 'pusher-js';
import WebSocket from 'ws';
import type { HeraldProcess } from './herald-process.js';
import { decodeFrame, type Frame } from './protocol-frame.js';
import { channelsSdk, pusherJsClient, type ChannelsCreds, type PusherJsClient } from './sdk-clients.js';
import { until } from './wait.js';
import { threadOf } from '../../src/channels/socket-id.js';

/** One event as the application code of a pusher-js client sees it. */
export interface Received {
  event: string;
  data: unknown;
}

/** Who a client is: its presence member and signed-in user. */
export interface Identity {
  /** user_id of presence subscriptions and of sign-in; default 'anon'. */
  userId?: string;
  /** user_info of presence subscriptions. */
  userInfo?: Record<string, unknown>;
  /** Watchlist given at sign-in. */
  watchlist?: string[];
}

/** A subscribed channel and every event it received (pusher:* ones included, in order). */
export class ChannelRecord {
  /** Every event after pusher:subscription_succeeded, pusher:* ones included. */
  readonly events: Received[] = [];
  subscribed = false;
  /** The data of pusher:subscription_succeeded (presence: pusher-js's members object). */
  succeeded: unknown;

  constructor(readonly channel: Channel) {
    channel.bind_global((event: string, data: unknown) => {
      if (event !== 'pusher:subscription_succeeded') this.events.push({ event, data });
      else {
        this.subscribed = true;
        this.succeeded = data;
      }
    });
  }

  /** The data of every received `event`, in order. */
  data(event: string): unknown[] {
    return this.events.filter((e) => e.event === event).map((e) => e.data);
  }

  /** The user_info pusher-js holds for presence member `id` (undefined when not a member). */
  memberInfo(id: string): unknown {
    const members = (this.channel as unknown as { members: { get(id: string): { info: unknown } | null } }).members;
    return members.get(id)?.info;
  }

  /** Ids of the presence members pusher-js currently holds for this channel, sorted. */
  memberIds(): string[] {
    const members = (this.channel as unknown as { members: { each(cb: (m: { id: string }) => void): void } }).members;
    const ids: string[] = [];
    members.each((m) => ids.push(m.id));
    return ids.sort();
  }
}

export class ChannelClient {
  /** Events received on the signed-in user's channel (sendToUser). */
  readonly userEvents: Received[] = [];
  /** Watchlist events, in order. */
  readonly watchlist: { name: string; user_ids: string[] }[] = [];
  /** Codes of the connection's pusher:error events (4009 on terminate, 4004 over the limit). */
  readonly errorCodes: (number | null)[] = [];

  constructor(
    readonly pusher: PusherJsClient,
    readonly node: HeraldProcess,
  ) {
    pusher.connection.bind('error', (e: { data?: { code?: number }; error?: { data?: { code?: number } } }) => {
      this.errorCodes.push(e?.data?.code ?? e?.error?.data?.code ?? null);
    });
    pusher.user.bind_global((event: string, data: unknown) => {
      this.userEvents.push({ event, data });
    });
    for (const name of ['online', 'offline'] as const) {
      pusher.user.watchlist.bind(name, (e: { name: string; user_ids: string[] }) => this.watchlist.push({ name: e.name, user_ids: [...e.user_ids].sort() }));
    }
  }

  get socketId(): string {
    return this.pusher.connection.socket_id;
  }

  get state(): string {
    return this.pusher.connection.state;
  }

  /** Subscribes and resolves once subscription_succeeded arrived (or fails naming the error). */
  async subscribe(name: string, timeoutMs = 10_000): Promise<ChannelRecord> {
    const record = new ChannelRecord(this.pusher.subscribe(name));
    let failed: unknown;
    record.channel.bind('pusher:subscription_error', (data: unknown) => (failed = data));
    await until(() => record.subscribed || failed !== undefined, `subscription to ${name} on port ${this.node.port}`, timeoutMs);
    if (!record.subscribed) throw new Error(`subscription to ${name} refused: ${JSON.stringify(failed)}`);
    return record;
  }

  /** Signs in and resolves once pusher-js has joined the user's #server-to-user channel. */
  async signIn(): Promise<void> {
    this.pusher.signin();
    await this.pusher.user.signinDonePromise;
    await until(() => this.pusher.user.serverToUserChannel?.subscribed === true, `sign-in on port ${this.node.port}`);
  }

  unsubscribe(name: string): void {
    this.pusher.unsubscribe(name);
  }

  disconnect(): void {
    this.pusher.disconnect();
  }

  /** Resolves once the connection is no longer connected (closed by the server or by us). */
  async gone(timeoutMs = 10_000): Promise<void> {
    await until(() => this.state !== 'connected' && this.state !== 'connecting', `connection on port ${this.node.port} closed`, timeoutMs);
  }
}

/** The clients of one app that a test opens, disconnected together. */
export class ClientPool {
  private readonly clients: ChannelClient[] = [];

  constructor(readonly app: ChannelsCreds) {}

  /** The `pusher` server SDK against `node`. */
  sdk(node: HeraldProcess): PusherServer {
    return channelsSdk(node.port, this.app);
  }

  /** A pusher-js client connected to `node`, authorised as `identity` by the official SDK. */
  async connect(node: HeraldProcess, identity: Identity = {}): Promise<ChannelClient> {
    const signer = this.sdk(node);
    const userId = identity.userId ?? 'anon';
    const pusher = pusherJsClient(node.port, this.app.key, {
      channelAuthorization: {
        endpoint: '/unused',
        transport: 'ajax',
        customHandler: ({ socketId, channelName }, callback) => {
          const member = channelName.startsWith('presence-') ? { user_id: userId, ...(identity.userInfo && { user_info: identity.userInfo }) } : undefined;
          callback(null, signer.authorizeChannel(socketId, channelName, member));
        },
      },
      userAuthentication: {
        endpoint: '/unused',
        transport: 'ajax',
        customHandler: ({ socketId }, callback) =>
          callback(null, signer.authenticateUser(socketId, { id: userId, ...(identity.watchlist && { watchlist: identity.watchlist }) })),
      },
    });
    const client = new ChannelClient(pusher, node);
    this.clients.push(client);
    await until(() => pusher.connection.state === 'connected', `connection to port ${node.port}`);
    return client;
  }

  /**
   * A client whose connection the kernel gave to front-end thread `thread` (its socket id says
   * which): connections are opened until one lands there, the others closed.
   */
  async connectOnThread(node: HeraldProcess, thread: number, identity: Identity = {}): Promise<ChannelClient> {
    for (let attempt = 0; attempt < 60; attempt++) {
      const client = await this.connect(node, identity);
      if (threadOf(client.socketId) === thread) return client;
      client.disconnect();
      this.clients.splice(this.clients.indexOf(client), 1);
    }
    throw new Error(`no connection landed on front-end thread ${thread} in 60 tries`);
  }

  /** connect() then signIn(). */
  async signedIn(node: HeraldProcess, identity: Identity): Promise<ChannelClient> {
    const client = await this.connect(node, identity);
    await client.signIn();
    return client;
  }

  disconnectAll(): void {
    for (const c of this.clients.splice(0)) c.disconnect();
  }
}

/** What pusher-js binds events on: a channel, a connection, a user's watchlist. */
interface PusherJsEvents {
  bind(event: string, callback: (data: never) => void): unknown;
  unbind(event: string, callback: (data: never) => void): unknown;
}

/**
 * The data of the next `event` on a pusher-js channel or connection. Bound when called: call it
 * before what causes the event (keep the promise, await it after).
 */
export async function nextPusherEvent<T = unknown>(target: PusherJsEvents, event: string, timeoutMs = 10_000): Promise<T> {
  const seen: T[] = [];
  const record = (data: T): void => {
    seen.push(data);
  };
  target.bind(event, record as (data: never) => void);
  try {
    await until(() => seen.length > 0, `pusher-js event ${event}`, timeoutMs);
    return seen[0]!;
  } finally {
    target.unbind(event, record as (data: never) => void);
  }
}

/**
 * A round trip on a pusher-js connection: sends pusher:ping and resolves once the pong is back.
 * The server has then handled whatever the connection sent before the ping, and whatever the
 * server sent the connection before the pong has arrived (uWS keeps a socket's sends and topic
 * publishes in one order): the marker for "nothing (more) arrives on this connection".
 */
export async function roundTrip(pusher: PusherJsClient, timeoutMs = 10_000): Promise<void> {
  let ponged = false;
  const onMessage = (message: { event?: string }): void => {
    if (message.event === 'pusher:pong') ponged = true;
  };
  pusher.connection.bind('message', onMessage);
  try {
    pusher.send_event('pusher:ping', {});
    await until(() => ponged, `pusher:pong on connection ${pusher.connection.socket_id}`, timeoutMs);
  } finally {
    pusher.connection.unbind('message', onMessage);
  }
}

/** The status and JSON body of a refused `pusher` SDK call (fails the test if it succeeded). */
export async function refusal(call: Promise<unknown>): Promise<{ status: number | undefined; body: Record<string, unknown> }> {
  const err = (await call.then(
    () => null,
    (e: unknown) => e,
  )) as PusherServer.RequestError | null;
  if (!err) throw new Error('the request should have been refused, it succeeded');
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(err.body ?? '{}') as Record<string, unknown>;
  } catch {
    body = { raw: err.body };
  }
  return { status: err.status, body };
}

/** A bare WebSocket to `/app/<key>` of `node`: its first frame and how it closed. */
export async function rawConnection(node: HeraldProcess, key: string): Promise<{ ws: WebSocket; first: Frame; closed: Promise<number> }> {
  const ws = new WebSocket(`ws://127.0.0.1:${node.port}/app/${key}?protocol=7&client=js&version=8.4.0&flash=false`);
  ws.on('error', () => undefined);
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  const first = await new Promise<Frame>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no frame from port ${node.port} within 10 s`)), 10_000);
    ws.once('message', (raw) => {
      clearTimeout(timer);
      resolve(decodeFrame(raw.toString()));
    });
    void closed.then((code) => {
      clearTimeout(timer);
      reject(new Error(`closed with ${code} before the first frame`));
    });
  });
  return { ws, first, closed };
}

/** A bare WebSocket to `/app/<key>` of `node` that the kernel gave to front-end thread `thread` (the others tried are closed). */
export async function rawConnectionOnThread(node: HeraldProcess, key: string, thread: number): Promise<{ ws: WebSocket; socketId: string; closed: Promise<number> }> {
  for (let attempt = 0; attempt < 60; attempt++) {
    const { ws, first, closed } = await rawConnection(node, key);
    const socketId = (first.data as { socket_id: string }).socket_id;
    if (threadOf(socketId) === thread) return { ws, socketId, closed };
    ws.close();
  }
  throw new Error(`no connection landed on front-end thread ${thread} in 60 tries`);
}

/**
 * Resolves once `node` accepts a connection for `key` (its first frame is
 * `pusher:connection_established`); for an app another node created, which this one learns of
 * through a notice. Each refused try is closed.
 */
export async function servesKey(node: HeraldProcess, key: string, timeoutMs = 10_000): Promise<void> {
  await until(
    async () => {
      const { ws, first } = await rawConnection(node, key);
      ws.close();
      return first.event === 'pusher:connection_established';
    },
    `port ${node.port} to accept key ${key}`,
    timeoutMs,
  );
}
