/**
 * Two front-end threads in one Herald process (`frontEndThreads: 2`): official pusher-js
 * clients placed on purpose on one thread or the other (their socket ids carry the thread, and
 * the per-thread connection metric confirms it), the official `pusher` SDK for the HTTP API.
 * Every assertion names a client on the *other* thread, so a thread that acts only on its own
 * sockets fails. One process, one view: presence, counts, client events, exclusion, order,
 * watchlists, terminate, limits, the admin API and metrics through any thread, fallback
 * sessions, and a thread that dies.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request as httpRequest } from 'node:http';
import WebSocket from 'ws';
import { ClientPool, rawConnectionOnThread } from '../helpers/channel-clients.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { flushedBy, until } from '../helpers/wait.js';
import { signedQuery } from '../helpers/signed-request.js';
import { connectSession, FALLBACK_QUERY, openStream, parseLines, pollFrom, send, sessionBase, type OpenStream } from '../helpers/fallback-session.js';
import { threadOf } from '../../src/channels/socket-id.js';

const APP = { id: 'ft-app', key: 'ft-key', secret: 'ft-secret', clientEvents: true, userAuthentication: true, subscriptionCount: true };
const SMALL = { id: 'ft-small', key: 'ft-small-key', secret: 'ft-small-secret', maxConnections: 2 };
const TOKEN = 'front-end-threads-admin-token';
const pool = new ClientPool(APP);
let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({ config: { frontEndThreads: 2, apps: [APP, SMALL], admin: { token: TOKEN } }, env: { HERALD_TEST_HOOKS: '1' } });
});
afterAll(async () => {
  await herald?.dispose();
});
afterEach(() => pool.disconnectAll());

async function metrics(): Promise<Map<string, number>> {
  return parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
}

/** Open connections per thread, as the metric says. */
async function perThread(): Promise<[number, number]> {
  const m = await metrics();
  return [series(m, 'herald_front_end_connections', { thread: '0' }), series(m, 'herald_front_end_connections', { thread: '1' })];
}

describe('two front-end threads', () => {
  it('places sockets on both threads, as the metric shows', async () => {
    const a = await pool.connectOnThread(herald, 0);
    const b = await pool.connectOnThread(herald, 1);
    expect(threadOf(a.socketId)).toBe(0);
    expect(threadOf(b.socketId)).toBe(1);
    const m = await metrics();
    expect(series(m, 'herald_front_end_threads')).toBe(2);
    await until(async () => {
      const [t0, t1] = await perThread();
      return t0 === 1 && t1 === 1;
    }, 'one connection on each thread');
    expect(series(await metrics(), 'herald_connections', { app_id: APP.id })).toBe(2);
  });

  it('delivers triggered events to both threads, in order, once', async () => {
    const a = await pool.connectOnThread(herald, 0);
    const b = await pool.connectOnThread(herald, 1);
    const ra = await a.subscribe('orders');
    const rb = await b.subscribe('orders');
    const sdk = pool.sdk(herald);
    for (let i = 0; i < 40; i++) await sdk.trigger('orders', 'n', { i });
    await sdk.triggerBatch(Array.from({ length: 10 }, (_, i) => ({ channel: 'orders', name: 'n', data: { i: 40 + i } })));
    const expected = Array.from({ length: 50 }, (_, i) => ({ i }));
    await until(() => ra.data('n').length >= 50 && rb.data('n').length >= 50, 'fifty events on both threads');
    await flushedBy(() => sdk.trigger('orders', 'marker', {}), () => ra.data('marker').length === 1 && rb.data('marker').length === 1, 'the marker');
    expect(ra.data('n')).toEqual(expected);
    expect(rb.data('n')).toEqual(expected);
  });

  it('delivers events triggered one after another through either thread in that order', async () => {
    const a = await pool.connectOnThread(herald, 0);
    const b = await pool.connectOnThread(herald, 1);
    const ra = await a.subscribe('spread');
    const rb = await b.subscribe('spread');
    // Each trigger on a TCP connection of its own: the kernel hands them to either thread.
    const trigger = (i: number): Promise<number> =>
      new Promise((resolve, reject) => {
        const body = JSON.stringify({ name: 'n', channel: 'spread', data: JSON.stringify({ i }) });
        const path = `/apps/${APP.id}/events`;
        const req = httpRequest(`${herald.baseUrl}${path}?${signedQuery(APP, 'POST', path, { body })}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.once('error', reject);
        req.end(body);
      });
    for (let i = 0; i < 30; i++) expect(await trigger(i)).toBe(200);
    const expected = Array.from({ length: 30 }, (_, i) => ({ i }));
    await until(() => ra.data('n').length >= 30 && rb.data('n').length >= 30, 'thirty events on both threads');
    expect(ra.data('n')).toEqual(expected);
    expect(rb.data('n')).toEqual(expected);
  });

  it('excludes the socket_id given to a trigger, on whichever thread it is', async () => {
    const a = await pool.connectOnThread(herald, 0);
    const b = await pool.connectOnThread(herald, 1);
    const ra = await a.subscribe('excl');
    const rb = await b.subscribe('excl');
    const sdk = pool.sdk(herald);
    await sdk.trigger('excl', 'skip-b', 'x', { socket_id: b.socketId });
    await sdk.trigger('excl', 'skip-a', 'y', { socket_id: a.socketId });
    await flushedBy(() => sdk.trigger('excl', 'marker', {}), () => ra.data('marker').length === 1 && rb.data('marker').length === 1, 'the marker');
    expect(ra.data('skip-b')).toEqual(['x']);
    expect(rb.data('skip-b')).toEqual([]);
    expect(rb.data('skip-a')).toEqual(['y']);
    expect(ra.data('skip-a')).toEqual([]);
  });

  it('relays client events to the other thread, never back to the sender', async () => {
    const a = await pool.connectOnThread(herald, 0, { userId: 'alice' });
    const b = await pool.connectOnThread(herald, 1, { userId: 'bob' });
    const pa = await a.subscribe('private-chat');
    const pb = await b.subscribe('private-chat');
    pa.channel.trigger('client-typing', { who: 'alice' });
    pb.channel.trigger('client-typing', { who: 'bob' });
    await until(() => pa.data('client-typing').length === 1 && pb.data('client-typing').length === 1, 'client events across threads');
    await flushedBy(() => pool.sdk(herald).trigger('private-chat', 'marker', {}), () => pa.data('marker').length === 1 && pb.data('marker').length === 1, 'the marker');
    expect(pa.data('client-typing')).toEqual([{ who: 'bob' }]);
    expect(pb.data('client-typing')).toEqual([{ who: 'alice' }]);
  });

  it('keeps one presence roster and one subscription count for the process', async () => {
    const a = await pool.connectOnThread(herald, 0, { userId: 'ann', userInfo: { n: 1 } });
    const b = await pool.connectOnThread(herald, 1, { userId: 'ben', userInfo: { n: 2 } });
    const pa = await a.subscribe('presence-room');
    const pb = await b.subscribe('presence-room');
    expect(pb.memberIds()).toEqual(['ann', 'ben']);
    await until(() => pa.memberIds().length === 2, 'ann sees ben join');
    expect(pa.memberInfo('ben')).toEqual({ n: 2 });
    const ca = await a.subscribe('counted');
    await b.subscribe('counted');
    await until(() => ca.data('pusher:subscription_count').some((d) => (d as { subscription_count: number }).subscription_count === 2), 'count 2 on thread 0');
    const info = (await (await pool.sdk(herald).get({ path: '/channels/presence-room/users' })).json()) as { users: { id: string }[] };
    expect(info.users.map((u) => u.id).sort()).toEqual(['ann', 'ben']);
    b.disconnect();
    await until(() => pa.memberIds().length === 1, 'ann sees ben leave');
  });

  it('reports users online and offline across threads (watchlist), and terminates them on every thread', async () => {
    const dave = await pool.connectOnThread(herald, 1, { userId: 'dave' });
    await dave.signIn();
    const carol = await pool.connectOnThread(herald, 0, { userId: 'carol', watchlist: ['dave', 'erin'] });
    await carol.signIn();
    await until(() => carol.watchlist.some((e) => e.name === 'online'), 'dave online for carol');
    expect(carol.watchlist).toContainEqual({ name: 'online', user_ids: ['dave'] });
    const erin0 = await pool.connectOnThread(herald, 0, { userId: 'erin' });
    await erin0.signIn();
    const erin1 = await pool.connectOnThread(herald, 1, { userId: 'erin' });
    await erin1.signIn();
    await until(() => carol.watchlist.some((e) => e.name === 'online' && e.user_ids.includes('erin')), 'erin online');
    const before = carol.watchlist.length;
    await pool.sdk(herald).terminateUserConnections('erin');
    await erin0.gone();
    await erin1.gone();
    await until(() => carol.watchlist.length > before, 'erin offline');
    expect(carol.watchlist.slice(before)).toEqual([{ name: 'offline', user_ids: ['erin'] }]);
    expect(dave.state).toBe('connected');
  });

  it('sends to a user signed in on the other thread', async () => {
    const a = await pool.connectOnThread(herald, 1, { userId: 'fay' });
    await a.signIn();
    await pool.sdk(herald).sendToUser('fay', 'note', { hi: 1 });
    await until(() => a.userEvents.some((e) => e.event === 'note'), 'the user event');
  });

  it("counts an app's maxConnections once for the process", async () => {
    const small = new ClientPool(SMALL);
    try {
      await small.connectOnThread(herald, 0);
      await small.connectOnThread(herald, 1);
      // A third, on whichever thread, is over the quota.
      const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${SMALL.key}?protocol=7`);
      const code = await new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
      expect(code).toBe(4004);
    } finally {
      small.disconnectAll();
    }
  });

  it('serves the admin API through every thread', async () => {
    for (let i = 0; i < 6; i++) {
      const res = await fetch(`${herald.baseUrl}/admin/v1/apps`, { headers: { authorization: `Bearer ${TOKEN}` } });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { apps: { id: string }[] };
      expect(body.apps.map((a) => a.id)).toContain(APP.id);
    }
  });
});

describe('tenants, fallback and the end of a process with two front-end threads', () => {
  it('applies an app created and deleted through the admin API on both threads', async () => {
    const created = { id: 'ft-new', key: 'ft-new-key', secret: 'ft-new-secret' };
    const res = await fetch(`${herald.baseUrl}/admin/v1/apps`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(created) });
    expect(res.status).toBe(201);
    const on0 = await rawConnectionOnThread(herald, created.key, 0);
    const on1 = await rawConnectionOnThread(herald, created.key, 1);
    const del = await fetch(`${herald.baseUrl}/admin/v1/apps/${created.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(del.status).toBe(204);
    expect(await on0.closed).toBe(4001);
    expect(await on1.closed).toBe(4001);
  });

  it('keeps an HTTP fallback session whatever thread its requests land on', async () => {
    const base = sessionBase(herald.baseUrl, APP.key);
    const socketId = await connectSession(base);
    const owner = threadOf(socketId);
    // Each request on a connection of its own: the kernel spreads them over both threads, and
    // those on the other thread are relayed to the session's.
    const fresh = (path: string, body = ''): Promise<{ status: number; text: string }> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(`${base}/${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json' } }, (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        });
        req.once('error', reject);
        req.end(body);
      });
    const sent = await fresh('xhr_send', JSON.stringify([JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'fb-news' } })]));
    expect(sent.status).toBe(204);
    const events: string[] = [];
    const pollOnce = async (): Promise<void> => {
      const answer = await fresh(`xhr${FALLBACK_QUERY}`);
      expect(answer.status).toBe(200);
      for (const f of parseLines(answer.text).frames) events.push(f.event === 'n' ? `n${JSON.stringify(JSON.parse(f.data as string))}` : f.event);
    };
    await until(async () => {
      await pollOnce();
      return events.includes('pusher_internal:subscription_succeeded');
    }, 'the subscription over the session');
    for (let i = 0; i < 8; i++) {
      await pool.sdk(herald).trigger('fb-news', 'n', { i });
      await until(async () => {
        await pollOnce();
        return events.includes(`n{"i":${i}}`);
      }, `event ${i} through the session on thread ${owner}`);
    }
    expect(events.filter((e) => e.startsWith('n'))).toEqual(Array.from({ length: 8 }, (_, i) => `n{"i":${i}}`));
  });

  it("relays a session's stream re-opened on the other thread (pusher-js re-opens it after 256 KB): it continues the session, events in order", async () => {
    const base = sessionBase(herald.baseUrl, APP.key);
    const first = openStream(base);
    const established = (s: OpenStream): string | undefined => {
      const frame = s.lines().frames.find((f) => f.event === 'pusher:connection_established');
      return frame ? (JSON.parse(frame.data as string) as { socket_id: string }).socket_id : undefined;
    };
    const socketId = await until(() => established(first), () => `the stream's connection_established; got ${first.text()}`);
    const owner = threadOf(socketId);
    expect((await send(base, [{ event: 'pusher:subscribe', data: { channel: 'fb-stream' } }])).status).toBe(204);
    await until(() => first.lines().frames.some((f) => f.event === 'pusher_internal:subscription_succeeded'), () => `the subscription; got ${first.text()}`);

    // A connection the other thread serves: a throw-away session polled over it names its thread.
    let agent: Agent | undefined;
    for (let attempt = 0; attempt < 60 && !agent; attempt++) {
      const candidate = new Agent({ keepAlive: true, maxSockets: 1 });
      const probe = sessionBase(herald.baseUrl, APP.key);
      let probeId: string | undefined;
      for (let polls = 0; polls < 5 && !probeId; polls++) {
        const frame = (await pollFrom(probe, { agent: candidate })).lines.frames.find((f) => f.event === 'pusher:connection_established');
        probeId = frame ? (JSON.parse(frame.data as string) as { socket_id: string }).socket_id : undefined;
      }
      if (probeId !== undefined && threadOf(probeId) !== owner) agent = candidate;
      else candidate.destroy();
    }
    expect(agent, `no connection landed on the thread other than ${owner} in 60 tries`).toBeDefined();
    const again = openStream(base, { agent: agent! });
    try {
      expect(await again.status).toBe(200);
      // The session continued (a heartbeat first), not a new one opened there (`o`); the old stream let go.
      await until(() => again.text().includes('\n'), () => `the re-opened stream's first line; got ${again.text()}`);
      expect(again.text().startsWith('h\n')).toBe(true);
      expect(again.lines().opened).toBe(false);
      await until(() => first.ended(), 'the first stream to be let go');
      const sdk = pool.sdk(herald);
      for (let i = 0; i < 20; i++) await sdk.trigger('fb-stream', 'n', { i });
      await until(() => again.lines().frames.filter((f) => f.event === 'n').length >= 20, () => `twenty events on the re-opened stream; got ${again.text()}`);
      expect(again.lines().frames.filter((f) => f.event === 'n').map((f) => JSON.parse(f.data as string) as unknown)).toEqual(Array.from({ length: 20 }, (_, i) => ({ i })));
      // The client's sends reach the session too, and its answers come down the relayed stream.
      expect((await send(base, [{ event: 'pusher:ping', data: {} }])).status).toBe(204);
      await until(() => again.lines().frames.some((f) => f.event === 'pusher:pong'), () => `the pong on the re-opened stream; got ${again.text()}`);
      expect(again.ended()).toBe(false);
      expect(first.lines().frames.filter((f) => f.event === 'n')).toEqual([]);
    } finally {
      again.close();
      first.close();
      agent?.destroy();
    }
  });
});

describe('the end of a process with two front-end threads', () => {
  it('drains every thread on SIGTERM: connections on both get 4200', async () => {
    const own = await startHerald({ config: { frontEndThreads: 2, apps: [APP] } });
    try {
      const on0 = await rawConnectionOnThread(own, APP.key, 0);
      const on1 = await rawConnectionOnThread(own, APP.key, 1);
      expect(await own.stop('SIGTERM')).toBe(0);
      expect(await on0.closed).toBe(4200);
      expect(await on1.closed).toBe(4200);
    } finally {
      await own.dispose();
    }
  });

  it('starts with a shard request timeout shorter than the shards take to attach a thread (1 ms), and serves on both threads', async () => {
    const own = await startHerald({ config: { frontEndThreads: 2, shardRequestTimeoutMs: 1, apps: [APP] } });
    try {
      const on = [await rawConnectionOnThread(own, APP.key, 0), await rawConnectionOnThread(own, APP.key, 1)];
      expect(on.map((c) => threadOf(c.socketId))).toEqual([0, 1]);
    } finally {
      await own.dispose();
    }
  });

  it("ends the process when a thread dies, after closing the other thread's connections with 4200", async () => {
    const own = await startHerald({ config: { frontEndThreads: 2, apps: [APP] }, env: { HERALD_TEST_HOOKS: '1' } });
    try {
      const on = [await rawConnectionOnThread(own, APP.key, 0), await rawConnectionOnThread(own, APP.key, 1)];
      const exited = new Promise<number | null>((resolve) => own.child!.once('exit', (code) => resolve(code)));
      const crash = await fetch(`${own.baseUrl}/debug/front-end/crash`, { method: 'POST' });
      expect(crash.status).toBe(200);
      const dead = ((await crash.json()) as { thread: number }).thread;
      expect(await exited).toBe(1);
      // The thread that died took its connection with it (1006); the other one was closed with 4200.
      expect(await on[dead]!.closed).toBe(1006);
      expect(await on[1 - dead]!.closed).toBe(4200);
      expect(own.stderr).toContain('front-end thread died');
    } finally {
      await own.dispose();
    }
  });
});
