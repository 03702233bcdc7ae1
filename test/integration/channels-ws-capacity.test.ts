/**
 * Capacity limits on the WebSocket endpoint, through real sockets: a consumer that stops
 * reading is let go with `pusher:error` 4100 and the 4100 close, which it reads once it reads
 * again (never a bare TCP close); the node-wide `maxConnections` refuses new connections with
 * 4100 and logs it once.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CLI, DEFAULT_APP, HeraldProcess, REPO_ROOT, startHerald } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { until } from '../helpers/wait.js';

const BACKPRESSURE_LIMIT = 64 * 1024;

let herald: HeraldProcess;
let limited: HeraldProcess;

beforeAll(async () => {
  [herald, limited] = await Promise.all([
    startHerald({ shards: 1, config: { maxSocketBackpressureBytes: BACKPRESSURE_LIMIT, webSocketSweepIntervalMs: 100 } }),
    startHerald({ shards: 1, config: { maxConnections: 3 } }),
  ]);
});

afterAll(async () => {
  await Promise.all([herald?.dispose(), limited?.dispose()]);
});

interface Client {
  ws: WebSocket;
  frames: Record<string, unknown>[];
  closed: Promise<number>;
}

/** A raw protocol client; resolves once connected (and subscribed to `channel`, if given) or refused. */
async function client(port: number, channel?: string): Promise<Client> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/app/${DEFAULT_APP.key}?protocol=7&client=js&version=8.4.0`);
  const frames: Record<string, unknown>[] = [];
  const closed = new Promise<number>((resolve) => ws.on('close', (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('close', () => resolve());
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as Record<string, unknown>;
      frames.push(frame);
      if (frame.event === 'pusher:connection_established') {
        if (channel) ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
        else resolve();
      } else if (frame.event === 'pusher_internal:subscription_succeeded') {
        resolve();
      }
    });
  });
  return { ws, frames, closed };
}

describe('a consumer that stops reading', () => {
  it('is let go with pusher:error 4100 and the 4100 close, read once it reads again', async () => {
    const sdk = channelsSdk(herald.port, DEFAULT_APP);
    const channel = 'slow-consumer';
    const slow = await client(herald.port, channel);
    const healthy = await client(herald.port, channel);
    let healthyEvents = 0;
    healthy.ws.on('message', () => healthyEvents++);
    slow.ws.pause();

    // 100 KB per batch; the kernel buffers a few MB before uWS holds any of it.
    const data = 'x'.repeat(10_000);
    const batch = Array.from({ length: 10 }, (_, i) => ({ channel, name: `big-${i}`, data }));
    let sent = 0;
    // Batches go out one after another until the server logs that it let the slow one go.
    const letGo = (): boolean => /slow consumer: disconnecting with 4100/.test(herald.stderr);
    let producing = true;
    const produced = (async () => {
      for (let round = 0; round < 400 && producing; round++) {
        const res = await sdk.triggerBatch(batch);
        expect(res.status).toBe(200);
        sent += batch.length;
      }
    })();
    try {
      await until(letGo, 'the server letting the slow consumer go', 60_000);
    } finally {
      producing = false;
      await produced;
    }

    // Reading again: its backlog, then the error and the close.
    slow.ws.resume();
    let code: number | undefined;
    void slow.closed.then((c) => (code = c));
    expect(await until(() => code, 'the slow consumer closed', 20_000)).toBe(4100);
    const last = slow.frames.at(-1)!;
    expect(last.event).toBe('pusher:error');
    expect(last.data).toMatchObject({ code: 4100 });
    expect(slow.frames.length).toBeLessThan(sent);
    // Counted under its app although it had left the app's books when it was let go.
    const metrics = parsePrometheus(await (await fetch(`http://127.0.0.1:${herald.port}/metrics`)).text());
    expect(series(metrics, 'herald_ws_disconnects_total', { app_id: DEFAULT_APP.id, code: '4100' })).toBe(1);

    // The other subscriber got every event and is still connected.
    await until(() => healthyEvents === sent, () => `every event at the healthy subscriber (${healthyEvents} of ${sent})`, 20_000);
    expect(healthy.ws.readyState).toBe(WebSocket.OPEN);
    healthy.ws.close();
  });
});

describe('the node-wide maxConnections', () => {
  it('refuses connections beyond it with pusher:error 4100, logged once; a freed place is taken again', async () => {
    const accepted = await Promise.all([client(limited.port), client(limited.port), client(limited.port)]);
    for (const c of accepted) expect(c.frames[0]!.event).toBe('pusher:connection_established');

    const refused = await Promise.all([client(limited.port), client(limited.port)]);
    for (const c of refused) {
      expect(await c.closed).toBe(4100);
      expect(c.frames[0]).toMatchObject({ event: 'pusher:error', data: { code: 4100 } });
      expect(String((c.frames[0]!.data as { message: string }).message)).toContain('connection limit (3)');
    }
    // Once per episode by each front-end thread that refused one (HERALD_FRONT_END_THREADS; one by default).
    const logged = limited.stderr.match(/node connection limit reached/g) ?? [];
    expect(logged.length).toBeGreaterThanOrEqual(1);
    expect(logged.length).toBeLessThanOrEqual(Math.min(Number(process.env.HERALD_FRONT_END_THREADS || 1), refused.length));

    accepted[0]!.ws.close();
    await accepted[0]!.closed;
    await until(async () => {
      const c = await client(limited.port);
      c.ws.close();
      return c.frames[0]!.event === 'pusher:connection_established';
    }, 'a connection accepted in the freed place');
    for (const c of accepted.slice(1)) c.ws.close();
  });
});

describe('the default node-wide maxConnections', () => {
  it('follows the open-file limit: with ulimit -n 256, connections past 128 are refused with 4100 and the server keeps serving', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'herald-ulimit-'));
    const child = spawn('/bin/sh', ['-c', `ulimit -n 256 && exec "${process.execPath}" "${CLI}"`], {
      cwd: REPO_ROOT,
      env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: '0', HERALD_SHARDS: '1', HERALD_DATA_DIR: dataDir, HERALD_LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const clients: Client[] = [];
    try {
      const port = Number(await until(() => /listening on http:\/\/[^:]+:(\d+)/.exec(stdout)?.[1], 'the listening line', 20_000));
      expect(stderr).toContain('"maxConnections":128');
      for (let i = 0; i < 13; i++) clients.push(...(await Promise.all(Array.from({ length: 10 }, () => client(port)))));
      const refused = clients.filter((c) => c.frames[0]!.event === 'pusher:error');
      expect(clients.length - refused.length).toBe(128);
      for (const c of refused) expect(await c.closed).toBe(4100);
      expect((await fetch(`http://127.0.0.1:${port}/ready`)).status).toBe(200);
    } finally {
      for (const c of clients) c.ws.terminate();
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
