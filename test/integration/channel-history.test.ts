/**
 * Channel history (apps[].history) through the built server: frames of history channels carry a
 * strictly increasing serial (other channels' frames are byte-for-byte as before), the history
 * API answers the kept events and refuses other channels, a subscribe with `since` replays
 * what was missed with no gap and no duplicate at the seam while events are being published,
 * eviction answers herald:recovery_failed, and kept events survive kill -9. A replay leaves out
 * what was left out for the client (its own client events, triggers naming its socket) under
 * its current socket id and its previous_socket_ids, which are bounded and checked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { HeraldProcess, appConfig, startHerald } from '../helpers/herald-process.js';
import { decodeFrame } from '../helpers/protocol-frame.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { signedQuery } from '../helpers/signed-request.js';
import { flushedBy, until } from '../helpers/wait.js';

const APP = { id: 'hist-app', key: 'hist-key', secret: 'hist-secret' };
const SMALL = { id: 'small-app', key: 'small-key', secret: 'small-secret' };
const OTHER = { id: 'other-app', key: 'other-key', secret: 'other-secret' };
const HISTORY = { channels: ['history-*', 'private-history-*', 'presence-history-*'], maxEvents: 1000, ttlSeconds: 300 };

let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({
    config: {
      apps: [
        appConfig({ ...APP, clientEvents: true, history: HISTORY }),
        appConfig({ ...SMALL, history: { channels: ['history-*'], maxEvents: 3, ttlSeconds: 300 } }),
        appConfig({ ...OTHER }),
      ],
    },
  });
});

afterAll(async () => {
  await herald?.dispose();
});

interface RawFrame {
  text: string;
  event: string;
  channel?: string;
  data?: unknown;
  serial?: string;
}

/** A bare protocol client recording every frame as received (text and decoded). */
class RawClient {
  readonly frames: RawFrame[] = [];
  socketId = '';
  constructor(readonly ws: WebSocket) {
    ws.on('message', (raw) => {
      const text = raw.toString();
      const frame = decodeFrame(text) as RawFrame;
      this.frames.push({ ...frame, text });
      if (frame.event === 'pusher:connection_established') this.socketId = (frame.data as { socket_id: string }).socket_id;
    });
  }

  static async open(key: string): Promise<RawClient> {
    const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${key}?protocol=7&client=js&version=8.4.0&flash=false`);
    ws.on('error', () => undefined);
    const client = new RawClient(ws);
    await until(() => client.socketId !== '', 'connection_established');
    return client;
  }

  async subscribe(channel: string, extra: Record<string, unknown> = {}): Promise<void> {
    this.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, ...extra } }));
    await until(() => this.frames.some((f) => f.channel === channel && f.event === 'pusher_internal:subscription_succeeded'), `subscription to ${channel}`);
  }

  on(channel: string, event?: string): RawFrame[] {
    return this.frames.filter((f) => f.channel === channel && !f.event.startsWith('pusher') && (event === undefined || f.event === event));
  }

  close(): void {
    this.ws.close();
  }
}

interface HistoryBody {
  events: { serial: string; event: string; data: string; published_at: number }[];
  complete: boolean;
  code?: string;
  error?: string;
}

async function historyOf(app: typeof APP, channel: string, params: Record<string, string> = {}): Promise<{ status: number; body: HistoryBody }> {
  const path = `/apps/${app.id}/channels/${channel}/history`;
  const res = await fetch(`${herald.baseUrl}${path}?${signedQuery(app, 'GET', path, { params })}`);
  return { status: res.status, body: (await res.json()) as HistoryBody };
}

const sequenceOf = (serial: string): number => Number(serial.split('-')[1]);

describe('channel history', () => {
  it('gives history channel frames a strictly increasing serial; other frames are unchanged', async () => {
    const client = await RawClient.open(APP.key);
    await client.subscribe('history-frames');
    await client.subscribe('plain-frames');
    const sdk = channelsSdk(herald.port, APP);
    for (let i = 0; i < 5; i++) expect((await sdk.trigger(['history-frames', 'plain-frames'], 'tick', { i })).status).toBe(200);
    await Promise.all(Array.from({ length: 20 }, (_, i) => sdk.trigger('history-frames', 'burst', { i })));
    await until(() => client.on('history-frames').length === 25 && client.on('plain-frames').length === 5, 'the 25 + 5 events');

    const serials = client.on('history-frames').map((f) => f.serial!);
    expect(serials.every((s) => /^\d{13}-\d{12}$/.test(s))).toBe(true);
    for (let i = 1; i < serials.length; i++) expect(serials[i]! > serials[i - 1]!).toBe(true);
    expect(serials.map(sequenceOf)).toEqual(serials.map((_, i) => sequenceOf(serials[0]!) + i));
    // A plain channel's frame is exactly what it always was.
    for (const [i, f] of client.on('plain-frames').entries()) {
      expect(f.text).toBe(JSON.stringify({ event: 'tick', channel: 'plain-frames', data: JSON.stringify({ i }) }));
    }
    expect(client.on('history-frames')[0]!.text).toBe(JSON.stringify({ event: 'tick', channel: 'history-frames', data: JSON.stringify({ i: 0 }), serial: serials[0] }));
    client.close();
  });

  it('answers the history API: since, limit, complete, and 404 / 400 with catalogue codes', async () => {
    const sdk = channelsSdk(herald.port, APP);
    for (let i = 0; i < 6; i++) expect((await sdk.trigger('history-api', 'e', `d${i}`)).status).toBe(200);
    const all = await historyOf(APP, 'history-api');
    expect(all.status).toBe(200);
    expect(all.body.complete).toBe(true);
    expect(all.body.events.map((e) => e.data)).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
    expect(Object.keys(all.body.events[0]!).sort()).toEqual(['data', 'event', 'published_at', 'serial']);
    expect(typeof all.body.events[0]!.published_at).toBe('number');

    const last2 = await historyOf(APP, 'history-api', { limit: '2' });
    expect(last2.body).toMatchObject({ complete: false });
    expect(last2.body.events.map((e) => e.data)).toEqual(['d4', 'd5']);

    const since = all.body.events[2]!.serial;
    const after = await historyOf(APP, 'history-api', { since });
    expect(after.body).toMatchObject({ complete: true });
    expect(after.body.events.map((e) => e.data)).toEqual(['d3', 'd4', 'd5']);
    const cut = await historyOf(APP, 'history-api', { since, limit: '1' });
    expect(cut.body.complete).toBe(false);
    expect(cut.body.events.map((e) => e.data)).toEqual(['d3']);

    const plain = await historyOf(APP, 'plain-api');
    expect(plain.status).toBe(404);
    expect(plain.body.code).toBe('HISTORY_NOT_ENABLED');
    expect(plain.body.error).toContain('apps[].history');
    expect((await historyOf(OTHER, 'history-api')).body.code).toBe('HISTORY_NOT_ENABLED');
    const bad = await historyOf(APP, 'history-api', { since: 'yesterday' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_PARAMETERS');
    expect((await historyOf(APP, 'history-api', { limit: '0' })).status).toBe(400);
  });

  it('replays what a subscribe with since missed, then live events: no gap, no duplicate, while publishing', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const channel = 'history-seam';
    const first = await RawClient.open(APP.key);
    await first.subscribe(channel);
    expect((await sdk.trigger(channel, 'n', '0')).status).toBe(200);
    await until(() => first.on(channel).length === 1, 'the first event');
    const since = first.on(channel)[0]!.serial!;
    first.close();

    // A steady stream of triggers, one after the other, across the re-subscribe.
    let sent = 1;
    let publishing = true;
    const publisher = (async () => {
      while (publishing) {
        expect((await sdk.trigger(channel, 'n', String(sent))).status).toBe(200);
        sent++;
      }
    })();
    await until(() => sent > 20, '20 events published while away');
    const again = await RawClient.open(APP.key);
    again.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, since } }));
    await until(() => sent > 60, '40 more events published after the re-subscribe');
    publishing = false;
    await publisher;
    await until(() => again.on(channel, 'n').length === sent - 1, () => `events 1..${sent - 1}, got ${again.on(channel, 'n').length}`);

    const received = again.frames.filter((f) => f.channel === channel);
    expect(received[0]!.event).toBe('pusher_internal:subscription_succeeded');
    // The replay ends with herald:recovered {missed}; live events follow it.
    const marker = received.findIndex((f) => f.event === 'herald:recovered');
    expect(received[marker]!.data).toEqual({ missed: marker - 1 });
    expect(marker).toBeGreaterThan(1);
    const events = received.filter((f) => f.event === 'n');
    expect(received).toHaveLength(events.length + 2);
    expect(events.map((f) => f.data)).toEqual(Array.from({ length: sent - 1 }, (_, i) => i + 1));
    expect(events.map((f) => sequenceOf(f.serial!))).toEqual(events.map((_, i) => sequenceOf(since) + 1 + i));
    again.close();
  });

  it('answers herald:recovery_failed when the history no longer reaches back to since', async () => {
    const sdk = channelsSdk(herald.port, SMALL);
    const channel = 'history-evicted';
    for (let i = 0; i < 2; i++) await sdk.trigger(channel, 'n', String(i));
    const kept = await historyOf(SMALL, channel);
    const since = kept.body.events[0]!.serial;
    // maxEvents 3: after 3 more, the event right after `since` is gone.
    for (let i = 2; i < 5; i++) await sdk.trigger(channel, 'n', String(i));
    const client = await RawClient.open(SMALL.key);
    await client.subscribe(channel, { since });
    await sdk.trigger(channel, 'n', 'live');
    await until(() => client.on(channel, 'n').length === 1, 'the live event');
    const frames = client.frames.filter((f) => f.channel === channel).map((f) => [f.event, f.data]);
    expect(frames).toEqual([
      ['pusher_internal:subscription_succeeded', {}],
      ['herald:recovery_failed', { reason: 'history_evicted' }],
      ['n', 'live'],
    ]);

    // Up to date (since = the newest): recovered with nothing to replay.
    const newest = client.on(channel, 'n')[0]!.serial!;
    const uptodate = await RawClient.open(SMALL.key);
    await uptodate.subscribe(channel, { since: newest });
    await uptodate.subscribe('history-marker');
    expect(uptodate.frames.filter((f) => f.channel === channel).map((f) => [f.event, f.data])).toEqual([
      ['pusher_internal:subscription_succeeded', {}],
      ['herald:recovered', { missed: 0 }],
    ]);
    // A channel outside the patterns says so.
    await uptodate.subscribe('plain-since', { since: newest });
    await until(() => uptodate.on('plain-since').length === 1, 'the refusal');
    expect(uptodate.on('plain-since')[0]).toMatchObject({ event: 'herald:recovery_failed', data: { reason: 'not_a_history_channel' } });
    client.close();
    uptodate.close();
  });

  it('gives client events on a history channel a serial too', async () => {
    const signer = channelsSdk(herald.port, APP);
    const channel = 'private-history-chat';
    const [a, b] = await Promise.all([RawClient.open(APP.key), RawClient.open(APP.key)]);
    for (const c of [a, b]) await c.subscribe(channel, { auth: signer.authorizeChannel(c.socketId, channel).auth });
    a.ws.send(JSON.stringify({ event: 'client-typing', channel, data: { who: 'a' } }));
    await until(() => b.on(channel, 'client-typing').length === 1, 'the client event');
    const serial = b.on(channel, 'client-typing')[0]!.serial!;
    expect(serial).toMatch(/^\d{13}-\d{12}$/);
    const kept = await historyOf(APP, channel);
    expect(kept.body.events).toEqual([{ serial, event: 'client-typing', data: '{"who":"a"}', published_at: expect.any(Number) }]);
    a.close();
    b.close();
  });

  it('keeps a presence channel\'s client events with their sender, and replays them so', async () => {
    const signer = channelsSdk(herald.port, APP);
    const channel = 'presence-history-room';
    const join = async (client: RawClient, userId: string, extra: Record<string, unknown> = {}): Promise<void> => {
      const auth = signer.authorizeChannel(client.socketId, channel, { user_id: userId });
      await client.subscribe(channel, { auth: auth.auth, channel_data: auth.channel_data, ...extra });
    };
    const [a, b] = await Promise.all([RawClient.open(APP.key), RawClient.open(APP.key)]);
    await join(a, 'alice');
    await join(b, 'bob');
    a.ws.send(JSON.stringify({ event: 'client-said', channel, data: { text: 'hi' } }));
    await until(() => b.on(channel, 'client-said').length === 1, 'the client event');
    const said = b.on(channel, 'client-said')[0]!;
    expect(JSON.parse(said.text)).toEqual({ event: 'client-said', channel, data: '{"text":"hi"}', user_id: 'alice', serial: said.serial });
    const kept = await historyOf(APP, channel);
    expect(kept.body.events).toEqual([{ serial: said.serial, event: 'client-said', data: '{"text":"hi"}', published_at: expect.any(Number), user_id: 'alice' }]);

    // A member that was away since before it replays it, sender included.
    const c = await RawClient.open(APP.key);
    const before = said.serial!.replace(/\d{12}$/, (seq) => String(Number(seq) - 1).padStart(12, '0'));
    await join(c, 'carol', { since: before });
    await until(() => c.on(channel, 'herald:recovered').length === 1, 'the replay');
    expect(c.on(channel).map((f) => [f.event, f.data, (JSON.parse(f.text) as { user_id?: string }).user_id])).toEqual([
      ['client-said', { text: 'hi' }, 'alice'],
      ['herald:recovered', { missed: 1 }, undefined],
    ]);
    for (const x of [a, b, c]) x.close();
  });
});

describe('a replay leaves out what was left out for the client', () => {
  /** The frames a client received on `channel` from its `n`-th subscription_succeeded on (1 = the first). */
  const fromSubscription = (client: RawClient, channel: string, n: number): RawFrame[] => {
    const frames = client.frames.filter((f) => f.channel === channel);
    const starts = frames.flatMap((f, i) => (f.event === 'pusher_internal:subscription_succeeded' ? [i] : []));
    return starts[n - 1] === undefined ? [] : frames.slice(starts[n - 1]! + 1);
  };

  it('does not replay to a socket that subscribes again with since its own client event, nor a trigger naming it', async () => {
    const sdk = channelsSdk(herald.port, APP);
    const channel = 'private-history-again';
    const [a, b] = await Promise.all([RawClient.open(APP.key), RawClient.open(APP.key)]);
    const auth = (c: RawClient): string => sdk.authorizeChannel(c.socketId, channel).auth;
    for (const c of [a, b]) await c.subscribe(channel, { auth: auth(c) });
    expect((await sdk.trigger(channel, 'n', 'first')).status).toBe(200);
    await until(() => a.on(channel, 'n').length === 1, 'the first event');
    const since = a.on(channel, 'n')[0]!.serial!;
    a.ws.send(JSON.stringify({ event: 'client-mine', channel, data: { from: 'a' } }));
    await until(() => b.on(channel, 'client-mine').length === 1, 'a\'s client event at b');
    expect((await sdk.trigger(channel, 'n', 'not-to-a', { socket_id: a.socketId })).status).toBe(200);
    b.ws.send(JSON.stringify({ event: 'client-theirs', channel, data: { from: 'b' } }));
    await until(() => a.on(channel, 'client-theirs').length === 1 && b.on(channel, 'n').length === 2, 'the others\' events');

    a.ws.send(JSON.stringify({ event: 'pusher:unsubscribe', data: { channel } }));
    a.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, auth: auth(a), since } }));
    await until(() => fromSubscription(a, channel, 2).some((f) => f.event.startsWith('herald:')), 'the replay');
    expect(fromSubscription(a, channel, 2).map((f) => [f.event, f.data])).toEqual([
      ['client-theirs', { from: 'b' }],
      ['herald:recovered', { missed: 1 }],
    ]);

    // Kept as sent; no frame and no history answer names the socket left out.
    const kept = await historyOf(APP, channel);
    expect(kept.body.events.map((e) => e.event)).toEqual(['n', 'client-mine', 'n', 'client-theirs']);
    for (const e of kept.body.events) expect(Object.keys(e).sort()).toEqual(['data', 'event', 'published_at', 'serial']);
    for (const f of [...a.frames, ...b.frames]) if (f.channel === channel) expect(f.text).not.toContain(a.socketId);
    a.close();
    b.close();
  });

  it('answers herald:recovery_failed (invalid_previous_socket_ids) to malformed previous_socket_ids, and the subscription holds', async () => {
    const sdk = channelsSdk(herald.port, APP);
    expect((await sdk.trigger('history-prev', 'n', 'kept')).status).toBe(200);
    const since = (await historyOf(APP, 'history-prev')).body.events[0]!.serial;
    const before = since.replace(/\d{12}$/, (seq) => String(Number(seq) - 1).padStart(12, '0'));
    const client = await RawClient.open(APP.key);
    const ids = Array.from({ length: 9 }, (_, i) => `${1000 + i}.${2000 + i}`);
    const malformed: unknown[] = ['1.2', { 0: '1.2' }, [1], ['not-a-socket-id'], ['1.2', ''], ids];
    for (const [i, previous] of malformed.entries()) {
      const channel = `history-prev-${i}`;
      await client.subscribe(channel, { since, previous_socket_ids: previous });
      await until(() => client.on(channel).length === 1, `the answer to ${JSON.stringify(previous)}`);
      expect(client.on(channel)[0]).toMatchObject({ event: 'herald:recovery_failed', data: { reason: 'invalid_previous_socket_ids' } });
    }
    // The subscription holds: live events arrive, without a replay.
    const live = 'history-prev-5';
    expect((await sdk.trigger(live, 'n', 'live')).status).toBe(200);
    await until(() => client.on(live, 'n').length === 1, 'the live event');
    expect(client.on(live).map((f) => [f.event, f.data])).toEqual([
      ['herald:recovery_failed', { reason: 'invalid_previous_socket_ids' }],
      ['n', 'live'],
    ]);
    // Eight socket ids are fine; without since the field is ignored.
    await client.subscribe('history-prev', { since: before, previous_socket_ids: ids.slice(0, 8) });
    await until(() => client.on('history-prev', 'herald:recovered').length === 1, 'the replay');
    expect(client.on('history-prev').map((f) => [f.event, f.data])).toEqual([
      ['n', 'kept'],
      ['herald:recovered', { missed: 1 }],
    ]);
    // A channel that keeps no history says so, whatever the ids.
    await client.subscribe('plain-prev', { since, previous_socket_ids: ids });
    await until(() => client.on('plain-prev').length === 1, 'the answer on a channel without history');
    expect(client.on('plain-prev')[0]).toMatchObject({ event: 'herald:recovery_failed', data: { reason: 'not_a_history_channel' } });
    await client.subscribe('history-prev-none', { previous_socket_ids: 'whatever' });
    await flushedBy(() => sdk.trigger('history-prev-none', 'n', 'live'), () => client.on('history-prev-none').length > 0, 'a live event');
    expect(client.on('history-prev-none').map((f) => f.event)).toEqual(['n']);
    client.close();
  });
});

describe('channel history across kill -9', () => {
  it('keeps every event a 200 answered, and serials keep increasing after the restart', async () => {
    const node = await startHerald({ config: { apps: [appConfig({ ...APP, history: HISTORY })] } });
    try {
      const sdk = channelsSdk(node.port, APP);
      for (let i = 0; i < 5; i++) expect((await sdk.trigger('history-durable', 'e', String(i))).status).toBe(200);
      const path = `/apps/${APP.id}/channels/history-durable/history`;
      const read = async (): Promise<{ events: { serial: string; data: string }[]; complete: boolean }> =>
        (await fetch(`${node.baseUrl}${path}?${signedQuery(APP, 'GET', path)}`)).json() as never;
      const before = await read();
      expect(await node.kill9()).toBeNull();
      await node.restart();
      const after = await read();
      expect(after).toEqual(before);
      expect((await channelsSdk(node.port, APP).trigger('history-durable', 'e', '5')).status).toBe(200);
      const next = await read();
      expect(next.events.map((e) => e.data)).toEqual(['0', '1', '2', '3', '4', '5']);
      expect(next.events[5]!.serial > next.events[4]!.serial).toBe(true);
      const last = before.events[4]!.serial;
      const resumed = await (await fetch(`${node.baseUrl}${path}?${signedQuery(APP, 'GET', path, { params: { since: last } })}`)).json();
      expect(resumed).toMatchObject({ complete: true, events: [{ data: '5' }] });
    } finally {
      await node.dispose();
    }
  });
});
