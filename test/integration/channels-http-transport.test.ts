/**
 * How the built server reads channel API requests off the wire (src/http/uws-http.ts): bodies
 * that arrive in many chunks are reassembled byte for byte, the size limit holds while a body
 * streams in, event data is measured in UTF-8 bytes right at the limit, and the API answers
 * without copying request headers it does not read. Signed by hand (test/helpers/signed-request.ts).
 */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { DEFAULT_APP, HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { signedQuery } from '../helpers/signed-request.js';
import { until } from '../helpers/wait.js';

let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({ config: { maxRequestBodyBytes: 256 * 1024 } });
});

afterAll(async () => {
  await herald?.dispose();
});

/** The query string of a signed POST of `body` to `path`. */
function signedPostQuery(path: string, body: string): string {
  return signedQuery(DEFAULT_APP, 'POST', path, { body });
}

async function post(path: string, body: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${herald.baseUrl}${path}?${signedPostQuery(path, body)}`, { method: 'POST', body, headers: { 'content-type': 'application/json' } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** A socket subscribed to `channel`, collecting the events it receives. */
async function subscriber(channel: string): Promise<{ ws: WebSocket; events: Record<string, unknown>[] }> {
  const ws = new WebSocket(`ws://127.0.0.1:${herald.port}/app/${DEFAULT_APP.key}?protocol=7&client=js&version=8.4.0`);
  const events: Record<string, unknown>[] = [];
  await new Promise<void>((resolve, reject) => {
    ws.on('error', reject);
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as Record<string, unknown>;
      if (frame.event === 'pusher:connection_established') ws.send(JSON.stringify({ event: 'pusher:subscribe', data: { channel } }));
      else if (frame.event === 'pusher_internal:subscription_succeeded') resolve();
      else events.push(frame);
    });
  });
  return { ws, events };
}


describe('channel API request reading', () => {
  it('reassembles a body that arrives in many chunks exactly (body_md5 checks every byte)', async () => {
    const sub = await subscriber('transport-big');
    try {
      const data = JSON.stringify({ text: 'ü'.repeat(3_000) });
      // ~200 KB, far more than one read: the padding is ignored, the md5 covers it all.
      const body = JSON.stringify({ padding: 'p'.repeat(200 * 1024), name: 'big', data, channel: 'transport-big' });
      const r = await post(`/apps/${DEFAULT_APP.id}/events`, body);
      expect(r).toEqual({ status: 200, body: {} });
      await until(() => sub.events.length === 1, 'sub.events.length === 1', 5_000);
      expect(sub.events[0]).toEqual({ event: 'big', channel: 'transport-big', data });
    } finally {
      sub.ws.close();
    }
  });

  it('measures event data in UTF-8 bytes: exactly 10 KB passes, one byte more does not', async () => {
    const path = `/apps/${DEFAULT_APP.id}/events`;
    expect((await post(path, JSON.stringify({ name: 'ev', data: 'é'.repeat(5_120), channel: 'news' }))).status).toBe(200);
    expect((await post(path, JSON.stringify({ name: 'ev', data: 'x'.repeat(10_240), channel: 'news' }))).status).toBe(200);
    const over = await post(path, JSON.stringify({ name: 'ev', data: `${'é'.repeat(5_119)}xxx`, channel: 'news' }));
    expect(over).toEqual({ status: 413, body: { code: 'EVENT_DATA_TOO_LARGE', error: 'data is 10241 bytes; the limit is 10240 bytes' } });
  });

  it('stops reading a body without a declared length once it passes the limit', async () => {
    const path = `/apps/${DEFAULT_APP.id}/events`;
    // A raw socket: the server answers and closes mid-body, which node:http reports as EPIPE.
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      const socket = connect(herald.port, '127.0.0.1', () => {
        socket.write(`POST ${path}?${signedPostQuery(path, '{}')} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n`);
        // 5 × 64 KiB: over the 256 KiB limit, and little enough left unread when the server
        // closes that the kernel does not reset the connection before the answer is read.
        const chunk = `10000\r\n${'x'.repeat(0x10000)}\r\n`;
        for (let i = 0; i < 5; i++) socket.write(chunk);
      });
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('error', () => undefined);
      socket.on('close', () => resolve(text));
      setTimeout(() => socket.destroy(), 5_000);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain('"code":"BODY_TOO_LARGE"');
  });
});
