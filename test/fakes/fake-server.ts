/**
 * What the three fake gateways share: a real TLS server (HTTP/2, optionally HTTP/1.1 too) on
 * 127.0.0.1 port 0 with the test certificate, start/stop, connection tracking, and scripted
 * behaviour (dead tokens, "fail the next N requests for token X with status S").
 */
import http2 from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { serverTlsOptions } from './tls.js';

/** One scripted failure answer. `reason` overrides the fake's default error body reason/code. */
export interface ScriptedFailure {
  status: number;
  /** Sent as a Retry-After header, in seconds. */
  retryAfterSeconds?: number;
  reason?: string;
}

/** A request as the fakes see it, body fully read. */
export interface FakeRequest {
  method: string;
  path: string;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** 'h2' or 'http/1.1'. */
  protocol: string;
}

/** What a fake answers; an object body is sent as JSON. */
export interface FakeResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string | object;
}

/** Base of ApnsFake, FcmFake and WebPushFake: subclasses implement handle(). */
export abstract class FakeGateway {
  /** Tokens the fake answers as permanently gone (each fake uses its gateway's own answer). */
  readonly deadTokens = new Set<string>();
  /** TLS connections accepted since start (shows pooling and reconnects). */
  connectionsAccepted = 0;
  readonly #failures = new Map<string, { remaining: number; failure: ScriptedFailure }[]>();
  readonly #server: http2.Http2SecureServer;
  readonly #sockets = new Set<TLSSocket>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  #port = 0;

  protected constructor(allowHTTP1: boolean) {
    this.#server = http2.createSecureServer({ ...serverTlsOptions(), allowHTTP1 });
    this.#server.on('secureConnection', (socket: TLSSocket) => {
      this.connectionsAccepted++;
      this.#sockets.add(socket);
      socket.on('close', () => this.#sockets.delete(socket));
    });
    this.#server.on('session', (session) => {
      this.#sessions.add(session);
      session.on('close', () => this.#sessions.delete(session));
      session.on('error', () => undefined);
    });
    this.#server.on('request', (req, res) => {
      void this.#serve(req, res);
    });
  }

  /** `https://127.0.0.1:<port>`; valid after start(). */
  get origin(): string {
    if (!this.#port) throw new Error('fake gateway not started');
    return `https://127.0.0.1:${this.#port}`;
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected server address');
    this.#port = address.port;
    return this;
  }

  /** Closes the listener and every connection; in-flight requests are cut. */
  async stop(): Promise<void> {
    if (!this.#server.listening) return;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    for (const session of this.#sessions) session.destroy();
    for (const socket of this.#sockets) socket.destroy();
    await closed;
  }

  /** Sends GOAWAY on every HTTP/2 session and drops HTTP/1 sockets, as a gateway does when it rotates servers. */
  disconnectAll(): void {
    for (const session of this.#sessions) session.close();
    for (const socket of this.#sockets) {
      if (socket.alpnProtocol !== 'h2') socket.destroy();
    }
  }

  /** The next `count` requests for `token` get `status` (Infinity for "always"). */
  failNext(token: string, count: number, status: number, options: Omit<ScriptedFailure, 'status'> = {}): void {
    const queue = this.#failures.get(token) ?? [];
    queue.push({ remaining: count, failure: { status, ...options } });
    this.#failures.set(token, queue);
  }

  /** Forgets dead tokens and scripted failures. */
  resetBehaviour(): void {
    this.deadTokens.clear();
    this.#failures.clear();
  }

  /** Consumes one scripted failure for `token`, if any is pending. */
  protected takeFailure(token: string): ScriptedFailure | undefined {
    const queue = this.#failures.get(token);
    const head = queue?.[0];
    if (!queue || !head) return undefined;
    head.remaining--;
    if (head.remaining <= 0) queue.shift();
    if (queue.length === 0) this.#failures.delete(token);
    return head.failure;
  }

  /** Retry-After header for a scripted failure, if it asks for one. */
  protected static retryAfterHeader(failure: ScriptedFailure): Record<string, string> {
    return failure.retryAfterSeconds === undefined ? {} : { 'retry-after': String(failure.retryAfterSeconds) };
  }

  protected abstract handle(request: FakeRequest): Promise<FakeResponse>;

  async #serve(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): Promise<void> {
    let response: FakeResponse;
    try {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      response = await this.handle({
        method: req.method,
        path: req.url,
        headers: req.headers,
        body: Buffer.concat(chunks),
        protocol: req.httpVersion === '2.0' ? 'h2' : 'http/1.1',
      });
    } catch (error) {
      response = { status: 500, body: { fakeError: error instanceof Error ? error.message : String(error) } };
    }
    if (res.destroyed || res.writableEnded) return;
    const body = response.body === undefined ? '' : typeof response.body === 'string' ? response.body : JSON.stringify(response.body);
    const headers: Record<string, string> = { ...response.headers };
    if (typeof response.body === 'object') headers['content-type'] = 'application/json';
    res.writeHead(response.status, headers);
    res.end(body);
  }
}
