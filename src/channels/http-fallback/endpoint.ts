/**
 * pusher-js' HTTP fallback transports, for clients that cannot open a WebSocket (proxies that
 * strip `Upgrade`, some carriers): a SockJS-style session under
 * `<httpFallback.path>/app/<key>/<server>/<session>/` with three routes, all POST:
 *
 * - `xhr_streaming`: a response kept open; the session's lines are written to it as they come.
 * - `xhr`: a long poll; answered with what is queued, or held until something is, or answered
 *   with a heartbeat after `heartbeatMs`. pusher-js polls again at once.
 * - `xhr_send`: the client's messages, a JSON array of strings (each one WebSocket message).
 *
 * The first stream or poll of an unknown session opens it (`o`) and connects it like a
 * WebSocket upgrade to `/app/<key>` (ws/endpoint.ts): the session is a connection in the
 * registry, with the same protocol handler, sweep (pings, 4201, 4100), quotas, webhooks and
 * metrics; channel frames reach it through the adapter's topic delivery (topics.ts).
 * Bounds: a session's queue (past maxSocketBackpressureBytes the sweep lets it go with 4100,
 * past twice that frames are dropped, as for a WebSocket), idle expiry (no stream or poll for
 * `sessionTimeoutMs`: closed as a dropped connection, 1006), xhr_send bodies capped while they
 * are read, and a refused or unknown session keeps no state. Every answer carries CORS headers
 * (pusher-js' `Content-Type: application/json` POSTs are preflighted).
 */
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import { CLOSE_CODES, HeraldError, channelErrorBody } from '../../errors.js';
import { log } from '../../log.js';
import { PREFLIGHT_MAX_AGE_SECONDS } from '../../http/cors.js';
import { statusLine } from '../../http/uws-http.js';
import { errorFrame } from '../ws/frames.js';
import { parseHandshake } from '../ws/handshake.js';
import type { WebSocketEndpoint } from '../ws/endpoint.js';
import type { SocketUserData } from '../ws/registry.js';
import { SessionSocket, type Receiver, type SessionHost } from './session.js';
import type { SessionTopics } from './topics.js';

export interface HttpFallbackDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly endpoint: WebSocketEndpoint;
  readonly topics: SessionTopics;
}

export interface HttpFallback {
  /** Registers the routes on `app` (the main app, and each app a TLS reload makes). */
  register(app: TemplatedApp): void;
  /** Open sessions (connected or closing). */
  sessionCount(): number;
  /** Ends every open stream and poll and stops the timers (shutdown, after the connections were closed). */
  close(): void;
}

type Ws = WebSocket<SocketUserData>;

const SERVER_ID = /^\d{1,4}$/;
const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_KEY_LENGTH = 200;

const CORS_HEADERS: readonly (readonly [string, string])[] = [
  ['access-control-allow-origin', '*'],
  ['cache-control', 'no-store'],
];

function describe(err: unknown): string {
  return String((err as Error)?.stack ?? err);
}

export function createHttpFallback(deps: HttpFallbackDeps): HttpFallback {
  const { config, endpoint, topics } = deps;
  const { path, sessionTimeoutMs, heartbeatMs } = config.httpFallback;
  const behavior = endpoint.behavior;
  const sessions = new Map<string, SessionSocket>();
  const dirty = new Set<SessionSocket>();
  let flushScheduled = false;
  /** xhr_send bodies: every message may be up to the frame limit, JSON-escaped (twice as long at worst). */
  const sendBodyLimit = config.maxWebSocketFrameBytes * 2 + 1024;

  const host: SessionHost = {
    hardCapBytes: config.maxSocketBackpressureBytes * 2,
    schedule: (session) => {
      dirty.add(session);
      if (!flushScheduled) {
        flushScheduled = true;
        setImmediate(flushAll);
      }
    },
    ended: (session, code) => {
      topics.removeAll(session);
      try {
        behavior.close!(session as unknown as Ws, code, new ArrayBuffer(0));
      } catch (err) {
        log.error('http fallback: session close handler failed', { error: describe(err) });
      }
    },
    drained: (session) => {
      try {
        behavior.drain!(session as unknown as Ws);
      } catch (err) {
        log.error('http fallback: session drain handler failed', { error: describe(err) });
      }
    },
    subscribe: (session, topic) => topics.add(session, topic),
    unsubscribe: (session, topic) => topics.remove(session, topic),
  };

  function flushAll(): void {
    flushScheduled = false;
    const now = Date.now();
    for (const session of dirty) {
      try {
        flush(session, now);
      } catch (err) {
        log.error('http fallback: flush failed', { error: describe(err) });
      }
    }
    dirty.clear();
  }

  /** Writes the session's queue to its receiver, if it has one that can take it. */
  function flush(session: SessionSocket, now: number): void {
    const r = session.receiver;
    if (!r || r.blocked || !session.pending) return;
    const body = session.take();
    if (body === '') return;
    if (r.stream) {
      let ok = true;
      r.res.cork(() => {
        ok = r.res.write(body);
        if (session.finished) r.res.end();
      });
      r.lastWriteMs = now;
      if (session.finished) {
        release(session, now);
        drop(session, now);
      } else if (!ok) r.blocked = true;
      return;
    }
    answerPoll(r.res, body);
    release(session, now);
    if (session.finished) drop(session, now);
  }

  /** The session's receiver is answered or gone: idle from now on. */
  function release(session: SessionSocket, now: number): void {
    session.receiver = null;
    session.idleSinceMs = now;
  }

  /** Off the table; ended first (as a dropped connection) if it was still open. */
  function drop(session: SessionSocket, now: number): void {
    if (!session.ended) session.close();
    const r = session.receiver;
    if (r) {
      release(session, now);
      try {
        if (r.stream) r.res.cork(() => r.res.end());
        else answerPoll(r.res, '');
      } catch {
        // Already answered or aborted.
      }
    }
    if (sessions.get(session.id) === session) sessions.delete(session.id);
    dirty.delete(session);
  }

  /** Heartbeats and idle expiry, for every session, once per tick. */
  const tickMs = Math.max(50, Math.min(1000, Math.floor(heartbeatMs / 2), Math.floor(sessionTimeoutMs / 2)));
  const timer = setInterval(() => {
    const now = Date.now();
    for (const session of sessions.values()) {
      try {
        const r = session.receiver;
        if (r) {
          if (r.stream) {
            if (!r.blocked && now - r.lastWriteMs >= heartbeatMs) {
              r.res.cork(() => r.res.write('h\n'));
              r.lastWriteMs = now;
            }
          } else if (now - r.openedMs >= heartbeatMs) {
            answerPoll(r.res, 'h\n');
            release(session, now);
          }
        } else if (now - session.idleSinceMs >= sessionTimeoutMs) {
          drop(session, now);
        }
      } catch (err) {
        log.error('http fallback: session sweep failed', { error: describe(err) });
      }
    }
  }, tickMs);
  timer.unref();

  function writeHead(res: HttpResponse, status: number, contentType: string): void {
    res.writeStatus(statusLine(status));
    res.writeHeader('content-type', contentType);
    for (const [k, v] of CORS_HEADERS) res.writeHeader(k, v);
  }

  /** A poll's one answer: status, headers and its lines. */
  function answerPoll(res: HttpResponse, body: string): void {
    res.cork(() => {
      writeHead(res, 200, 'application/javascript; charset=UTF-8');
      res.end(body);
    });
  }

  function answerError(res: HttpResponse, err: HeraldError, closeConnection = false): void {
    res.cork(() => {
      writeHead(res, err.status, 'application/json');
      res.end(channelErrorBody(err), closeConnection);
    });
  }

  /** The session's id in the table, or null when the path's segments are not a session's. */
  function sessionId(req: HttpRequest): { id: string; key: string } | null {
    const key = req.getParameter(0) ?? '';
    const server = req.getParameter(1) ?? '';
    const session = req.getParameter(2) ?? '';
    if (key === '' || key.length > MAX_KEY_LENGTH || !SERVER_ID.test(server) || !SESSION_ID.test(session)) return null;
    return { id: `${key}/${server}/${session}`, key };
  }

  /** A stream (xhr_streaming) or a poll (xhr). */
  function receive(res: HttpResponse, req: HttpRequest, stream: boolean): void {
    const ids = sessionId(req);
    if (!ids) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND', 'Not a session path: <path>/app/<key>/<server>/<session>/xhr_streaming'));
    const query = req.getQuery() ?? '';
    const now = Date.now();
    let session = sessions.get(ids.id);
    let opening = false;
    if (!session) {
      const handshake = parseHandshake(`/app/${ids.key}`, query, deps.appsByKey);
      if (!handshake.ok) {
        // Refused before any state: the open, the pusher:error and the close in one answer.
        const body = `o\na${JSON.stringify([errorFrame(handshake.code, handshake.message)])}\nc${JSON.stringify([handshake.code, handshake.message])}\n`;
        res.cork(() => {
          writeHead(res, 200, 'application/javascript; charset=UTF-8');
          res.end(body);
        });
        return;
      }
      session = new SessionSocket(host, ids.id, now);
      sessions.set(ids.id, session);
      opening = true;
    }
    const s = session;
    // pusher-js keeps one receiver per session: a new one replaces an old one still open.
    const old = s.receiver;
    if (old) {
      release(s, now);
      try {
        if (old.stream) old.res.cork(() => old.res.end());
        else answerPoll(old.res, 'h\n');
      } catch {
        // Aborted meanwhile.
      }
    }
    const r: Receiver = { res, stream, blocked: false, lastWriteMs: now, openedMs: now };
    res.onAborted(() => {
      if (s.receiver === r) release(s, Date.now());
    });
    if (stream) {
      res.onWritable(() => {
        r.blocked = false;
        host.schedule(s);
        return true;
      });
      res.cork(() => {
        writeHead(res, 200, 'application/javascript; charset=UTF-8');
        res.writeHeader('x-accel-buffering', 'no');
        res.write(opening ? 'o\n' : 'h\n');
      });
      s.receiver = r;
      s.idleSinceMs = 0;
      if (opening) endpoint.connectSession(s as unknown as Ws, ids.key, query);
      if (s.pending) host.schedule(s);
      return;
    }
    s.receiver = r;
    s.idleSinceMs = 0;
    if (opening) {
      endpoint.connectSession(s as unknown as Ws, ids.key, query);
      // The open and whatever connecting queued (connection_established, or a refusal).
      answerPoll(res, `o\n${s.take()}`);
      release(s, now);
      if (s.finished) drop(s, now);
      return;
    }
    if (s.pending) flush(s, now);
  }

  /** xhr_send: the client's messages. */
  function send(res: HttpResponse, req: HttpRequest): void {
    const ids = sessionId(req);
    const session = ids ? sessions.get(ids.id) : undefined;
    if (!session || session.ended) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND'));
    const declared = Number(req.getHeader('content-length') || '0');
    const tooLarge = (): void => {
      answerError(res, new HeraldError('BODY_TOO_LARGE', `xhr_send body is larger than ${sendBodyLimit} bytes`), true);
      if (!session.ended) {
        session.cork(() => {
          session.send(errorFrame(null, `Message larger than the limit of ${config.maxWebSocketFrameBytes} bytes`));
          session.end(CLOSE_CODES.MESSAGE_TOO_BIG, 'Message too big');
        });
      }
    };
    if (Number.isFinite(declared) && declared > sendBodyLimit) return tooLarge();
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (aborted) return;
      size += chunk.byteLength;
      if (size > sendBodyLimit) {
        aborted = true;
        tooLarge();
        return;
      }
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!isLast) return;
      try {
        received(res, session, Buffer.concat(chunks));
      } catch (err) {
        log.error('http fallback: xhr_send failed', { error: describe(err) });
        answerError(res, new HeraldError('INTERNAL'));
      }
    });
  }

  function received(res: HttpResponse, session: SessionSocket, body: Buffer): void {
    let messages: unknown;
    try {
      messages = JSON.parse(body.toString('utf8'));
    } catch {
      messages = null;
    }
    if (!Array.isArray(messages) || !messages.every((m) => typeof m === 'string')) return answerError(res, new HeraldError('FALLBACK_BAD_PAYLOAD'));
    const ws = session as unknown as Ws;
    // An empty array is pusher-js' heartbeat: activity, as a WebSocket ping frame.
    if (messages.length === 0 && !session.ended) behavior.ping!(ws, new ArrayBuffer(0));
    for (const message of messages as string[]) {
      if (session.ended) break;
      const bytes = Buffer.from(message, 'utf8');
      behavior.message!(ws, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, false);
    }
    res.cork(() => {
      res.writeStatus('204 No Content');
      for (const [k, v] of CORS_HEADERS) res.writeHeader(k, v);
      res.end();
    });
  }

  function preflight(res: HttpResponse, req: HttpRequest): void {
    const requested = req.getHeader('access-control-request-headers');
    res.cork(() => {
      res.writeStatus('204 No Content');
      res.writeHeader('access-control-allow-origin', '*');
      res.writeHeader('access-control-allow-methods', 'POST, OPTIONS');
      res.writeHeader('access-control-allow-headers', requested === '' ? 'Content-Type' : requested.slice(0, 1000));
      res.writeHeader('access-control-max-age', String(PREFLIGHT_MAX_AGE_SECONDS));
      res.end();
    });
  }

  /** uWS ends the process on an exception thrown out of a handler: each is guarded. */
  const guarded =
    (what: string, handler: (res: HttpResponse, req: HttpRequest) => void) =>
    (res: HttpResponse, req: HttpRequest): void => {
      try {
        handler(res, req);
      } catch (err) {
        log.error(`http fallback: ${what} failed`, { error: describe(err) });
        try {
          res.cork(() => res.writeStatus('500 Internal Server Error').end('', true));
        } catch {
          // Already answered or aborted.
        }
      }
    };

  const base = `${path}/app/:key/:server/:session`;
  return {
    register: (app) => {
      if (!config.httpFallback.enabled) return;
      app.post(`${base}/xhr_streaming`, guarded('xhr_streaming', (res, req) => receive(res, req, true)));
      app.post(`${base}/xhr`, guarded('xhr', (res, req) => receive(res, req, false)));
      app.post(`${base}/xhr_send`, guarded('xhr_send', send));
      for (const route of ['xhr_streaming', 'xhr', 'xhr_send']) app.options(`${base}/${route}`, guarded('preflight', preflight));
    },
    sessionCount: () => sessions.size,
    close: () => {
      clearInterval(timer);
      flushAll();
      const now = Date.now();
      for (const session of [...sessions.values()]) drop(session, now);
    },
  };
}
