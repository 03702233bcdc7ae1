/**
 * The TLS server under every local gateway (the sandbox gateway and the tests' fakes): HTTP/2,
 * optionally HTTP/1.1 too, each request's body read whole (up to MAX_BODY_BYTES) and handed to
 * one handler, whose answer is written back. It tracks its connections, so it can stop at once
 * or drop them all as a gateway does when it rotates servers.
 */
import http2 from 'node:http2';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';

/** A request as a gateway sees it, body fully read. */
export interface GatewayRequest {
  method: string;
  path: string;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  /** 'h2' or 'http/1.1'. */
  protocol: string;
}

/** What a gateway answers; an object body is sent as JSON. */
export interface GatewayResponse {
  status: number;
  headers?: Record<string, string>;
  body?: string | object;
}

export type GatewayHandler = (request: GatewayRequest) => Promise<GatewayResponse>;

export interface GatewayServerOptions {
  /** PEM certificate and key served. */
  cert: string;
  key: string;
  /** Accept HTTP/1.1 as well as HTTP/2 (APNs is HTTP/2 only; FCM's token endpoint and web push take both). */
  allowHTTP1: boolean;
  handler: GatewayHandler;
}

/** Bodies above this many bytes are answered 413 (every gateway's own limit is a few kB). */
export const MAX_BODY_BYTES = 1024 * 1024;

export class GatewayServer {
  /** TLS connections accepted since start (shows pooling and reconnects). */
  connectionsAccepted = 0;
  readonly #server: http2.Http2SecureServer;
  readonly #handler: GatewayHandler;
  readonly #sockets = new Set<TLSSocket>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();

  constructor(options: GatewayServerOptions) {
    this.#handler = options.handler;
    this.#server = http2.createSecureServer({ cert: options.cert, key: options.key, allowHTTP1: options.allowHTTP1 });
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
    // A client that gives up mid-handshake is its own business.
    this.#server.on('tlsClientError', () => undefined);
  }

  /** Listens on `host`:`port` (0: a free port); resolves with the port. */
  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    const address = this.#server.address();
    if (address === null || typeof address === 'string') throw new Error('unexpected server address');
    return address.port;
  }

  /** Serves a connection another listener accepted (one port shared with plain HTTP). */
  acceptConnection(socket: Socket): void {
    this.#server.emit('connection', socket);
  }

  /** Closes the listener (if any) and every connection; in-flight requests are cut. */
  async stop(): Promise<void> {
    const closed = this.#server.listening ? new Promise<void>((resolve) => this.#server.close(() => resolve())) : Promise.resolve();
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

  async #serve(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse): Promise<void> {
    let response: GatewayResponse;
    try {
      const body = await readBody(req);
      response = body === undefined
        ? { status: 413, body: { error: `body over ${MAX_BODY_BYTES} bytes` } }
        : await this.#handler({
          method: req.method,
          path: req.url,
          headers: req.headers,
          body,
          protocol: req.httpVersion === '2.0' ? 'h2' : 'http/1.1',
        });
    } catch (error) {
      response = { status: 500, body: { gatewayError: error instanceof Error ? error.message : String(error) } };
    }
    if (res.destroyed || res.writableEnded) return;
    writeResponse(res, response);
  }
}

/** The whole body, or undefined once it passes MAX_BODY_BYTES. */
export async function readBody(req: AsyncIterable<unknown>): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** Writes `response` (object bodies as JSON) on an HTTP/1 or HTTP/2 compatibility response. */
export function writeResponse(
  res: { writeHead(status: number, headers: Record<string, string>): unknown; end(body: string): unknown },
  response: GatewayResponse,
): void {
  const body = response.body === undefined ? '' : typeof response.body === 'string' ? response.body : JSON.stringify(response.body);
  const headers: Record<string, string> = { ...response.headers };
  if (typeof response.body === 'object') headers['content-type'] = 'application/json';
  res.writeHead(response.status, headers);
  res.end(body);
}
