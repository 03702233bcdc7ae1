/**
 * The WebSocket endpoint under pressure: silent clients (ping, 4201), a consumer too slow to
 * keep up (4100), a storm of concurrent subscribes, unsubscribes and dropped sockets (the
 * shard state must come out exact), and shutdown (4200). Raw `ws` sockets do what well-behaved
 * clients never do; pusher-js shows that well-behaved ones are left alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Socket } from 'node:net';
import { isDeepStrictEqual } from 'node:util';
import PusherServer from 'pusher';
import WebSocket from 'ws';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk, pusherJsClient } from '../helpers/sdk-clients.js';
import { nextEvent, sleep, until } from '../helpers/wait.js';

const IDLE = { id: 'idle', key: 'idle-key', secret: 'idle-secret', activityTimeout: 5 };
const FLOOD = { id: 'flood', key: 'flood-key', secret: 'flood-secret', clientEvents: true, maxClientEventsPerSecond: 5000 };
const STORM = { id: 'storm', key: 'storm-key', secret: 'storm-secret', subscriptionCount: true, maxPresenceMembers: 1000 };
type App = { id: string; key: string; secret: string };

const BACKPRESSURE_LIMIT = 256 * 1024;

let herald: HeraldProcess;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  herald = await startHerald({
    config: {
      apps: [IDLE, FLOOD, STORM],
      webSocketPongTimeoutMs: 1000,
      webSocketSweepIntervalMs: 100,
      maxSocketBackpressureBytes: BACKPRESSURE_LIMIT,
    },
  });
});
afterAll(async () => {
  for (const c of cleanups) c();
  await herald?.dispose();
});

function sdk(app: App): PusherServer {
  return channelsSdk(herald.port, app);
}

/** A bare protocol client that records every frame (data JSON-decoded when a string). */
class RawClient {
  readonly frames: Frame[] = [];
  bytes = 0;
  private cursor = 0;
  readonly closed: Promise<{ code: number; reason: string }>;
  socketId = '';

  constructor(readonly ws: WebSocket) {
    ws.on('message', (raw: Buffer) => {
      this.bytes += raw.length;
      this.frames.push(decodeFrame(raw.toString()));
    });
    ws.on('error', () => undefined);
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() })));
    cleanups.push(() => ws.terminate());
  }

  static async connect(app: App): Promise<RawClient> {
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${app.key}?protocol=7&client=js&version=8.4.0`);
    const c = new RawClient(ws);
    await nextEvent(ws, 'open', `a WebSocket to app ${app.id}`);
    const established = await c.next((f) => f.event === 'pusher:connection_established');
    c.socketId = (established.data as { socket_id: string }).socket_id;
    return c;
  }

  send(message: unknown): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(message));
  }

  /** The next frame after the previous match that matches (waits up to `ms`). */
  async next(match: (f: Frame) => boolean, ms = 10_000): Promise<Frame> {
    const takeMatch = (): Frame | undefined => {
      while (this.cursor < this.frames.length) {
        const f = this.frames[this.cursor++]!;
        if (match(f)) return f;
      }
      return undefined;
    };
    return until(takeMatch, () => `a matching frame; last: ${JSON.stringify(this.frames.slice(-3))}`, ms);
  }

  subscribe(app: App, channel: string, userId?: string): void {
    const auth = channel.startsWith('presence-')
      ? sdk(app).authorizeChannel(this.socketId, channel, { user_id: userId ?? 'anon' })
      : channel.startsWith('private-')
        ? sdk(app).authorizeChannel(this.socketId, channel)
        : {};
    this.send({ event: 'pusher:subscribe', data: { channel, ...auth } });
  }
}

describe('liveness', () => {
  it('pings a silent client after the activity timeout and closes it with 4201 when it does not answer', async () => {
    const started = Date.now();
    const silent = await RawClient.connect(IDLE);
    const answering = await RawClient.connect(IDLE);
    answering.ws.on('message', (raw: Buffer) => {
      if (raw.toString().includes('"pusher:ping"')) answering.send({ event: 'pusher:pong', data: {} });
    });
    const official = pusherJsClient(herald.port, IDLE.key);
    cleanups.push(() => official.disconnect());
    const officialStates: string[] = [];
    official.connection.bind('state_change', ({ current }: { current: string }) => officialStates.push(current));

    await silent.next((f) => f.event === 'pusher:ping', 8000);
    const pingedAfter = Date.now() - started;
    expect(pingedAfter).toBeGreaterThanOrEqual(4900);
    const { code } = await silent.closed;
    expect(code).toBe(4201);
    // Told why first, as every other close that carries a 4xxx code.
    expect(silent.frames.find((f) => f.event === 'pusher:error')?.data).toMatchObject({ code: 4201 });
    expect(Date.now() - started - pingedAfter).toBeGreaterThanOrEqual(900);

    await answering.next((f) => f.event === 'pusher:ping', 1000);
    // time: past the 1 s pong timeout, a client that answered is still open.
    await sleep(1300);
    expect(answering.ws.readyState).toBe(WebSocket.OPEN);
    expect(official.connection.state).toBe('connected');
    expect(officialStates).toEqual(['connected']);
  }, 15_000);
});

describe('backpressure', () => {
  it('cuts off a consumer that stops reading with 4100, and keeps the others', async () => {
    const slow = await RawClient.connect(FLOOD);
    const fast = await RawClient.connect(FLOOD);
    slow.subscribe(FLOOD, 'presence-flood', 'slow');
    await slow.next((f) => f.event === 'pusher_internal:subscription_succeeded');
    fast.subscribe(FLOOD, 'presence-flood', 'fast');
    await fast.next((f) => f.event === 'pusher_internal:subscription_succeeded');
    await slow.next((f) => f.event === 'pusher_internal:member_added');

    // Stop reading: the kernel buffers fill, then the server's send buffer for this socket grows.
    const tcp = (slow.ws as unknown as { _socket: Socket })._socket;
    tcp.pause();
    const data = 'z'.repeat(8000);
    let sent = 0;
    const flood = setInterval(() => {
      for (let i = 0; i < 2; i++, sent++) fast.send({ event: 'client-flood', channel: 'presence-flood', data });
    }, 10);
    try {
      const removed = await fast.next((f) => f.event === 'pusher_internal:member_removed', 30_000);
      expect(removed.data).toEqual({ user_id: 'slow' });
    } finally {
      clearInterval(flood);
    }
    tcp.resume();
    const { code } = await slow.closed;
    expect(code).toBe(4100);
    // It was cut off for its backlog: more than the limit was queued for it when it stopped reading.
    expect(slow.bytes).toBeGreaterThan(BACKPRESSURE_LIMIT);
    expect(slow.frames.filter((f) => f.event === 'client-flood').length).toBeLessThanOrEqual(sent);
    // The fast client and the server are fine.
    expect(fast.ws.readyState).toBe(WebSocket.OPEN);
    fast.send({ event: 'pusher:ping', data: {} });
    await fast.next((f) => f.event === 'pusher:pong');
  }, 40_000);
});

/** A small deterministic PRNG, so a failing storm can be replayed. */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe('subscription storm', () => {
  it('leaves exact presence members and subscription counts after 200 sockets subscribe, flap and drop concurrently', async () => {
    const SOCKETS = 200;
    const USERS = 40;
    const presence = 'presence-storm';
    const counted = 'storm-count';
    const random = prng(20_251_122);
    const clients = await Promise.all(Array.from({ length: SOCKETS }, () => RawClient.connect(STORM)));

    type Script = 'stay' | 'flap' | 'leave' | 'drop-in-flight' | 'drop-after' | 'close-after-flap';
    const scripts: Script[] = ['stay', 'flap', 'leave', 'drop-in-flight', 'drop-after', 'close-after-flap'];
    const plan = clients.map((c, i) => ({ c, user: `u${i % USERS}`, script: scripts[Math.floor(random() * scripts.length)]! }));

    await Promise.all(
      plan.map(async ({ c, user, script }) => {
        const both = (): void => {
          c.subscribe(STORM, presence, user);
          c.subscribe(STORM, counted);
        };
        const neither = (): void => {
          c.send({ event: 'pusher:unsubscribe', data: { channel: presence } });
          c.send({ event: 'pusher:unsubscribe', data: { channel: counted } });
        };
        switch (script) {
          case 'stay':
            both();
            break;
          case 'flap':
            both();
            neither();
            both();
            break;
          case 'leave':
            both();
            neither();
            break;
          case 'drop-in-flight':
            both();
            c.ws.terminate();
            break;
          case 'drop-after':
            both();
            await c.next((f) => f.event === 'pusher_internal:subscription_succeeded' && f.channel === presence);
            c.ws.terminate();
            break;
          case 'close-after-flap':
            both();
            neither();
            both();
            c.ws.close();
            break;
        }
      }),
    );
    const survivors = plan.filter((p) => p.script === 'stay' || p.script === 'flap');
    await Promise.all(
      survivors.map(async ({ c }) => {
        await c.next((f) => f.event === 'pusher_internal:subscription_succeeded' && f.channel === presence);
      }),
    );
    const expectedUsers = [...new Set(survivors.map((p) => p.user))].sort();
    expect(survivors.length).toBeGreaterThan(20);
    expect(plan.some((p) => p.script === 'drop-in-flight')).toBe(true);

    /** A fresh subscriber's view: presence ids (without itself) and the subscription count it is told. */
    const look = async (): Promise<{ users: string[]; count: number }> => {
      const checker = await RawClient.connect(STORM);
      checker.subscribe(STORM, presence, 'checker');
      const ok = await checker.next((f) => f.event === 'pusher_internal:subscription_succeeded' && f.channel === presence);
      const snapshot = (ok.data as { presence: { ids: string[]; count: number; hash: Record<string, unknown> } }).presence;
      expect(snapshot.count).toBe(snapshot.ids.length);
      expect(Object.keys(snapshot.hash).sort()).toEqual([...snapshot.ids].sort());
      checker.subscribe(STORM, counted);
      const countFrame = await checker.next((f) => f.event === 'pusher_internal:subscription_count' && f.channel === counted);
      checker.ws.close();
      await checker.closed;
      return {
        users: snapshot.ids.filter((id) => id !== 'checker').sort(),
        count: (countFrame.data as { subscription_count: number }).subscription_count - 1,
      };
    };
    /** Fresh subscribers' views until one is `want` (until() then names the last one seen). */
    const lookUntilItIs = async (want: { users: string[]; count: number }): Promise<{ users: string[]; count: number } | undefined> => {
      let seen: { users: string[]; count: number } | undefined;
      await until(async () => isDeepStrictEqual((seen = await look()), want), () => `the state ${JSON.stringify(want)}; last seen ${JSON.stringify(seen)}`);
      return seen;
    };

    expect(await lookUntilItIs({ users: expectedUsers, count: survivors.length })).toEqual({ users: expectedUsers, count: survivors.length });

    // Everyone goes, half of them without a close frame: nothing may be left behind.
    survivors.forEach(({ c }, i) => (i % 2 === 0 ? c.ws.terminate() : c.ws.close()));
    expect(await lookUntilItIs({ users: [], count: 0 })).toEqual({ users: [], count: 0 });
  }, 30_000);
});

describe('shutdown', () => {
  it('closes connections with 4200 (reconnect) on SIGTERM', async () => {
    const c = await RawClient.connect(IDLE);
    const closed = c.closed;
    expect(await herald.stop('SIGTERM')).toBe(0);
    expect((await closed).code).toBe(4200);
  });
});
