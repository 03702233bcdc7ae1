/**
 * An HTTP fallback session belongs to the client address that opened it: another address
 * holding the session's URL (an access log, a HAR file) gets what an unknown id gets — its own
 * new session for a stream or poll, 404 for a send — and the owner's stream carries on. Behind
 * a trusted proxy the forwarded address is the one bound; a client's own X-Forwarded-For is
 * not believed. Sends that miss are counted per address and refused with 429 past the budget.
 * And the per-IP new-connection limit counts sessions by their address (it once failed every
 * session with 1011), as it counts WebSockets: behind a trusted proxy, by forwarded address.
 * Other client addresses are other loopback addresses (127.0.0.2, ...).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEFAULT_APP, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { connectSession, openStream, pollFrom, pollUntil, send, sendFrom, sessionBase as baseOf, type From } from '../helpers/fallback-session.js';
import { until } from '../helpers/wait.js';

const PROXY = '127.0.0.3';
const MISSES_PER_MINUTE = 5;
const PER_IP_APP = { id: 'per-ip-app', key: 'per-ip-key', secret: 'per-ip-secret', maxNewConnectionsPerSecondPerIp: 1 };

let herald: HeraldProcess;

const sessionBase = (key: string = DEFAULT_APP.key): string => baseOf(herald.baseUrl, key);

/** The first frame a WebSocket from `from` gets: connection_established or a refusal. */
function firstFrame(from: From): Promise<{ event: string; data: unknown }> {
  const headers: Record<string, string> = from.forwardedFor === undefined ? {} : { 'x-forwarded-for': from.forwardedFor };
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${PER_IP_APP.key}?protocol=7&client=js&version=8.6.0`, { localAddress: from.localAddress, headers });
  return new Promise((resolve, reject) => {
    ws.once('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString('utf8')) as { event: string; data: unknown };
      resolve({ event: frame.event, data: typeof frame.data === 'string' ? (JSON.parse(frame.data) as unknown) : frame.data });
      ws.close();
    });
    ws.once('error', reject);
  });
}

function socketIdOf(frames: Array<{ event: string; data?: unknown }>): string | undefined {
  const established = frames.find((f) => f.event === 'pusher:connection_established');
  return established ? (JSON.parse(established.data as string) as { socket_id: string }).socket_id : undefined;
}

describe('HTTP fallback sessions are bound to the address that opened them', () => {
  beforeAll(async () => {
    herald = await startHerald({
      config: {
        apps: [DEFAULT_APP, PER_IP_APP],
        trustedProxies: [PROXY],
        httpFallback: { sessionTimeoutMs: 3000, heartbeatMs: 1000, maxSessionMissesPerMinute: MISSES_PER_MINUTE },
      },
    });
  }, 60_000);

  afterAll(async () => {
    await herald?.dispose();
  });

  it("another address with the session's URL gets a session of its own, never the owner's events, and the owner's stream stays open", async () => {
    const base = sessionBase();
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const socketId = await connectSession(base);
    const channel = 'private-bound';
    const auth = sdk.authorizeChannel(socketId, channel);
    expect((await send(base, [{ event: 'pusher:subscribe', data: { channel, auth: auth.auth } }])).status).toBe(204);
    await pollUntil(base, (l) => l.frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'));
    const owner = openStream(base);
    expect(await owner.status).toBe(200);

    // Sends from another address get the 404 of an unknown session, body for body.
    const sender: From = { localAddress: '127.0.0.9' };
    const foreign = await sendFrom(base, sender, [{ event: 'client-as-victim', channel, data: {} }]);
    const unknown = await sendFrom(sessionBase(), sender, [{ event: 'client-as-victim', channel, data: {} }]);
    expect(foreign.status).toBe(404);
    expect(foreign.text).toBe(unknown.text);
    expect(JSON.parse(foreign.text)).toMatchObject({ code: 'FALLBACK_SESSION_NOT_FOUND' });

    const attacker: From = { localAddress: '127.0.0.2' };
    const stolen = openStream(base, attacker);
    try {
      expect(await stolen.status).toBe(200);
      // What an unknown id gets: the open and a connection of its own.
      await until(() => socketIdOf(stolen.lines().frames), () => `the second address's own connection_established; got ${stolen.text()}`);
      expect(stolen.lines().opened).toBe(true);
      expect(socketIdOf(stolen.lines().frames)).not.toBe(socketId);

      // The owner's stream was not cut: the private event reaches it, and only it.
      await sdk.trigger(channel, 'secret', { n: 1 });
      await until(() => owner.lines().frames.some((f) => f.event === 'secret'), () => `the owner's stream to get the event; got ${owner.text()}`);
      expect(owner.ended()).toBe(false);
      expect(owner.lines().opened).toBe(false);
      // The owner's own send still reaches its session (the marker after the event on the same stream).
      expect((await send(base, [{ event: 'pusher:ping', data: {} }])).status).toBe(204);
      await until(() => owner.lines().frames.some((f) => f.event === 'pusher:pong'), () => `the owner's pong; got ${owner.text()}`);
      expect(stolen.lines().frames.map((f) => f.event)).toEqual(['pusher:connection_established']);
    } finally {
      owner.close();
      stolen.close();
    }
  });

  it('behind a trusted proxy the forwarded address is bound; a client that is not a trusted proxy cannot forward one', async () => {
    const base = sessionBase();
    const client: From = { localAddress: PROXY, forwardedFor: '198.51.100.9, 203.0.113.7' };
    const opened = await pollFrom(base, client);
    expect(opened.status).toBe(200);
    expect(opened.lines.opened).toBe(true);
    expect((await sendFrom(base, client, [])).status).toBe(204);
    // Another client behind the same proxy.
    expect((await sendFrom(base, { localAddress: PROXY, forwardedFor: '203.0.113.8' }, [])).status).toBe(404);
    // What a client writes itself sits left of what the proxy appends: not believed.
    expect((await sendFrom(base, { localAddress: PROXY, forwardedFor: '203.0.113.7, 203.0.113.9' }, [])).status).toBe(404);
    // Not a trusted proxy: its header is ignored.
    expect((await sendFrom(base, { localAddress: '127.0.0.6', forwardedFor: '203.0.113.7' }, [])).status).toBe(404);
    expect((await sendFrom(base, client, [])).status).toBe(204);
  });

  it('refuses sends with 429 and Retry-After once an address has missed its budget, found or not; other addresses are not affected', async () => {
    const guesser: From = { localAddress: '127.0.0.4' };
    const own = sessionBase();
    expect((await pollFrom(own, guesser)).lines.opened).toBe(true);
    expect((await sendFrom(own, guesser, [])).status).toBe(204);
    for (let i = 0; i < MISSES_PER_MINUTE; i++) expect((await sendFrom(sessionBase(), guesser, [])).status).toBe(404);
    for (const base of [sessionBase(), own]) {
      const refused = await sendFrom(base, guesser, []);
      expect(refused.status).toBe(429);
      expect(JSON.parse(refused.text)).toMatchObject({ code: 'FALLBACK_TOO_MANY_MISSES' });
      const retryAfter = Number(refused.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(refused.headers['access-control-allow-origin']).toBe('*');
    }
    expect((await sendFrom(sessionBase(), { localAddress: '127.0.0.5' }, [])).status).toBe(404);
    // The budget counts the forwarded address behind a trusted proxy, not the proxy's.
    expect((await sendFrom(sessionBase(), { localAddress: PROXY, forwardedFor: '203.0.113.50' }, [])).status).toBe(404);
  });

  it("opens sessions of an app with maxNewConnectionsPerSecondPerIp, counted by each session's address", async () => {
    const first = await pollUntil(sessionBase(PER_IP_APP.key), (l) => l.close !== null || socketIdOf(l.frames) !== undefined);
    expect(first.close).toBeNull();
    expect(socketIdOf(first.frames)).toBeDefined();
    // One address opening sessions back to back is refused (4301) once two land in one second.
    const from: From = { localAddress: '127.0.0.7' };
    const refused = await until(
      async () => {
        const l = (await pollFrom(sessionBase(PER_IP_APP.key), from)).lines;
        return l.close?.[0] === 4301 ? l : null;
      },
      'a session refused by maxNewConnectionsPerSecondPerIp',
    );
    expect(refused.frames[0]).toMatchObject({ event: 'pusher:error', data: { code: 4301 } });
    // Another address is counted apart.
    const other = await pollFrom(sessionBase(PER_IP_APP.key), { localAddress: '127.0.0.8' });
    expect(other.lines.close).toBeNull();
    expect(socketIdOf(other.lines.frames)).toBeDefined();
  });

  it('counts WebSockets through a trusted proxy by their forwarded address', async () => {
    const behindProxy = (client: string): From => ({ localAddress: PROXY, forwardedFor: client });
    // Five clients behind the proxy at once: one new connection each, none over its limit of 1/s.
    const firsts = await Promise.all([70, 71, 72, 73, 74].map((n) => firstFrame(behindProxy(`203.0.113.${n}`))));
    expect(firsts.map((f) => f.event)).toEqual(Array(5).fill('pusher:connection_established'));
    const refused = await until(
      async () => {
        const frame = await firstFrame(behindProxy('203.0.113.60'));
        return frame.event === 'pusher:error' ? frame : null;
      },
      'a WebSocket refused by maxNewConnectionsPerSecondPerIp',
    );
    expect(refused.data).toMatchObject({ code: 4301 });
    // Another client behind the same proxy is counted apart.
    expect((await firstFrame(behindProxy('203.0.113.61'))).event).toBe('pusher:connection_established');
  });
});
