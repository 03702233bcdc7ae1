/**
 * The uWebSockets.js HTTP idioms, in one place: capture the request synchronously,
 * register onAborted before any await, cap the body while it streams in, write inside
 * cork, and never touch a response after it was aborted.
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { HeraldError, channelErrorBody, pushErrorBody, type ErrorCode } from '../errors.js';
import { log } from '../log.js';

/** Which error body shape a route answers with. */
export type ErrorStyle = 'channel' | 'push' | 'plain';

export interface RequestContext {
  /** Lower-case method. */
  readonly method: string;
  /** Path without the query string, as received (not decoded). */
  readonly path: string;
  /** Raw query string without '?'. */
  readonly query: string;
  /** Header names lower-cased. */
  readonly headers: Readonly<Record<string, string>>;
  /** Route parameters, URL-decoded, by name. */
  readonly params: Readonly<Record<string, string>>;
  /** Body bytes (empty for routes that read none). */
  readonly body: Buffer;
  /** Remote address, for logs. */
  readonly remoteAddress: string;
}

export interface Reply {
  status: number;
  /** A string or object; objects are JSON-encoded. */
  body?: string | Buffer | object;
  headers?: Record<string, string>;
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

/** Builds the uWS handler for one route: capture, read body within the limit, run, answer. */
export function uwsHandler(paramNames: readonly string[], handler: Handler, opts: RouteOptions) {
  return (res: HttpResponse, req: HttpRequest): void => {
    const state = { aborted: false };
    inFlight.count++;
    res.onAborted(() => {
      if (!state.aborted) inFlight.count--;
      state.aborted = true;
    });
    const headers: Record<string, string> = {};
    req.forEach((k, v) => {
      headers[k] = v;
    });
    const params: Record<string, string> = {};
    for (let i = 0; i < paramNames.length; i++) {
      params[paramNames[i]!] = safeDecode(req.getParameter(i) ?? '');
    }
    const base = {
      method: req.getCaseSensitiveMethod().toLowerCase(),
      path: req.getUrl(),
      query: req.getQuery() ?? '',
      headers,
      params,
      remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
    };
    const run = (body: Buffer): void => {
      let result: Reply | Promise<Reply>;
      try {
        result = handler({ ...base, body });
      } catch (err) {
        send(res, state, errorReply(err, opts.errorStyle, base.path), opts);
        return;
      }
      if (result instanceof Promise) {
        result.then(
          (reply) => send(res, state, reply, opts),
          (err: unknown) => send(res, state, errorReply(err, opts.errorStyle, base.path), opts),
        );
      } else {
        send(res, state, result, opts);
      }
    };
    if (opts.bodyLimit === 0 || base.method === 'get' || base.method === 'head') {
      run(Buffer.alloc(0));
      return;
    }
    const tooLarge = (): void => {
      const err = new HeraldError(opts.bodyTooLarge ?? 'BODY_TOO_LARGE', `Request body is larger than ${opts.bodyLimit} bytes`);
      send(res, state, errorReply(err, opts.errorStyle, base.path), opts, true);
    };
    const declared = Number(headers['content-length']);
    if (Number.isFinite(declared) && declared > opts.bodyLimit) {
      tooLarge();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let rejected = false;
    res.onData((chunk, isLast) => {
      if (rejected) return;
      size += chunk.byteLength;
      if (size > opts.bodyLimit) {
        rejected = true;
        tooLarge();
        return;
      }
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk).slice()));
      if (isLast) run(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    });
  };
}

function safeDecode(s: string): string {
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
    log.error('unhandled error in request handler', { path, error: String((err as Error)?.stack ?? err) });
    herr = new HeraldError('INTERNAL');
  }
  const body = style === 'push' ? pushErrorBody(herr) : channelErrorBody(herr);
  return { status: herr.status, body };
}

function send(
  res: HttpResponse,
  state: { aborted: boolean },
  reply: Reply,
  opts: RouteOptions,
  closeConnection = false,
): void {
  if (state.aborted) return;
  state.aborted = true; // a response is answered once
  inFlight.count--;
  const body = reply.body === undefined ? '' : typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body);
  res.cork(() => {
    res.writeStatus(statusLine(reply.status));
    const headers = reply.headers ?? {};
    if (!('content-type' in headers) && body !== '') res.writeHeader('content-type', 'application/json');
    for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v);
    if (opts.extraHeaders) for (const [k, v] of Object.entries(opts.extraHeaders)) res.writeHeader(k, v);
    res.end(body, closeConnection);
  });
}
