/**
 * Live reload on SIGHUP against the built server, with real clients (`pusher` SDK, pusher-js,
 * ws, the Beams SDK): an app added, a secret rotated (old refused, new accepted, on HTTP and
 * for sockets already open), a limit changed, apps disabled and removed (their sockets closed
 * 4003 / 4001 with their pusher:error), a push instance added and its key rotated, restart-only
 * settings reported, and invalid files refused while the running config keeps serving.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { beamsSdk, channelsSdk } from '../helpers/sdk-clients.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';
import { until } from '../helpers/wait.js';

const A = { id: 'app-a', key: 'key-a', secret: 'secret-a-1' };
const B = { id: 'app-b', key: 'key-b', secret: 'secret-b' };
const C = { id: 'app-c', key: 'key-c', secret: 'secret-c' };
const P = { instanceId: '5e1f2a3b-4c5d-4e6f-8a7b-9c0d1e2f3a4b', secretKey: 'push-key-1' };

let herald: HeraldProcess;
let config: Record<string, unknown>;

beforeAll(async () => {
  config = { apps: [A, C], push: [] };
  herald = await startHerald({ shards: 2, config, env: { HERALD_LOG_LEVEL: 'info' } });
});

afterAll(async () => {
  await herald?.dispose();
});

/** Writes the config, sends SIGHUP and waits for the reload's outcome line; returns that line. */
async function reload(next: Record<string, unknown> | string): Promise<string> {
  const before = outcomes().length;
  if (typeof next === 'string') herald.writeConfigText(next);
  else herald.writeConfig(next);
  herald.signal('SIGHUP');
  await until(() => outcomes().length > before, () => `a reload outcome logged:\n${herald.stderr}`, 20_000);
  const line = outcomes()[before]!;
  if (typeof next !== 'string' && line.includes('"msg":"config reloaded"')) config = next;
  return line;
}

function outcomes(): string[] {
  return herald.stderr.split('\n').filter((l) => l.includes('"msg":"config reloaded"') || l.includes('"msg":"config reload refused'));
}

interface Conn {
  ws: WebSocket;
  frames: Frame[];
  closed: Promise<{ code: number }>;
  socketId: string;
}

async function connect(key: string): Promise<Conn> {
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${key}?protocol=7&client=js&version=8.4.0`);
  const frames: Frame[] = [];
  ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
  const closed = new Promise<{ code: number }>((resolve) => ws.on('close', (code) => resolve({ code })));
  const established = await received(frames, (f) => f.event === 'pusher:connection_established', 'pusher:connection_established');
  return { ws, frames, closed, socketId: (established.data as { socket_id: string }).socket_id };
}

/** The first frame `match` finds once it has come; the timeout names `what` and the frames received. */
function received(frames: Frame[], match: (f: Frame) => boolean, what: string): Promise<Frame> {
  return until(() => frames.find(match), () => `${what}; got ${JSON.stringify(frames)}`);
}

function privateAuth(app: { key: string; secret: string }, socketId: string, channel: string): string {
  return `${app.key}:${createHmac('sha256', app.secret).update(`${socketId}:${channel}`).digest('hex')}`;
}

describe('SIGHUP reload', () => {
  it('adds an app: its API and WebSocket work without a restart', async () => {
    // An unknown auth_key is 401 AUTH_UNKNOWN_KEY.
    await expect(channelsSdk(herald.port, B).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    const line = await reload({ ...config, apps: [A, B, C] });
    expect(line).toContain('"changed":["apps"]');
    const res = await channelsSdk(herald.port, B).trigger('ch', 'e', {});
    expect(res.status).toBe(200);
    const conn = await connect(B.key);
    conn.ws.close();
  });

  it('rotates a secret: the old one is refused, the new one accepted, on HTTP and on open sockets', async () => {
    const conn = await connect(A.key);
    const rotated = { ...A, secret: 'secret-a-2' };
    await reload({ ...config, apps: [rotated, B, C] });
    await expect(channelsSdk(herald.port, A).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    expect((await channelsSdk(herald.port, rotated).trigger('ch', 'e', {})).status).toBe(200);
    // The socket opened before the reload checks channel signatures with the new secret.
    conn.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'private-old', auth: privateAuth(A, conn.socketId, 'private-old') } }));
    await received(conn.frames, (f) => f.event === 'pusher:subscription_error' && f.channel === 'private-old', 'subscription_error for private-old');
    conn.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'private-new', auth: privateAuth(rotated, conn.socketId, 'private-new') } }));
    await received(conn.frames, (f) => f.event === 'pusher_internal:subscription_succeeded' && f.channel === 'private-new', 'subscription_succeeded for private-new');
    conn.ws.close();
  });

  it('changes a limit: the next request uses it', async () => {
    const app = (config.apps as Record<string, unknown>[])[0]!;
    const creds = app as unknown as typeof A;
    expect((await channelsSdk(herald.port, creds).trigger('ch', 'e', 'x'.repeat(200))).status).toBe(200);
    await reload({ ...config, apps: [{ ...app, maxEventDataBytes: 100 }, B, C] });
    await expect(channelsSdk(herald.port, creds).trigger('ch', 'e', 'x'.repeat(200))).rejects.toMatchObject({ status: 413 });
  });

  it('disables an app and removes another: their sockets are closed 4003 and 4001 with their pusher:error', async () => {
    const onB = await connect(B.key);
    const onC = await connect(C.key);
    const onA = await connect(A.key);
    const apps = config.apps as Record<string, unknown>[];
    const line = await reload({ ...config, apps: [apps[0]!, { ...B, enabled: false }] });
    expect(line).toContain('"closedConnections":2');
    expect((await onB.closed).code).toBe(4003);
    expect(onB.frames.find((f) => f.event === 'pusher:error')?.data).toMatchObject({ code: 4003 });
    expect((await onC.closed).code).toBe(4001);
    expect(onC.frames.find((f) => f.event === 'pusher:error')?.data).toMatchObject({ code: 4001 });
    // The app that stays keeps its connection.
    onA.ws.send(JSON.stringify({ event: 'pusher:ping', data: {} }));
    await received(onA.frames, (f) => f.event === 'pusher:pong', 'pusher:pong');
    onA.ws.close();
    // New connections and API calls see the change.
    await expect(channelsSdk(herald.port, B).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 403 });
    await expect(channelsSdk(herald.port, C).trigger('ch', 'e', {})).rejects.toMatchObject({ status: 401 });
    const refused = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${C.key}?protocol=7&client=js&version=8.4.0`);
    expect(await new Promise((resolve) => refused.on('close', (code) => resolve(code)))).toBe(4001);
  });

  it('adds a webhook receiver to an app: the shards send to it', async () => {
    const receiver = await WebhookReceiver.start();
    try {
      const apps = config.apps as Record<string, unknown>[];
      const withHook: Record<string, unknown> = { ...apps[0]!, webhooks: [{ url: receiver.url(), events: ['channel_occupied'] }] };
      await reload({ ...config, apps: [withHook, ...apps.slice(1)] });
      const conn = await connect(withHook.key as string);
      conn.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'hooked-after-reload' } }));
      await received(conn.frames, (f) => f.event === 'pusher_internal:subscription_succeeded', 'subscription_succeeded');
      await until(() => receiver.requests.some((r) => r.rawBody.includes('hooked-after-reload')), 'a webhook after the reload');
      expect(JSON.parse(receiver.requests[0]!.rawBody)).toMatchObject({ events: [{ name: 'channel_occupied', channel: 'hooked-after-reload' }] });
      conn.ws.close();
    } finally {
      await receiver.close();
    }
  });

  it('adds a push instance and rotates its key', async () => {
    await reload({ ...config, push: [P] });
    const publish = { interests: ['nobody'], web: { notification: { title: 't' } } };
    const first = (await beamsSdk(herald.port, P.instanceId, P.secretKey).publishToInterests(publish.interests, { web: publish.web })) as { publishId: string };
    expect(first.publishId).toMatch(/^pubid-/);
    await reload({ ...config, push: [{ ...P, secretKey: 'push-key-2' }] });
    await expect(beamsSdk(herald.port, P.instanceId, P.secretKey).publishToInterests(publish.interests, { web: publish.web })).rejects.toThrow(/401|Unauthorized|Incorrect/i);
    const second = (await beamsSdk(herald.port, P.instanceId, 'push-key-2').publishToInterests(publish.interests, { web: publish.web })) as { publishId: string };
    expect(second.publishId).toMatch(/^pubid-/);
  });

  it('reports settings that need a restart and keeps their running values', async () => {
    const restartLines = (): string[] => herald.stderr.split('\n').filter((l) => l.includes('need a restart'));
    const linesBefore = restartLines().length;
    const line = await reload({ ...config, maxWebSocketFrameBytes: 1000, webhookDelivery: { batchWindowMs: 5 } });
    expect(line).toContain('"msg":"config reloaded"');
    const restartNeeded = await until(() => restartLines()[linesBefore], 'a "need a restart" line after the reload');
    expect(restartNeeded).toContain('"restartNeeded":["maxWebSocketFrameBytes","webhookDelivery"]');
    // Still the start-up frame limit (32 KiB): a 2 KB frame is accepted.
    const conn = await connect((config.apps as { key: string }[])[0]!.key);
    conn.ws.send(JSON.stringify({ event: 'pusher:ping', data: { pad: 'x'.repeat(2000) } }));
    await received(conn.frames, (f) => f.event === 'pusher:pong', 'pusher:pong');
    conn.ws.close();
  });

  it('keeps the running config on an invalid file and logs exactly why', async () => {
    const notJson = await reload('{\n  "apps": [],\n  "port": 6001,\n}\n');
    expect(notJson).toContain('config reload refused');
    // The trailing comma: the } after it on line 4.
    expect(notJson).toMatch(/is not valid JSON at line 4, column 1:/);
    const badField = await reload({ ...config, apps: [{ ...A, maxConnections: -1 }] });
    expect(badField).toContain('invalid config at apps.0.maxConnections');
    const badKey = await reload({ ...config, push: [{ ...P, fcm: { projectId: 'p', clientEmail: 'e@x', privateKey: 'not a key' } }] });
    expect(badKey).toContain('invalid config at push.0.fcm.privateKey');
    // Still serving with the last good config.
    const app = (config.apps as (typeof A)[])[0]!;
    expect((await channelsSdk(herald.port, app).trigger('ch', 'e', {})).status).toBe(200);
    expect((await fetch(`${herald.baseUrl}/ready`)).status).toBe(200);
    expect(herald.child?.exitCode).toBeNull();
  });
});
