/**
 * The uWebSockets.js HTTP idioms, in one place: capture the request synchronously,
 * register onAborted before any await, cap the body while it streams in, write inside
 * cork, and never touch a response after it was aborted.
 *
 * Pipelining: uWS closes a connection when it parses a request while the one before it is
 * unanswered ("denying async pipelining", HttpContext.h), so an answer that waits on a shard
 * pauses the connection's reads (`res.pause()`) until it is written: requests pipelined behind
 * it, and a client's FIN, stay in the kernel and are read, in order, once it is answered.
 * Requests that arrived in the same read as the waiting one are beyond reach (docs/protocol.md).
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { HeraldError, channelErrorBody, pushErrorBody, type ErrorCode } from '../errors.js';
import { describeError, log } from '../log.js';

/** Which error body shape a route answers with. */
export type ErrorStyle = 'channel' | 'push' | 'plain';

export interface RequestContext {
  /** Lower-case method. */
  readonly method: string;
  /** Path without the query string, as received (not decoded). */
  readonly path: string;
  /** Raw query string without '?'. */
  readonly query: string;
  /**
   * Header names lower-cased: every header, or only those the route lists in
   * RouteOptions.headers (absent or empty ones left out).
   */
  readonly headers: Readonly<Record<string, string>>;
  /** Route parameters, URL-decoded, by name. */
  readonly params: Readonly<Record<string, string>>;
  /** Body bytes (empty for routes that read none). */
  readonly body: Buffer;
  /** Remote address, for logs; read when first asked for, '' once the response is finished. */
  readonly remoteAddress: string;
}

export interface Reply {
  status: number;
  /** A string or object; objects are JSON-encoded. */
  body?: string | Buffer | object;
  headers?: Record<string, string>;
  /** Set by errorReply: the catalogue code and message, for the debug log of refused requests (never sent as is). */
  error?: { code: string; message: string };
}

export type Handler = (ctx: RequestContext) => Reply | Promise<Reply>;

export interface RouteOptions {
  errorStyle: ErrorStyle;
  /** Largest body read, bytes; 0 reads none. */
  bodyLimit: number;
  /** Error answered when the body is over bodyLimit. */
  bodyTooLarge?: ErrorCode;
  /** Extra headers on every answer (CORS). */
  extraHeaders?: Record<string, string>;
  /**
   * Lower-case names of the request headers the handler reads. Absent: all headers are copied
   * (one native call per header); a route that needs few should list them, as the channel API
   * does. `content-length` is read for the body limit either way.
   */
  headers?: readonly string[];
}

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 202: '202 Accepted', 204: '204 No Content',
  400: '400 Bad Request', 401: '401 Unauthorized', 402: '402 Payment Required', 403: '403 Forbidden',
  404: '404 Not Found', 405: '405 Method Not Allowed', 409: '409 Conflict', 413: '413 Payload Too Large',
  422: '422 Unprocessable Entity', 429: '429 Too Many Requests', 500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

/** Requests received and not yet answered or aborted; graceful shutdown waits for zero. */
export const inFlight = { count: 0 };

export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

const EMPTY_BODY = Buffer.alloc(0);
const NO_HEADERS: Readonly<Record<string, string>> = Object.freeze({});

/** A route's options, prepared once at registration. */
interface CompiledRoute {
  readonly paramNames: readonly string[];
  readonly handler: Handler;
  readonly opts: RouteOptions;
  /** undefined: copy every header. */
  readonly headerNames: readonly string[] | undefined;
  readonly extraHeaders: readonly (readonly [string, string])[];
  readonly observe: AnswerObserver | undefined;
}

/** Told of every answer (metrics, 4xx debug logs): the request, its status, its arrival (performance.now()). */
export type AnswerObserver = (rc: RequestContext, reply: Reply, startMs: number) => void;

/**
 * One request and its response: the RequestContext handed to the handler and the state the
 * uWS callbacks share. `res` is valid until `done` (answered or aborted).
 */
class Exchange implements RequestContext {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly params: Readonly<Record<string, string>>;
  body: Buffer = EMPTY_BODY;
  /** Answered or aborted: `res` must not be touched again. */
  done = false;
  private remote: string | undefined;
  /** Body chunks so far, when the body came in more than one. */
  private chunks: Buffer[] | undefined;
  private size = 0;
  private rejected = false;
  /** performance.now() at arrival, for the duration metric. */
  private readonly startMs: number;
  /** Reads paused while an asynchronous answer is pending (resumed when it is written). */
  private paused = false;

  constructor(
    private readonly res: HttpResponse,
    req: HttpRequest,
    private readonly route: CompiledRoute,
  ) {
    this.startMs = route.observe === undefined ? 0 : performance.now();
    this.method = req.getMethod();
    this.path = req.getUrl();
    this.query = req.getQuery() ?? '';
    const names = route.headerNames;
    if (names === undefined) {
      const headers: Record<string, string> = {};
      req.forEach((k, v) => {
        headers[k] = v;
      });
      this.headers = headers;
    } else if (names.length === 0) {
      this.headers = NO_HEADERS;
    } else {
      const headers: Record<string, string> = {};
      for (const name of names) {
        const value = req.getHeader(name);
        if (value !== '') headers[name] = value;
      }
      this.headers = headers;
    }
    const paramNames = route.paramNames;
    const params: Record<string, string> = {};
    for (let i = 0; i < paramNames.length; i++) {
      params[paramNames[i]!] = safeDecode(req.getParameter(i) ?? '');
    }
    this.params = params;
  }

  get remoteAddress(): string {
    if (this.remote === undefined) {
      if (this.done) return '';
      this.remote = Buffer.from(this.res.getRemoteAddressAsText()).toString();
    }
    return this.remote;
  }

  aborted(): void {
    if (!this.done) inFlight.count--;
    this.done = true;
  }

  /** Takes one body chunk (uWS frees its memory after the callback: copied once here). */
  data(chunk: ArrayBuffer, isLast: boolean): void {
    try {
      this.takeChunk(chunk, isLast);
    } catch (err) {
      // Inside a uWS callback: a throw would end the process.
      this.rejected = true;
      this.send(errorReply(err, this.route.opts.errorStyle, this.path), true);
    }
  }

  private takeChunk(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.rejected) return;
    this.size += chunk.byteLength;
    if (this.size > this.route.opts.bodyLimit) {
      this.rejected = true;
      this.tooLarge();
      return;
    }
    const copy = Buffer.from(new Uint8Array(chunk));
    if (isLast && this.chunks === undefined) {
      this.run(copy);
    } else {
      (this.chunks ??= []).push(copy);
      if (isLast) this.run(Buffer.concat(this.chunks, this.size));
    }
  }

  tooLarge(): void {
    const opts = this.route.opts;
    const err = new HeraldError(opts.bodyTooLarge ?? 'BODY_TOO_LARGE', `Request body is larger than ${opts.bodyLimit} bytes`);
    this.send(errorReply(err, opts.errorStyle, this.path), true);
  }

  run(body: Buffer): void {
    this.body = body;
    let result: Reply | Promise<Reply>;
    try {
      result = this.route.handler(this);
    } catch (err) {
      this.send(errorReply(err, this.route.opts.errorStyle, this.path));
      return;
    }
    if (result instanceof Promise) {
      if (!this.done) {
        this.res.pause();
        this.paused = true;
      }
      result.then(
        (reply) => this.send(reply),
        (err: unknown) => this.send(errorReply(err, this.route.opts.errorStyle, this.path)),
      );
    } else {
      this.send(result);
    }
  }

  /**
   * Answers once; a no-op after an abort or an earlier answer. Never throws: it runs inside
   * uWS callbacks and promise continuations, where a throw would end the process.
   */
  send(reply: Reply, closeConnection = false): void {
    if (this.done) return;
    let body: string | Buffer;
    try {
      body = reply.body === undefined ? '' : typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body);
    } catch (err) {
      // A reply body that cannot be encoded is a bug: answer 500 instead.
      reply = errorReply(err, this.route.opts.errorStyle, this.path);
      body = reply.body as string;
    }
    this.done = true;
    inFlight.count--;
    const res = this.res;
    const extra = this.route.extraHeaders;
    const paused = this.paused;
    res.cork(() => {
      // Before end: the response may not be touched once it is answered.
      if (paused) res.resume();
      // uWS answers 200 OK unless told otherwise: one native call less on the common path.
      if (reply.status !== 200) res.writeStatus(statusLine(reply.status));
      const headers = reply.headers;
      if (body !== '' && (headers === undefined || !('content-type' in headers))) res.writeHeader('content-type', 'application/json');
      if (headers !== undefined) for (const k in headers) res.writeHeader(k, headers[k]!);
      for (let i = 0; i < extra.length; i++) res.writeHeader(extra[i]![0], extra[i]![1]);
      res.end(body, closeConnection);
    });
    if (this.route.observe !== undefined) this.route.observe(this, reply, this.startMs);
  }
}

/** Builds the uWS handler for one route: capture, read body within the limit, run, answer. */
export function uwsHandler(paramNames: readonly string[], handler: Handler, opts: RouteOptions, observe?: AnswerObserver) {
  const route: CompiledRoute = {
    paramNames,
    handler,
    opts,
    headerNames: opts.headers?.map((h) => h.toLowerCase()),
    extraHeaders: Object.entries(opts.extraHeaders ?? {}),
    observe,
  };
  const readsBody = opts.bodyLimit > 0;
  const contentLengthCopied = route.headerNames === undefined || route.headerNames.includes('content-length');
  return (res: HttpResponse, req: HttpRequest): void => {
    const exchange = new Exchange(res, req, route);
    inFlight.count++;
    res.onAborted(() => exchange.aborted());
    if (!readsBody || exchange.method === 'get' || exchange.method === 'head') {
      exchange.run(EMPTY_BODY);
      return;
    }
    const declared = Number(contentLengthCopied ? exchange.headers['content-length'] : req.getHeader('content-length'));
    if (Number.isFinite(declared) && declared > opts.bodyLimit) {
      exchange.tooLarge();
      return;
    }
    res.onData((chunk, isLast) => exchange.data(chunk, isLast));
  };
}

function safeDecode(s: string): string {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Turns a thrown value into a reply; a non-HeraldError is a bug: logged, answered 500. */
export function errorReply(err: unknown, style: ErrorStyle, path: string): Reply {
  let herr: HeraldError;
  if (err instanceof HeraldError) {
    herr = err;
  } else {
    log.error('unhandled error in request handler', { path, error: describeError(err) });
    herr = new HeraldError('INTERNAL');
  }
  const body = style === 'push' ? pushErrorBody(herr) : channelErrorBody(herr);
  const reply: Reply = { status: herr.status, body, error: { code: herr.code, message: herr.message } };
  if (herr.retryAfterSeconds !== undefined) reply.headers = { 'retry-after': String(herr.retryAfterSeconds) };
  return reply;
}
