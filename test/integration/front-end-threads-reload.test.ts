/**
 * Two front-end threads (`frontEndThreads: 2`) serving TLS, and what the main thread hands them:
 * WSS connections placed on each thread (their socket ids carry the thread), the HTTPS API, a
 * certificate reload (SIGHUP) installed on both threads while the connections opened before keep
 * their events, a bad certificate that leaves both as they were, a config reload (app removed,
 * added and changed; the log level) applied on both, and SIGTERM draining both.
 */
import { copyFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestCa, serverCert } from '../helpers/test-ca.js';
import { startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';
import { threadOf } from '../../src/channels/socket-id.js';

const A = { id: 'ftr-a', key: 'ftr-a-key', secret: 'ftr-a-secret' };
const B = { id: 'ftr-b', key: 'ftr-b-key', secret: 'ftr-b-secret' };
const C = { id: 'ftr-c', key: 'ftr-c-key', secret: 'ftr-c-secret' };
const TOKEN = 'front-end-threads-reload-admin-token';

let dir: string;
let ca: Buffer;
let herald: HeraldProcess;
let config: Record<string, unknown>;
let firstSerial: string;
let secondSerial: string;

function useCert(name: string): void {
  copyFileSync(join(dir, `${name}.pem`), join(dir, 'cert.pem'));
  copyFileSync(join(dir, `${name}-key.pem`), join(dir, 'key.pem'));
}

beforeAll(async () => {
  ({ dir, ca } = createTestCa('herald-ft-tls-'));
  firstSerial = serverCert(dir, 'first');
  secondSerial = serverCert(dir, 'second');
  useCert('first');
  config = { frontEndThreads: 2, logLevel: 'info', tls: { certFile: join(dir, 'cert.pem'), keyFile: join(dir, 'key.pem') }, apps: [A, B], push: [], admin: { token: TOKEN } };
  // The config file's logLevel applies (an empty HERALD_LOG_LEVEL does not override it).
  herald = await startHerald({ shards: 1, config, env: { HERALD_LOG_LEVEL: '' } });
}, 60_000);

afterAll(async () => {
  await herald?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const count = (line: string): number => herald.stderr.split(line).length - 1;

/** Writes the config, sends SIGHUP and resolves with the reload's outcome line. */
async function reload(next: Record<string, unknown>): Promise<string> {
  const outcomes = (): string[] => herald.stderr.split('\n').filter((l) => l.includes('"msg":"config reloaded"') || l.includes('"msg":"config reload refused'));
  const before = outcomes().length;
  herald.writeConfig(next);
  herald.signal('SIGHUP');
  await until(() => outcomes().length > before, () => `a reload outcome logged:\n${herald.stderr}`, 20_000);
  const line = outcomes()[before]!;
  if (line.includes('"msg":"config reloaded"')) config = next;
  return line;
}

interface Wss {
  ws: WebSocket;
  socketId: string;
  /** The serial number of the certificate the connection got (hex, upper case). */
  serial: string;
  frames: Frame[];
  closed: Promise<number>;
  received(match: (f: Frame) => boolean, what: string): Promise<Frame>;
}

/** A WSS connection to `key` (no server name: by IP address), with what it received. */
async function wss(key: string): Promise<Wss> {
  const ws = new WebSocket(`wss://127.0.0.1:${herald.port}/app/${key}?protocol=7&client=js&version=8.4.0`, { ca });
  ws.on('error', () => undefined);
  const frames: Frame[] = [];
  ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
  let closedCode: number | undefined;
  const closed = new Promise<number>((resolve) =>
    ws.once('close', (code) => {
      closedCode = code;
      resolve(code);
    }),
  );
  const found = (match: (f: Frame) => boolean, what: string): Frame | undefined => {
    if (closedCode !== undefined && !frames.some(match)) throw new Error(`${what}: closed with ${closedCode}; got ${JSON.stringify(frames)}`);
    return frames.find(match);
  };
  const received = (match: (f: Frame) => boolean, what: string): Promise<Frame> => until(() => found(match, what), () => `${what}; got ${JSON.stringify(frames)}`);
  const serial = await new Promise<string>((resolve, reject) => {
    ws.once('upgrade', (res) => resolve((res.socket as TLSSocket).getPeerCertificate().serialNumber.toUpperCase()));
    ws.once('error', reject);
  });
  const first = await received(() => true, 'a first frame');
  const socketId = first.event === 'pusher:connection_established' ? (first.data as { socket_id: string }).socket_id : '';
  return { ws, socketId, serial, frames, closed, received };
}

/** A WSS connection to `key` that the kernel gave to front-end thread `thread` (those on the other closed). */
async function wssOnThread(key: string, thread: number): Promise<Wss> {
  for (let attempt = 0; attempt < 60; attempt++) {
    const conn = await wss(key);
    if (conn.socketId && threadOf(conn.socketId) === thread) return conn;
    conn.ws.close();
  }
  throw new Error(`no WSS connection landed on front-end thread ${thread} in 60 tries`);
}

/** Subscribes the connection to a private channel of `app`, signed by the official SDK. */
async function subscribe(conn: Wss, app: { key: string; secret: string; id: string }, channel: string): Promise<void> {
  const { auth } = channelsSdk(herald.port, app).authorizeChannel(conn.socketId, channel);
  conn.ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, auth } }));
  await conn.received((f) => f.event === 'pusher_internal:subscription_succeeded' && f.channel === channel, `subscription_succeeded for ${channel}`);
}

function sdk(app: { id: string; key: string; secret: string }): ReturnType<typeof channelsSdk> {
  return channelsSdk(herald.port, app, { host: 'localhost', useTLS: true, agent: new HttpsAgent({ ca }) });
}

/** One HTTPS request on a connection of its own (the kernel picks the thread). */
function httpsOnce(path: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: 'localhost', port: herald.port, path, ca, servername: 'localhost', agent: false, method: init.method ?? 'GET', headers: init.headers ?? {} }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** The admin API over HTTPS (answered by the main thread, whichever thread takes the request). */
function admin(method: string, path: string, body?: unknown): Promise<{ status: number; body: string }> {
  return httpsOnce(`/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

/** Resolves once a new connection on `thread` gets the certificate of `serial`. */
async function threadServes(thread: number, serial: string): Promise<void> {
  await until(
    async () => {
      const conn = await wssOnThread(A.key, thread);
      conn.ws.close();
      return conn.serial === serial;
    },
    `a new connection on thread ${thread} to get certificate ${serial}`,
    20_000,
  );
}

describe('TLS with two front-end threads', () => {
  it('serves WSS on both threads and the HTTPS API; an event reaches both', async () => {
    const on0 = await wssOnThread(A.key, 0);
    const on1 = await wssOnThread(A.key, 1);
    try {
      expect(on0.serial).toBe(firstSerial);
      expect(on1.serial).toBe(firstSerial);
      await subscribe(on0, A, 'private-both');
      await subscribe(on1, A, 'private-both');
      expect((await sdk(A).trigger('private-both', 'hello', { n: 1 })).status).toBe(200);
      await on0.received((f) => f.event === 'hello', 'hello on thread 0');
      await on1.received((f) => f.event === 'hello', 'hello on thread 1');
      expect((await httpsOnce('/ready')).status).toBe(200);
    } finally {
      on0.ws.close();
      on1.ws.close();
    }
  });

  it('installs a new certificate on both threads on SIGHUP; connections from before keep their events on both', async () => {
    const before = [await wssOnThread(A.key, 0), await wssOnThread(A.key, 1)];
    try {
      for (const conn of before) await subscribe(conn, A, 'private-renewal');
      useCert('second');
      const installed = count('tls certificates installed');
      const line = await reload(config);
      expect(line).toContain('"msg":"config reloaded"');
      // Each thread makes its own app with the new certificate (the main thread serves no port).
      await until(() => count('tls certificates installed') >= installed + 2, () => `both threads installed:\n${herald.stderr}`, 20_000);
      await threadServes(0, secondSerial);
      await threadServes(1, secondSerial);
      const after = [await wssOnThread(A.key, 0), await wssOnThread(A.key, 1)];
      try {
        expect(after.map((c) => c.serial)).toEqual([secondSerial, secondSerial]);
        for (const conn of after) await subscribe(conn, A, 'private-renewal');
        expect((await sdk(A).trigger('private-renewal', 'renewed', { n: 2 })).status).toBe(200);
        for (const [i, conn] of [...before, ...after].entries()) await conn.received((f) => f.event === 'renewed', `renewed on connection ${i}`);
        for (const conn of before) expect(conn.ws.readyState).toBe(WebSocket.OPEN);
        expect((await httpsOnce('/ready')).status).toBe(200);
      } finally {
        for (const conn of after) conn.ws.close();
      }
    } finally {
      for (const conn of before) conn.ws.close();
    }
  }, 90_000);

  it('keeps both threads as they were when the certificate file is bad on reload', async () => {
    const before = [await wssOnThread(A.key, 0), await wssOnThread(A.key, 1)];
    try {
      for (const conn of before) await subscribe(conn, A, 'private-kept');
      writeFileSync(join(dir, 'cert.pem'), 'not a certificate\n');
      const line = await reload(config);
      expect(line).toContain('config reload refused');
      expect(line).toContain('tls.certFile');
      for (const thread of [0, 1]) {
        const conn = await wssOnThread(A.key, thread);
        conn.ws.close();
        expect(conn.serial).toBe(secondSerial);
      }
      expect((await sdk(A).trigger('private-kept', 'still', {})).status).toBe(200);
      for (const [i, conn] of before.entries()) await conn.received((f) => f.event === 'still', `still on thread ${i}`);
    } finally {
      useCert('second');
      for (const conn of before) conn.ws.close();
    }
  }, 60_000);
});

describe('config reload (SIGHUP) with two front-end threads', () => {
  it('closes a removed app on both threads (4001), serves an added one on both, and applies a changed one on both', async () => {
    const removed = [await wssOnThread(B.key, 0), await wssOnThread(B.key, 1)];
    const a = [await wssOnThread(A.key, 0), await wssOnThread(A.key, 1)];
    try {
      for (const conn of a) await subscribe(conn, A, 'private-talk');
      // Client events are off for A: refused on the thread that gets one.
      a[0]!.ws.send(JSON.stringify({ event: 'client-early', channel: 'private-talk', data: {} }));
      await a[0]!.received((f) => f.event === 'pusher:error', 'client events refused');
      const line = await reload({ ...config, apps: [{ ...A, clientEvents: true, maxConnections: 2 }, C] });
      expect(line).toContain('"msg":"config reloaded"');
      // Removed: its sockets on both threads closed, counted in the report.
      expect(await removed[0]!.closed).toBe(4001);
      expect(await removed[1]!.closed).toBe(4001);
      expect(line).toContain('"closedConnections":2');
      // Added: served on both threads.
      for (const thread of [0, 1]) {
        const conn = await wssOnThread(C.key, thread);
        conn.ws.close();
      }
      // Changed: client events now cross between the threads, both ways.
      a[0]!.ws.send(JSON.stringify({ event: 'client-ping', channel: 'private-talk', data: { from: 0 } }));
      await a[1]!.received((f) => f.event === 'client-ping', 'client-ping on thread 1');
      a[1]!.ws.send(JSON.stringify({ event: 'client-pong', channel: 'private-talk', data: { from: 1 } }));
      await a[0]!.received((f) => f.event === 'client-pong', 'client-pong on thread 0');
      // Changed: maxConnections 2 counts the two open ones (one per thread); a third is refused on either thread.
      for (let i = 0; i < 4; i++) {
        const extra = await wss(A.key);
        expect(await extra.closed).toBe(4004);
      }
    } finally {
      for (const conn of [...removed, ...a]) conn.ws.close();
    }
  }, 90_000);

  it('applies a new log level on both threads', async () => {
    // At info, a refused request is not logged; at debug each thread logs its first one (once per 10 s per route and status).
    const refusedLines = (): number => herald.stderr.split('\n').filter((l) => l.includes('"msg":"http request refused"') && l.includes('loglevel-')).length;
    for (let i = 0; i < 6; i++) expect((await httpsOnce(`/apps/${A.id}/channels/loglevel-${i}`)).status).toBe(401);
    expect(refusedLines()).toBe(0);
    expect(await reload({ ...config, logLevel: 'debug' })).toContain('"msg":"config reloaded"');
    try {
      // Each request on a connection of its own: the kernel spreads them over both threads.
      let n = 0;
      await until(
        async () => {
          expect((await httpsOnce(`/apps/${A.id}/channels/loglevel-${n++}`)).status).toBe(401);
          return refusedLines() >= 2;
        },
        () => `a refused request logged at debug by both threads:\n${herald.stderr}`,
        9000,
      );
    } finally {
      await reload({ ...config, logLevel: 'info' });
    }
  }, 60_000);
});

describe('admin API changes with two front-end threads', () => {
  it('applies an app created, changed and disabled through the admin API on both threads', async () => {
    const created = await admin('POST', '/apps', { id: 'ftr-d', key: 'ftr-d-key' });
    expect(created.status, created.body).toBe(201);
    const D = { id: 'ftr-d', key: 'ftr-d-key', secret: (JSON.parse(created.body) as { secret: string }).secret };
    const d = [await wssOnThread(D.key, 0), await wssOnThread(D.key, 1)];
    try {
      for (const conn of d) await subscribe(conn, D, 'private-admin');
      const patched = await admin('PATCH', `/apps/${D.id}`, { clientEvents: true });
      expect(patched.status, patched.body).toBe(200);
      d[1]!.ws.send(JSON.stringify({ event: 'client-hi', channel: 'private-admin', data: { from: 1 } }));
      await d[0]!.received((f) => f.event === 'client-hi', 'client-hi on thread 0');
      d[0]!.ws.send(JSON.stringify({ event: 'client-hi', channel: 'private-admin', data: { from: 0 } }));
      await d[1]!.received((f) => f.event === 'client-hi', 'client-hi on thread 1');
      const disabled = await admin('PATCH', `/apps/${D.id}`, { enabled: false });
      expect(disabled.status, disabled.body).toBe(200);
      expect(await d[0]!.closed).toBe(4003);
      expect(await d[1]!.closed).toBe(4003);
    } finally {
      for (const conn of d) conn.ws.close();
      await admin('DELETE', `/apps/ftr-d`);
    }
  }, 60_000);
});

describe('metrics with two front-end threads', () => {
  it("sums the threads' own counters into /metrics", async () => {
    const disconnects = async (): Promise<number> => {
      const text = (await httpsOnce('/metrics')).body;
      return text
        .split('\n')
        .filter((l) => l.startsWith('herald_ws_disconnects_total{') && l.includes(`app_id="${A.id}"`))
        .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
    };
    const before = await disconnects();
    for (const thread of [0, 1]) {
      const conn = await wssOnThread(A.key, thread);
      conn.ws.close();
      await conn.closed;
    }
    // Each thread counts its own: the connections closed on both (and the tries on the wrong thread) are in the sum.
    await until(async () => (await disconnects()) >= before + 2, 'the disconnects of both threads counted');
  });
});

describe('shutdown with two front-end threads and TLS', () => {
  it('drains both threads on SIGTERM: connections from before and after a certificate reload get 4200', async () => {
    const on = [await wssOnThread(A.key, 0), await wssOnThread(C.key, 1)];
    useCert('first');
    const installed = count('tls certificates installed');
    expect(await reload(config)).toContain('"msg":"config reloaded"');
    await until(() => count('tls certificates installed') >= installed + 2, () => `both threads installed:\n${herald.stderr}`, 20_000);
    await threadServes(0, firstSerial);
    await threadServes(1, firstSerial);
    on.push(await wssOnThread(C.key, 0), await wssOnThread(A.key, 1));
    expect(await herald.stop('SIGTERM')).toBe(0);
    expect(await Promise.all(on.map((c) => c.closed))).toEqual([4200, 4200, 4200, 4200]);
    expect(herald.stderr).toContain('shutdown complete');
  }, 90_000);
});
