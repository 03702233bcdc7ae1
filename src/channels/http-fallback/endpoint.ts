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
 * A session is bound to the client address that opened it (net/client-address.ts: the
 * forwarded address behind a trusted proxy; an IPv6 client's /64): its key in the table (and in
 * the cluster's directory) is that address and its path, so a request from another address
 * for the same path never reaches it. A stream or poll from there opens a session of its own,
 * an xhr_send gets the 404 of an unknown session, and the owner's stream is not touched: to
 * another address a session it did not open does not exist. xhr_sends that miss are counted
 * per address (miss-budget.ts); past the budget they are refused with 429.
 * In a cluster a node that cannot read the directory (Redis away) answers 503 with
 * Retry-After rather than open a session under an id another node may hold.
 * Bounds: a session's queue (past maxSocketBackpressureBytes the sweep lets it go with 4100,
 * past twice that frames are dropped, as for a WebSocket), idle expiry (no stream or poll for
 * `sessionTimeoutMs`: closed as a dropped connection, 1006), xhr_send bodies capped while they
 * are read, and a refused or unknown session keeps no state. Every answer carries CORS headers
 * (pusher-js' `Content-Type: application/json` POSTs are preflighted).
 */
import type { HttpRequest, HttpResponse, TemplatedApp, WebSocket } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import { CLOSE_CODES, HeraldError, channelErrorBody } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import { PREFLIGHT_MAX_AGE_SECONDS } from '../../http/cors.js';
import { statusLine } from '../../http/uws-http.js';
import { errorFrame } from '../frames.js';
import { parseHandshake } from '../ws/handshake.js';
import type { WebSocketEndpoint } from '../ws/endpoint.js';
import type { SocketUserData } from '../socket-registry.js';
import { SessionSocket, type Receiver, type SessionHost } from './session.js';
import type { SessionTopics } from './topics.js';
import type { FallbackRelay, SessionDirectory } from './directory.js';
import { MissBudget } from './miss-budget.js';
import { addressBlock, clientAddressResolver } from '../../net/client-address.js';

export interface HttpFallbackDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly endpoint: WebSocketEndpoint;
  readonly topics: SessionTopics;
  /** Cluster mode: where sessions live, for requests that reach another node than their session's. */
  readonly directory?: SessionDirectory | undefined;
}

/** A poll waiting for the answer of the node holding its session. */
interface RelayedPoll {
  readonly res: HttpResponse;
  readonly aborted: () => boolean;
  /** The session was not there after all: opened here (a new session). */
  readonly local: () => void;
  readonly timer: NodeJS.Timeout;
}

/** How long past the heartbeat a relayed poll waits for its answer before answering a heartbeat itself. */
const RELAY_GRACE_MS = 5000;

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

/** A session's key in the table and the directory, and what its request carried. */
interface SessionIds {
  /** `<binding> <app key>/<server>/<session>`: the binding is the opener's address block. */
  readonly id: string;
  readonly key: string;
  /** The requesting client's address (per-address connection limits). */
  readonly address: string;
  /** What the session is bound to: addressBlock(address). */
  readonly block: string;
}

/** How long (s) a client is told to wait when the session directory cannot be read. */
const DIRECTORY_RETRY_AFTER_SECONDS = 1;
/** How often (ms) ended miss windows are forgotten. */
const MISS_SWEEP_MS = 10_000;

export function createHttpFallback(deps: HttpFallbackDeps): HttpFallback {
  const { config, endpoint, topics } = deps;
  const { path, sessionTimeoutMs, heartbeatMs } = config.httpFallback;
  const behavior = endpoint.behavior;
  const sessions = new Map<string, SessionSocket>();
  const dirty = new Set<SessionSocket>();
  let flushScheduled = false;
  const directory = deps.directory;
  const clientAddressOf = clientAddressResolver(config.trustedProxies);
  const misses = new MissBudget(config.httpFallback.maxSessionMissesPerMinute);
  let missesSweptMs = Date.now();
  /** Polls relayed to the node holding their session, by poll id, until its answer comes back. */
  const remotePolls = new Map<string, RelayedPoll>();
  let pollSequence = 0;
  /** Life of a session's record in the cluster directory (renewed while the session is used). */
  const claimTtlMs = Math.max(60_000, 3 * heartbeatMs, 3 * sessionTimeoutMs);
  directory?.onMessage((message, origin) => {
    try {
      relayed(message, origin);
    } catch (err) {
      log.error('http fallback: relayed request failed', { error: describe(err) });
    }
  });
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
      if (session.finished) r.finish(body);
      else ok = r.write(body);
      r.lastWriteMs = now;
      if (session.finished) {
        release(session, now);
        drop(session, now);
      } else if (!ok) r.blocked = true;
      return;
    }
    r.finish(body);
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
        r.finish('');
      } catch {
        // Already answered or aborted.
      }
    }
    if (sessions.get(session.id) === session) {
      sessions.delete(session.id);
      directory?.release(session.id);
    }
    dirty.delete(session);
  }

  /** Heartbeats and idle expiry, for every session, once per tick. */
  const tickMs = Math.max(50, Math.min(1000, Math.floor(heartbeatMs / 2), Math.floor(sessionTimeoutMs / 2)));
  const timer = setInterval(() => {
    const now = Date.now();
    if (now - missesSweptMs >= MISS_SWEEP_MS) {
      missesSweptMs = now;
      misses.sweep(now);
    }
    for (const session of sessions.values()) {
      try {
        const r = session.receiver;
        if (r) {
          if (r.stream) {
            if (!r.blocked && now - r.lastWriteMs >= heartbeatMs) {
              r.write('h\n');
              r.lastWriteMs = now;
            }
          } else if (now - r.openedMs >= heartbeatMs) {
            r.finish('h\n');
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
      if (err.retryAfterSeconds !== undefined) res.writeHeader('retry-after', String(err.retryAfterSeconds));
      res.end(channelErrorBody(err), closeConnection);
    });
  }

  /**
   * The directory could not be read or written (Redis away): nothing was opened or relayed;
   * pusher-js takes the 503 as an interrupted connection and reconnects.
   */
  function answerRetry(res: HttpResponse, err: unknown): void {
    log.debug('http fallback: session directory unavailable', { error: String(err) });
    const retry = new HeraldError('CLUSTER_UNAVAILABLE');
    retry.retryAfterSeconds = DIRECTORY_RETRY_AFTER_SECONDS;
    answerError(res, retry);
  }

  /** The session's key in the table, or null when the path's segments are not a session's. */
  function sessionId(res: HttpResponse, req: HttpRequest): SessionIds | null {
    const key = req.getParameter(0) ?? '';
    const server = req.getParameter(1) ?? '';
    const session = req.getParameter(2) ?? '';
    if (key === '' || key.length > MAX_KEY_LENGTH || !SERVER_ID.test(server) || !SESSION_ID.test(session)) return null;
    const address = clientAddressOf(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
    const block = addressBlock(address);
    return { id: `${block} ${key}/${server}/${session}`, key, address, block };
  }

  /** A stream (xhr_streaming) or a poll (xhr). */
  function receive(res: HttpResponse, req: HttpRequest, stream: boolean): void {
    const ids = sessionId(res, req);
    if (!ids) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND', 'Not a session path: <path>/app/<key>/<server>/<session>/xhr_streaming'));
    const query = req.getQuery() ?? '';
    if (sessions.has(ids.id) || !directory) return serve(res, ids, query, stream);
    // A cluster: the session may live on another node (a load balancer without sticky sessions).
    const dir = directory;
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    dir.owner(ids.id).then(
      (owner) => {
        if (aborted) return;
        try {
          if (sessions.has(ids.id)) serve(res, ids, query, stream);
          else if (!stream && owner !== null && owner !== dir.nodeId) relayPoll(res, ids, query, owner, () => aborted);
          else openHere(res, ids, query, stream, () => aborted);
        } catch (err) {
          log.error('http fallback: request failed', { error: describe(err) });
        }
      },
      (err: unknown) => {
        // Unknown whether another node holds it: a session opened here could be its duplicate.
        if (!aborted) answerRetry(res, err);
      },
    );
  }

  /** Cluster: a new session, recorded as this node's before it is answered (or 503 when it cannot be). */
  function openHere(res: HttpResponse, ids: SessionIds, query: string, stream: boolean, aborted: () => boolean): void {
    directory!.claim(ids.id, claimTtlMs).then(
      () => {
        if (aborted()) return;
        try {
          serve(res, ids, query, stream);
        } catch (err) {
          log.error('http fallback: request failed', { error: describe(err) });
        }
      },
      (err: unknown) => {
        if (!aborted()) answerRetry(res, err);
      },
    );
  }

  /** A poll for a session another node holds: relayed there, its answer relayed back. */
  function relayPoll(res: HttpResponse, ids: SessionIds, query: string, owner: string, aborted: () => boolean): void {
    const pollId = `${directory!.nodeId}:${++pollSequence}`;
    const pending: RelayedPoll = {
      res,
      aborted,
      local: () => (sessions.has(ids.id) ? serve(res, ids, query, false) : openHere(res, ids, query, false, aborted)),
      timer: setTimeout(() => {
        remotePolls.delete(pollId);
        if (!aborted()) answerPoll(res, 'h\n');
      }, heartbeatMs + RELAY_GRACE_MS),
    };
    remotePolls.set(pollId, pending);
    directory!.send(owner, { op: 'poll', id: ids.id, pollId });
  }

  function serve(res: HttpResponse, ids: SessionIds, query: string, stream: boolean): void {
    const now = Date.now();
    let session = sessions.get(ids.id);
    let opening = false;
    if (!session) {
      const handshake = parseHandshake(`/app/${ids.key}`, query, deps.appsByKey);
      if (!handshake.ok) {
        // Refused before any state (a cluster's claim is given back): the open, the pusher:error and the close in one answer.
        directory?.release(ids.id);
        const body = `o\na${JSON.stringify([errorFrame(handshake.code, handshake.message)])}\nc${JSON.stringify([handshake.code, handshake.message])}\n`;
        res.cork(() => {
          writeHead(res, 200, 'application/javascript; charset=UTF-8');
          res.end(body);
        });
        return;
      }
      session = new SessionSocket(host, ids.id, ids.address, now);
      sessions.set(ids.id, session);
      opening = true;
    }
    const s = session;
    renew(s, now);
    // pusher-js keeps one receiver per session: a new one replaces an old one still open.
    const old = s.receiver;
    if (old) {
      release(s, now);
      try {
        old.finish(old.stream ? '' : 'h\n');
      } catch {
        // Aborted meanwhile.
      }
    }
    const r: Receiver = {
      stream,
      blocked: false,
      lastWriteMs: now,
      openedMs: now,
      write: (lines) => {
        let ok = true;
        res.cork(() => {
          ok = res.write(lines);
        });
        return ok;
      },
      finish: (lines) => {
        if (stream) res.cork(() => res.end(lines));
        else answerPoll(res, lines);
      },
    };
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
    const ids = sessionId(res, req);
    if (!ids) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND'));
    const retryAfter = misses.retryAfterSeconds(ids.block, Date.now());
    if (retryAfter > 0) {
      const limited = new HeraldError('FALLBACK_TOO_MANY_MISSES');
      limited.retryAfterSeconds = retryAfter;
      return answerError(res, limited);
    }
    const session = sessions.get(ids.id);
    // Not here: in a cluster it may be on another node (relayed once the body is read).
    if (session?.ended || (!session && !directory)) return notFound(res, ids);
    const declared = Number(req.getHeader('content-length') || '0');
    const tooLarge = (): void => {
      answerError(res, new HeraldError('BODY_TOO_LARGE', `xhr_send body is larger than ${sendBodyLimit} bytes`), true);
      if (session && !session.ended) {
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
        const messages = parseMessages(Buffer.concat(chunks));
        if (messages === null) return answerError(res, new HeraldError('FALLBACK_BAD_PAYLOAD'));
        if (session) {
          renew(session, Date.now());
          inject(session, messages);
          return answerSent(res);
        }
        const dir = directory!;
        dir.owner(ids.id).then(
          (owner) => {
            if (aborted) return;
            const here = sessions.get(ids.id);
            if (here && !here.ended) {
              inject(here, messages);
              return answerSent(res);
            }
            if (owner === null || owner === dir.nodeId) return notFound(res, ids);
            dir.send(owner, { op: 'send', id: ids.id, messages });
            answerSent(res);
          },
          (err: unknown) => {
            if (!aborted) answerRetry(res, err);
          },
        );
      } catch (err) {
        log.error('http fallback: xhr_send failed', { error: describe(err) });
        answerError(res, new HeraldError('INTERNAL'));
      }
    });
  }

  /** An xhr_send to a session this node does not have (for this address): counted against the address' budget. */
  function notFound(res: HttpResponse, ids: SessionIds): void {
    misses.missed(ids.block, Date.now());
    answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND'));
  }

  /** An xhr_send body: a JSON array of strings, or null. */
  function parseMessages(body: Buffer): string[] | null {
    let messages: unknown;
    try {
      messages = JSON.parse(body.toString('utf8'));
    } catch {
      return null;
    }
    return Array.isArray(messages) && messages.every((m) => typeof m === 'string') ? (messages as string[]) : null;
  }

  /** The client's messages, handled as WebSocket messages of the session. */
  function inject(session: SessionSocket, messages: readonly string[]): void {
    const ws = session as unknown as Ws;
    // An empty array is pusher-js' heartbeat: activity, as a WebSocket ping frame.
    if (messages.length === 0 && !session.ended) behavior.ping!(ws, new ArrayBuffer(0));
    for (const message of messages) {
      if (session.ended) break;
      const bytes = Buffer.from(message, 'utf8');
      behavior.message!(ws, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, false);
    }
  }

  function answerSent(res: HttpResponse): void {
    res.cork(() => {
      res.writeStatus('204 No Content');
      for (const [k, v] of CORS_HEADERS) res.writeHeader(k, v);
      res.end();
    });
  }

  /** Cluster: records this node as the session's holder, again once a third of the record's life has passed. */
  function renew(session: SessionSocket, now: number): void {
    if (!directory || now - session.claimedAtMs < claimTtlMs / 3) return;
    session.claimedAtMs = now;
    directory.claim(session.id, claimTtlMs).catch(() => {
      // Not recorded (Redis away): tried again on the session's next request.
      session.claimedAtMs = 0;
    });
  }

  /** Relay messages from the other nodes of the cluster. */
  function relayed(message: unknown, origin: string): void {
    const m = message as FallbackRelay;
    const now = Date.now();
    switch (m.op) {
      case 'send': {
        const session = sessions.get(m.id);
        if (!session || session.ended) return;
        renew(session, now);
        inject(session, m.messages);
        return;
      }
      case 'poll': {
        const session = sessions.get(m.id);
        if (!session) {
          directory!.send(origin, { op: 'gone', pollId: m.pollId });
          return;
        }
        const old = session.receiver;
        if (old) {
          release(session, now);
          old.finish(old.stream ? '' : 'h\n');
        }
        const pollId = m.pollId;
        session.receiver = {
          stream: false,
          blocked: false,
          lastWriteMs: now,
          openedMs: now,
          write: () => true,
          finish: (lines) => directory!.send(origin, { op: 'lines', pollId, body: lines }),
        };
        session.idleSinceMs = 0;
        renew(session, now);
        if (session.pending) flush(session, now);
        return;
      }
      case 'lines':
      case 'gone': {
        const pending = remotePolls.get(m.pollId);
        if (!pending) return;
        remotePolls.delete(m.pollId);
        clearTimeout(pending.timer);
        if (pending.aborted()) return;
        if (m.op === 'lines') answerPoll(pending.res, m.body);
        else pending.local();
        return;
      }
    }
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
      for (const pending of remotePolls.values()) clearTimeout(pending.timer);
      remotePolls.clear();
      flushAll();
      const now = Date.now();
      for (const session of [...sessions.values()]) drop(session, now);
    },
  };
}
