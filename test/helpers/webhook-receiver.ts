/**
 * A real local HTTP webhook receiver on port 0: records every request with its raw body and
 * what it answered, and can be told to fail the next N requests, fail everything, answer
 * slowly, or go down (stop listening) and come back on the same port. Stands in for every webhook
 * receiver in the tests: channel webhooks, instance (Beams) webhooks and publishes' webhookUrls.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { sleep } from './wait.js';

export interface ReceivedRequest {
  method: string;
  path: string;
  /** Header names lower-cased; repeated headers joined with ', '. */
  headers: Record<string, string>;
  rawBody: string;
  /** The body parsed as JSON; undefined when it is not JSON. */
  json: unknown;
  /** The status this receiver answered. */
  status: number;
  /** Date.now() when the request arrived. */
  receivedAt: number;
}

export class WebhookReceiver {
  readonly requests: ReceivedRequest[] = [];
  port = 0;
  /** Most requests open at the same time so far (concurrency caps). */
  maxConcurrent = 0;
  private active = 0;
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  private failures = 0;
  private failStatus = 500;
  private failingAll: number | false = false;
  private delay = 0;

  /** Starts listening on 127.0.0.1 (port 0 unless a port is given). */
  static async start(port = 0): Promise<WebhookReceiver> {
    const r = new WebhookReceiver();
    await r.listen(port);
    return r;
  }

  /** `http://127.0.0.1:<port>`, for URLs built by the test (per-publish webhookUrls). */
  get origin(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** URL of a path on this receiver. */
  url(path = '/webhook'): string {
    return `${this.origin}${path}`;
  }

  /** Requests received at `path`, in arrival order. */
  at(path: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.path === path);
  }

  /** The next `n` requests are answered with `status` (default 500). */
  failNext(n: number, status = 500): void {
    this.failures = n;
    this.failStatus = status;
  }

  /** Every request is answered with `status` until called with false. */
  failAll(status: number | false = 503): void {
    this.failingAll = status;
  }

  /** Answers each request after `ms` milliseconds. */
  setDelay(ms: number): void {
    this.delay = ms;
  }

  /** Requests answered 2xx. */
  delivered(): ReceivedRequest[] {
    return this.requests.filter((r) => r.status >= 200 && r.status < 300);
  }

  /** The `events` of every 2xx-answered channel webhook request, in arrival order. */
  deliveredEvents(): Array<Record<string, unknown>> {
    return this.delivered().flatMap((r) => (JSON.parse(r.rawBody) as { events: Array<Record<string, unknown>> }).events);
  }

  /** Stops listening and drops open connections (the receiver is "down"); `up()` brings it back on the same port. */
  async down(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listens again on the same port after `down()`. */
  async up(): Promise<void> {
    if (!this.server) await this.listen(this.port);
  }

  async close(): Promise<void> {
    await this.down();
  }

  private async listen(port: number): Promise<void> {
    const server = createServer((req, res) => void this.handle(req, res));
    server.keepAliveTimeout = 1000;
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    this.active++;
    this.maxConcurrent = Math.max(this.maxConcurrent, this.active);
    try {
      await this.answer(req, res);
    } finally {
      this.active--;
    }
  }

  private async answer(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const receivedAt = Date.now();
    let status = 200;
    if (this.failingAll !== false) status = this.failingAll;
    else if (this.failures > 0) {
      this.failures--;
      status = this.failStatus;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
    // time: an answer slowed down on purpose (timeouts, slow receivers).
    if (this.delay > 0) await sleep(this.delay);
    if (res.destroyed) return;
    const rawBody = Buffer.concat(chunks).toString('utf8');
    this.requests.push({ method: req.method ?? '', path: req.url ?? '', headers, rawBody, json: parsedOrUndefined(rawBody), status, receivedAt });
    res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'fail');
  }
}

function parsedOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
