/**
 * Http2SessionPool against a real local HTTP/2 TLS server that misbehaves the way a gateway
 * connection can: a session that stops answering (half-open), and a response that trickles in
 * for ever.
 */
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Http2SessionPool } from '../../../../src/push/gateways/http2-pool.js';
import { serverTlsOptions, TEST_CA_FILE } from '../../../fakes/tls.js';

type Behaviour = 'answer' | 'hang' | 'trickle';

let server: http2.Http2SecureServer;
let origin: string;
/** What the server does on each session, by the order the sessions arrived (the last entry repeats). */
let behaviours: Behaviour[];
let sessions: http2.ServerHttp2Session[];
let timers: NodeJS.Timeout[];
let pools: Http2SessionPool[];

beforeEach(async () => {
  behaviours = ['answer'];
  sessions = [];
  timers = [];
  pools = [];
  server = http2.createSecureServer(serverTlsOptions());
  server.on('session', (session) => {
    sessions.push(session);
    session.on('error', () => undefined);
  });
  server.on('stream', (stream) => {
    stream.on('error', () => undefined);
    const index = sessions.indexOf(stream.session as http2.ServerHttp2Session);
    const behaviour = behaviours[Math.min(index, behaviours.length - 1)];
    if (behaviour === 'hang') return;
    stream.respond({ ':status': 200 });
    if (behaviour === 'answer') {
      stream.end(`session ${index}`);
      return;
    }
    const timer = setInterval(() => stream.write('.'), 50);
    timers.push(timer);
    stream.on('close', () => clearInterval(timer));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(async () => {
  for (const timer of timers) clearInterval(timer);
  await Promise.all(pools.map((pool) => pool.close()));
  for (const session of sessions) session.destroy();
  await new Promise((resolve) => server.close(resolve));
});

function pool(requestTimeoutMs: number): Http2SessionPool {
  const created = new Http2SessionPool({ origin, ca: readFileSync(TEST_CA_FILE), size: 1, requestTimeoutMs });
  pools.push(created);
  return created;
}

/** Settles `promise`, or says it did not within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<{ value?: T; error?: unknown; late?: true }> {
  return Promise.race([
    promise.then((value) => ({ value }), (error: unknown) => ({ error })),
    new Promise<{ late: true }>((resolve) => setTimeout(() => resolve({ late: true }), ms)),
  ]);
}

describe('Http2SessionPool', () => {
  it('replaces a session a request timed out on, so a half-open connection does not fail every later send', async () => {
    behaviours = ['hang', 'answer'];
    const client = pool(300);
    const first = await within(client.request({ ':path': '/x' }, '{}'), 3_000);
    expect((first.error as { code?: string } | undefined)?.code).toBe('ETIMEDOUT');

    const second = await within(client.request({ ':path': '/x' }, '{}'), 3_000);
    expect(second.error).toBeUndefined();
    expect(second.value?.status).toBe(200);
    expect(second.value?.body.toString()).toBe('session 1');
    expect(sessions).toHaveLength(2);
  });

  it('times a request out at its deadline even while the response keeps trickling in', async () => {
    behaviours = ['trickle'];
    const client = pool(300);
    const started = performance.now();
    const result = await within(client.request({ ':path': '/x' }, '{}'), 2_000);
    expect(result.late).toBeUndefined();
    expect((result.error as { code?: string } | undefined)?.code).toBe('ETIMEDOUT');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it('keeps a healthy session for later requests', async () => {
    const client = pool(1_000);
    for (let i = 0; i < 3; i++) expect((await client.request({ ':path': '/x' }, '{}')).status).toBe(200);
    expect(sessions).toHaveLength(1);
  });
});
