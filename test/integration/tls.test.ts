/**
 * Built-in TLS (`tls: {certFile, keyFile}`): HTTPS and WSS on the main port with a test CA made
 * here with openssl, clients that trust only that CA (node:https, ws), plain HTTP refused on
 * that port, a new certificate picked up on SIGHUP by clients with and without a server name
 * (open connections kept), and bad files refused at start-up.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, copyFileSync } from 'node:fs';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { createTestCa, serverCert } from '../helpers/test-ca.js';
import { CLI, DEFAULT_APP, DEFAULT_PUSH, HeraldProcess, REPO_ROOT, appConfig, startHerald } from '../helpers/herald-process.js';
import { decodeFrame, type Frame } from '../helpers/protocol-frame.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { flushedBy, until } from '../helpers/wait.js';

let dir: string;
let ca: Buffer;
let herald: HeraldProcess;

let firstSerial: string;
let secondSerial: string;

beforeAll(async () => {
  ({ dir, ca } = createTestCa('herald-tls-'));
  firstSerial = serverCert(dir, 'first');
  secondSerial = serverCert(dir, 'second');
  copyFileSync(join(dir, 'first.pem'), join(dir, 'cert.pem'));
  copyFileSync(join(dir, 'first-key.pem'), join(dir, 'key.pem'));
  herald = await startHerald({
    shards: 1,
    config: { tls: { certFile: join(dir, 'cert.pem'), keyFile: join(dir, 'key.pem') }, admin: { token: ADMIN_TOKEN }, apps: [appConfig({ clientEvents: true })], push: [{ ...DEFAULT_PUSH }] },
    env: { HERALD_LOG_LEVEL: 'info' },
  });
});

afterAll(async () => {
  await herald?.dispose();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const ADMIN_TOKEN = 'tls-test-admin-token-0123456789';

/** One request on a new connection (no keep-alive agent). */
function httpsGet(path: string, host = 'localhost'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host, port: herald.port, path, ca, servername: 'localhost', agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function peerSerial(servername: string | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port: herald.port, ca, ...(servername ? { servername } : {}), checkServerIdentity: () => undefined }, () => {
      const serial = socket.getPeerCertificate().serialNumber.toUpperCase();
      socket.end();
      resolve(serial);
    });
    socket.on('error', reject);
  });
}

describe('tls', () => {
  it('prints https:// and serves HTTPS to a client that trusts the test CA', async () => {
    expect(herald.stdout).toMatch(/listening on https:\/\/127\.0\.0\.1:\d+ \(wss:\/\//);
    const ready = await httpsGet('/ready');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toEqual({ ready: true });
  });

  it('serves the dashboard and its live stream to a client that sends the server name', async () => {
    expect((await httpsGet('/dashboard')).status).toBe(200);
    // The stream is not in the route table: it must be installed under each server name too.
    const stream = await new Promise<{ status: number; type: string | undefined }>((resolve, reject) => {
      const req = httpsRequest(
        { host: 'localhost', port: herald.port, path: '/admin/v1/stream', ca, servername: 'localhost', agent: false, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } },
        (res) => {
          resolve({ status: res.statusCode!, type: res.headers['content-type'] });
          req.destroy();
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(stream.status).toBe(200);
    expect(stream.type).toMatch(/^text\/event-stream/);
  });

  it('serves WSS: a ws client with the CA gets pusher:connection_established', async () => {
    const ws = new WebSocket(`wss://localhost:${herald.port}/app/${DEFAULT_APP.key}?protocol=7&client=js&version=8.4.0`, { ca });
    try {
      const first = await new Promise<string>((resolve, reject) => {
        ws.once('message', (d: Buffer) => resolve(d.toString()));
        ws.once('error', reject);
      });
      expect(decodeFrame(first).event).toBe('pusher:connection_established');
    } finally {
      ws.close();
    }
  });

  it('delivers an event triggered over HTTPS (pusher SDK) to a WSS subscriber', async () => {
    const ws = new WebSocket(`wss://localhost:${herald.port}/app/${DEFAULT_APP.key}?protocol=7&client=js&version=8.4.0`, { ca });
    const frames: Frame[] = [];
    ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
    const received = (match: (f: Frame) => boolean, what: string): Promise<unknown> => until(() => frames.some(match), () => `${what}; got ${JSON.stringify(frames)}`);
    try {
      await received((f) => f.event === 'pusher:connection_established', 'pusher:connection_established');
      ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel: 'tls-news' } }));
      await received((f) => f.event === 'pusher_internal:subscription_succeeded', 'subscription_succeeded');
      const sdk = channelsSdk(herald.port, DEFAULT_APP, { host: 'localhost', useTLS: true, agent: new HttpsAgent({ ca }) });
      expect((await sdk.trigger('tls-news', 'headline', { n: 1 })).status).toBe(200);
      await received((f) => f.event === 'headline' && f.channel === 'tls-news', 'the headline');
    } finally {
      ws.close();
    }
  });

  it('pusher-js over wss (trusting the CA through NODE_EXTRA_CA_CERTS) subscribes and receives', async () => {
    // A child process: Node reads NODE_EXTRA_CA_CERTS only at start.
    const program = `
      import Pusher from 'pusher-js';
      const client = new Pusher(${JSON.stringify(DEFAULT_APP.key)}, { wsHost: 'localhost', wssPort: ${herald.port}, forceTLS: true, enabledTransports: ['ws'], cluster: 'local', disableStats: true });
      const channel = client.subscribe('tls-pusher-js');
      channel.bind('pusher:subscription_succeeded', () => console.log('subscribed'));
      channel.bind('hello', (data) => { console.log('got ' + JSON.stringify(data)); client.disconnect(); setTimeout(() => process.exit(0), 50); });
      client.connection.bind('error', (e) => console.log('error ' + JSON.stringify(e)));
      setTimeout(() => process.exit(2), 15000);
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', program], { cwd: REPO_ROOT, env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await until(() => out.includes('subscribed') || child.exitCode !== null, () => `pusher-js to subscribe: ${out}`, 15_000);
    expect(out, 'pusher-js subscribed').toContain('subscribed');
    const sdk = channelsSdk(herald.port, DEFAULT_APP, { host: 'localhost', useTLS: true, agent: new HttpsAgent({ ca }) });
    await sdk.trigger('tls-pusher-js', 'hello', { n: 1 });
    expect(await exited, out).toBe(0);
    expect(out).toContain('got {"n":1}');
  });

  it('takes a publish from the Beams server SDK switched to HTTPS (docs/sdks.md), which speaks plain HTTP whenever endpoint is set', async () => {
    // A child process: Node reads NODE_EXTRA_CA_CERTS only at start; the SDK uses the global agent.
    const publish = (switchToHttps: boolean): Promise<string> => {
      const program = `
        import PushNotifications from '@pusher/push-notifications-server';
        const beams = new PushNotifications({ instanceId: ${JSON.stringify(DEFAULT_PUSH.instanceId)}, secretKey: ${JSON.stringify(DEFAULT_PUSH.secretKey)}, endpoint: 'localhost', port: ${herald.port} });
        ${switchToHttps ? "beams.protocol = 'https';" : ''}
        beams.publishToInterests(['tls'], { web: { notification: { title: 'over TLS' } } }).then(
          (r) => console.log('published ' + r.publishId),
          (e) => console.log('failed ' + String(e && e.message)),
        );
        setTimeout(() => process.exit(2), 10000).unref();
      `;
      const child = spawn(process.execPath, ['--input-type=module', '-e', program], { cwd: REPO_ROOT, env: { ...process.env, NODE_EXTRA_CA_CERTS: join(dir, 'ca.pem') } });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      return new Promise((resolve) => child.on('exit', () => resolve(out)));
    };
    expect(await publish(true)).toMatch(/^published pubid-/);
    expect(await publish(false)).toMatch(/^failed /);
  });

  it("serves pusher-js' HTTP fallback over HTTPS on the same port (an xhr poll opens a session)", async () => {
    const body = await new Promise<{ status: number; text: string; cors: string | undefined }>((resolve, reject) => {
      const req = httpsRequest(
        { host: 'localhost', port: herald.port, method: 'POST', path: `/pusher/app/${DEFAULT_APP.key}/1/tlssession/xhr?protocol=7&client=js&version=8.6.0`, ca, servername: 'localhost', agent: false },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, text, cors: res.headers['access-control-allow-origin'] as string | undefined }));
        },
      );
      req.on('error', reject);
      req.end();
    });
    expect(body.status).toBe(200);
    expect(body.cors).toBe('*');
    const lines = body.text.split('\n');
    expect(lines[0]).toBe('o');
    expect(lines[1]).toContain('pusher:connection_established');
  });

  it('refuses a client that does not trust the CA', async () => {
    await expect(
      new Promise((resolve, reject) => {
        const req = httpsRequest({ host: 'localhost', port: herald.port, path: '/ready' }, resolve);
        req.on('error', reject);
        req.end();
      }),
    ).rejects.toThrow(/certificate/);
  });

  it('does not serve plain HTTP on the TLS port', async () => {
    await expect(fetch(`http://127.0.0.1:${herald.port}/ready`, { signal: AbortSignal.timeout(10_000) })).rejects.toThrow();
  });

  const count = (line: string): number => herald.stderr.split(line).length - 1;
  /** Resolves once the server log has one more occurrence of `line` than `before`. */
  const logged = (line: string, before: number): Promise<unknown> => until(() => count(line) > before, () => `"${line}" logged:\n${herald.stderr}`, 30_000);

  /** The serial a client without a server name gets: servername '' (Node sends none), connecting by IP address. */
  const noSniSerial = (): Promise<string> => peerSerial('');

  /** A WSS connection to the default app subscribed to `channel`, with the frames it received. */
  async function subscribed(channel: string, servername?: string): Promise<{ ws: WebSocket; frames: Frame[]; received: (match: (f: Frame) => boolean, what: string) => Promise<unknown> }> {
    // By IP address Node sends no server name (the certificate has the address in its subjectAltName).
    const ws = new WebSocket(`wss://${servername ?? '127.0.0.1'}:${herald.port}/app/${DEFAULT_APP.key}?protocol=7&client=js&version=8.4.0`, { ca });
    const frames: Frame[] = [];
    ws.on('message', (d: Buffer) => frames.push(decodeFrame(d.toString())));
    const received = (match: (f: Frame) => boolean, what: string): Promise<unknown> => until(() => frames.some(match), () => `${what}; got ${JSON.stringify(frames)}`);
    await received((f) => f.event === 'pusher:connection_established', 'pusher:connection_established');
    const established = frames.find((f) => f.event === 'pusher:connection_established')!;
    const socketId = (established.data as { socket_id: string }).socket_id;
    const { auth } = channelsSdk(herald.port, DEFAULT_APP).authorizeChannel(socketId, channel);
    ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel, auth } }));
    await received((f) => f.event === 'pusher_internal:subscription_succeeded', `subscription_succeeded for ${channel}`);
    return { ws, frames, received };
  }

  it('re-reads the certificate files on SIGHUP: clients with and without a server name get the new one, open connections stay', async () => {
    expect(await peerSerial('localhost')).toBe(firstSerial);
    expect(await noSniSerial()).toBe(firstSerial);
    // Opened before the reload: a WSS subscriber (no server name) and a keep-alive HTTPS connection.
    const before = await subscribed('private-tls-reload');
    const agent = new HttpsAgent({ ca, keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    const get = (): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = httpsRequest({ host: 'localhost', port: herald.port, path: '/ready', agent }, (res) => {
          sockets.add(res.socket);
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      expect(await get()).toBe(200);
      copyFileSync(join(dir, 'second.pem'), join(dir, 'cert.pem'));
      copyFileSync(join(dir, 'second-key.pem'), join(dir, 'key.pem'));
      const installed = count('tls certificates installed');
      herald.signal('SIGHUP');
      await logged('tls certificates installed', installed);
      // New connections get the new certificate, with a server name or without one (by IP address).
      expect(await peerSerial('localhost')).toBe(secondSerial);
      expect(await noSniSerial()).toBe(secondSerial);
      expect((await httpsGet('/ready')).status).toBe(200);
      // The keep-alive connection from before is still served (one socket throughout).
      for (let i = 0; i < 3; i++) expect(await get()).toBe(200);
      expect(sockets.size).toBe(1);
      // A subscriber that connects after the reload and the one from before get the same events,
      // and the one from before was never closed.
      const after = await subscribed('private-tls-reload', 'localhost');
      try {
        const sdk = channelsSdk(herald.port, DEFAULT_APP, { host: 'localhost', useTLS: true, agent: new HttpsAgent({ ca }) });
        expect((await sdk.trigger('private-tls-reload', 'renewed', { n: 1 })).status).toBe(200);
        await after.received((f) => f.event === 'renewed', 'renewed on the subscriber from after');
        await before.received((f) => f.event === 'renewed', 'renewed on the subscriber from before');
        expect(before.ws.readyState).toBe(WebSocket.OPEN);
        // Client events cross between the two: each reaches the other and not its sender.
        after.ws.send(JSON.stringify({ event: 'client-ping', channel: 'private-tls-reload', data: { from: 'after' } }));
        await before.received((f) => f.event === 'client-ping', 'client-ping on the subscriber from before');
        before.ws.send(JSON.stringify({ event: 'client-pong', channel: 'private-tls-reload', data: { from: 'before' } }));
        // An echo of the ping to its sender would have reached it before the pong (same socket, sent
        // earlier); an echo of the pong, before a marker the other sends after receiving the pong.
        await after.received((f) => f.event === 'client-pong', 'client-pong on the subscriber from after');
        await flushedBy(
          () => after.ws.send(JSON.stringify({ event: 'client-marker', channel: 'private-tls-reload', data: {} })),
          () => before.frames.some((f) => f.event === 'client-marker'),
          'the marker on the subscriber from before',
        );
        expect(after.frames.filter((f) => f.event === 'client-ping')).toHaveLength(0);
        expect(before.frames.filter((f) => f.event === 'client-pong')).toHaveLength(0);
      } finally {
        after.ws.close();
      }
    } finally {
      agent.destroy();
      before.ws.close();
    }
  }, 60_000);

  it('keeps the running certificate when the files did not change', async () => {
    const installed = count('tls certificates installed');
    const unchanged = count('tls certificates unchanged');
    herald.signal('SIGHUP');
    await logged('tls certificates unchanged', unchanged);
    expect(count('tls certificates installed')).toBe(installed);
    expect(await noSniSerial()).toBe(secondSerial);
  }, 30_000);

  it('answers every request of a keep-alive HTTPS connection across certificate reloads', async () => {
    // One keep-alive connection at a time (maxSockets 1), opened before the reloads, while 150
    // reloads alternate the certificate (each change opens a new app on the port, at most one a
    // second). With server names swapped in place (removeServerName), one of these requests was
    // closed without an answer in nearly every run (150 rounds: 5 failures in 5 runs).
    const agent = new HttpsAgent({ ca, keepAlive: true, maxSockets: 1 });
    const get = (): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = httpsRequest({ host: 'localhost', port: herald.port, path: '/ready', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        });
        req.on('error', reject);
        req.end();
      });
    try {
      expect(await get()).toBe(200);
      const installed = count('tls certificates installed');
      for (let round = 0; round < 150; round++) {
        const name = round % 2 === 0 ? 'first' : 'second';
        copyFileSync(join(dir, `${name}.pem`), join(dir, 'cert.pem'));
        copyFileSync(join(dir, `${name}-key.pem`), join(dir, 'key.pem'));
        const reread = count('tls certificates re-read');
        herald.signal('SIGHUP');
        await logged('tls certificates re-read', reread);
        for (let i = 0; i < 3; i++) expect(await get()).toBe(200);
      }
      expect(count('tls certificates installed')).toBeGreaterThan(installed);
      // The last files (second) win within the handover interval (one handover a second at
      // most): the handover after the last re-read finds them installed already ('unchanged'),
      // or installs them, logged with their serial once the previous listener has closed (until
      // then, new connections may still reach it). Requests are answered meanwhile.
      const afterLastReread = (): string => herald.stderr.slice(herald.stderr.lastIndexOf('tls certificates re-read'));
      const failures: unknown[] = [];
      await until(
        async () => {
          const status = await get().catch((err: unknown) => err);
          if (status !== 200) failures.push(status);
          const since = afterLastReread();
          const lines = since.split('\n');
          return lines.some((l) => l.includes('tls certificates unchanged') || (l.includes('tls certificates installed') && l.toUpperCase().includes(`"SERIAL":"${secondSerial}"`)));
        },
        () => `the last reload installed:\n${afterLastReread()}`,
        5000,
      );
      expect(await noSniSerial()).toBe(secondSerial);
      expect(failures).toEqual([]);
      for (let i = 0; i < 3; i++) expect(await get()).toBe(200);
      expect(await peerSerial('localhost')).toBe(secondSerial);
    } finally {
      agent.destroy();
    }
  }, 60_000);

  it('refuses a second Herald on its port, though the port is opened shareable for reloads', async () => {
    // With tls the listen socket has SO_REUSEPORT (a reload opens the new app beside it);
    // start-up still checks the port is free, with TLS or without.
    for (const config of [{ tls: { certFile: join(dir, 'first.pem'), keyFile: join(dir, 'first-key.pem') } }, {}]) {
      const configPath = join(dir, 'second-herald.json');
      writeFileSync(configPath, JSON.stringify(config));
      const child = spawn(process.execPath, [CLI, '--config', configPath], {
        cwd: REPO_ROOT,
        env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: String(herald.port), HERALD_DATA_DIR: mkdtempSync(join(dir, 'second-')), HERALD_SHARDS: '1' },
      });
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      expect(code, stderr).toBe(1);
      expect(stderr).toContain(`cannot listen on 127.0.0.1:${herald.port}: it is in use`);
    }
    expect((await httpsGet('/ready')).status).toBe(200);
  }, 30_000);

  it('refuses to start with a key file that does not match, naming the field', async () => {
    const bad = new HeraldProcess({ shards: 1, config: { tls: { certFile: join(dir, 'first.pem'), keyFile: join(dir, 'ca.pem') } } });
    try {
      await expect(bad.start()).rejects.toThrow(/invalid config at tls\.keyFile/);
    } finally {
      await bad.dispose();
    }
  });
});
