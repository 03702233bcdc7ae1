/**
 * The fallback's routes, all POST under `<httpFallback.path>/app/<key>/<server>/<session>/`
 * (and their CORS preflights), top-down:
 * - `xhr_streaming` and `xhr` (receive): the session's key is the requesting address' block and
 *   the path (sessionIds); a session held here is served (serve: opened when new, its handshake
 *   checked like a WebSocket upgrade's; the request becomes its receiver). In a cluster, one not
 *   held here is looked up in the directory first: a poll for a session another node holds is
 *   relayed there (cluster-relay.ts), and so is a stream where the directory relaysStreams (the
 *   front-end threads of one process); anything else opens a session here once the directory
 *   records it (openHere); a directory that cannot be read is answered 503 with Retry-After.
 * - `xhr_send` (send): refused with 429 past the address' miss budget (miss-budget.ts); the body
 *   is capped while it is read (BODY_TOO_LARGE, the session closed with 1009); its messages go
 *   to the session here, or in a cluster to the node holding it; an unknown session is 404 and
 *   counts as a miss.
 * uWS ends the process on an exception thrown out of a handler: each is guarded (500).
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import { HeraldError } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import { addressBlock, clientAddressResolver, type ClientAddressOf } from '../../net/client-address.js';
import { errorFrame } from '../frames.js';
import { parseHandshake } from '../ws/handshake.js';
import type { SocketEvents } from '../ws/socket-events.js';
import type { ClusterRelay } from './cluster-relay.js';
import { MissBudget, type MissCounter } from './miss-budget.js';
import { answerError, answerPoll, answerRetry, answerSent, preflight, responseReceiver, startStream } from './responses.js';
import type { SessionTable } from './session-table.js';

export interface FallbackRoutesDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly events: SocketEvents;
  readonly table: SessionTable;
  /** Cluster mode: requests for sessions another node holds. */
  readonly relay: ClusterRelay | null;
  /** The misses per address block, when several front-end threads share one budget; one of this thread's own otherwise. */
  readonly misses?: MissCounter | undefined;
}

const SERVER_ID = /^\d{1,4}$/;
const SESSION_ID = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_KEY_LENGTH = 200;
/** How often (ms) ended miss windows are forgotten. */
const MISS_SWEEP_MS = 10_000;

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

/** uWS ends the process on an exception thrown out of a handler: each is guarded. */
function guarded(what: string, handler: (res: HttpResponse, req: HttpRequest) => void): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
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
}

export class FallbackRoutes {
  private readonly clientAddressOf: ClientAddressOf;
  private readonly misses: MissCounter;
  private readonly missSweep: NodeJS.Timeout;
  /** xhr_send bodies: every message may be up to the frame limit, JSON-escaped (twice as long at worst). */
  private readonly sendBodyLimit: number;

  constructor(private readonly deps: FallbackRoutesDeps) {
    const { config } = deps;
    this.clientAddressOf = clientAddressResolver(config.trustedProxies);
    this.misses = deps.misses ?? new MissBudget(config.httpFallback.maxSessionMissesPerMinute);
    this.missSweep = setInterval(() => this.misses.sweep(Date.now()), MISS_SWEEP_MS);
    this.missSweep.unref();
    this.sendBodyLimit = config.maxWebSocketFrameBytes * 2 + 1024;
  }

  /** Registers the routes on `app` (the main app, and each app a TLS reload makes). */
  register(app: TemplatedApp): void {
    const base = `${this.deps.config.httpFallback.path}/app/:key/:server/:session`;
    app.post(`${base}/xhr_streaming`, guarded('xhr_streaming', (res, req) => this.receive(res, req, true)));
    app.post(`${base}/xhr`, guarded('xhr', (res, req) => this.receive(res, req, false)));
    app.post(`${base}/xhr_send`, guarded('xhr_send', (res, req) => this.send(res, req)));
    for (const route of ['xhr_streaming', 'xhr', 'xhr_send']) app.options(`${base}/${route}`, guarded('preflight', preflight));
  }

  /** Stops the miss budget's sweep (shutdown). */
  close(): void {
    clearInterval(this.missSweep);
  }

  /** The session's key in the table, or null when the path's segments are not a session's. */
  private sessionIds(res: HttpResponse, req: HttpRequest): SessionIds | null {
    const key = req.getParameter(0) ?? '';
    const server = req.getParameter(1) ?? '';
    const session = req.getParameter(2) ?? '';
    if (key === '' || key.length > MAX_KEY_LENGTH || !SERVER_ID.test(server) || !SESSION_ID.test(session)) return null;
    const address = this.clientAddressOf(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
    const block = addressBlock(address);
    return { id: `${block} ${key}/${server}/${session}`, key, address, block };
  }

  /** A stream (xhr_streaming) or a poll (xhr). */
  private receive(res: HttpResponse, req: HttpRequest, stream: boolean): void {
    const ids = this.sessionIds(res, req);
    if (!ids) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND', 'Not a session path: <path>/app/<key>/<server>/<session>/xhr_streaming'));
    const query = req.getQuery() ?? '';
    const { table, relay } = this.deps;
    if (table.get(ids.id) || !relay) return this.serve(res, ids, query, stream);
    // A cluster: the session may live on another node (a load balancer without sticky sessions).
    const directory = relay.directory;
    let aborted = false;
    /** A relayed stream's end on the session's node, when the client aborts. */
    let abortRelayed: (() => void) | null = null;
    res.onAborted(() => {
      aborted = true;
      abortRelayed?.();
    });
    const isAborted = (): boolean => aborted;
    directory.owner(ids.id).then(
      (owner) => {
        if (aborted) return;
        try {
          const here = (): void => (table.get(ids.id) ? this.serve(res, ids, query, stream) : this.openHere(res, ids, query, stream, isAborted));
          if (table.get(ids.id)) this.serve(res, ids, query, stream);
          else if (owner === null || owner === directory.nodeId) this.openHere(res, ids, query, stream, isAborted);
          else if (!stream) relay.relayPoll(res, ids.id, owner, isAborted, here);
          else if (directory.relaysStreams(owner)) abortRelayed = relay.relayStream(res, ids.id, owner, here);
          else this.openHere(res, ids, query, stream, isAborted);
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
  private openHere(res: HttpResponse, ids: SessionIds, query: string, stream: boolean, aborted: () => boolean): void {
    this.deps.table.claim(ids.id).then(
      () => {
        if (aborted()) return;
        try {
          this.serve(res, ids, query, stream);
        } catch (err) {
          log.error('http fallback: request failed', { error: describe(err) });
        }
      },
      (err: unknown) => {
        if (!aborted()) answerRetry(res, err);
      },
    );
  }

  /** The request becomes the receiver of its session here, opened (and connected) when new. */
  private serve(res: HttpResponse, ids: SessionIds, query: string, stream: boolean): void {
    const { table, events } = this.deps;
    const now = Date.now();
    let session = table.get(ids.id);
    let opening = false;
    if (!session) {
      const handshake = parseHandshake(`/app/${ids.key}`, query, this.deps.appsByKey);
      if (!handshake.ok) {
        // Refused before any state (a cluster's claim is given back): the open, the pusher:error and the close in one answer.
        table.unclaim(ids.id);
        answerPoll(res, `o\na${JSON.stringify([errorFrame(handshake.code, handshake.message)])}\nc${JSON.stringify([handshake.code, handshake.message])}\n`);
        return;
      }
      session = table.open(ids.id, ids.address, now);
      opening = true;
    }
    const s = session;
    table.renew(s, now);
    const r = responseReceiver(res, stream, now);
    res.onAborted(() => {
      if (s.receiver === r) table.release(s, Date.now());
    });
    if (stream) {
      res.onWritable(() => {
        r.blocked = false;
        table.schedule(s);
        return true;
      });
      startStream(res, opening ? 'o\n' : 'h\n');
      table.receive(s, r, now);
      if (opening) events.connect(s, ids.key, query);
      if (s.pending) table.schedule(s);
      return;
    }
    table.receive(s, r, now);
    if (opening) {
      events.connect(s, ids.key, query);
      // The open and whatever connecting queued (connection_established, or a refusal).
      answerPoll(res, `o\n${s.take()}`);
      table.release(s, now);
      if (s.finished) table.drop(s, now);
      return;
    }
    if (s.pending) table.flush(s, now);
  }

  /** xhr_send: the client's messages. */
  private send(res: HttpResponse, req: HttpRequest): void {
    const ids = this.sessionIds(res, req);
    if (!ids) return answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND'));
    const retryAfter = this.misses.retryAfterSeconds(ids.block, Date.now());
    if (retryAfter > 0) {
      const limited = new HeraldError('FALLBACK_TOO_MANY_MISSES');
      limited.retryAfterSeconds = retryAfter;
      return answerError(res, limited);
    }
    const { table, relay, config } = this.deps;
    const session = table.get(ids.id);
    // Not here: in a cluster it may be on another node (relayed once the body is read).
    if (session?.ended || (!session && !relay)) return this.notFound(res, ids);
    const limit = this.sendBodyLimit;
    const declared = Number(req.getHeader('content-length') || '0');
    const tooLarge = (): void => {
      answerError(res, new HeraldError('BODY_TOO_LARGE', `xhr_send body is larger than ${limit} bytes`), true);
      const message = `Message larger than the limit of ${config.maxWebSocketFrameBytes} bytes`;
      if (session && !session.ended) {
        session.endTooLarge(message);
      } else if (!session && relay) {
        // Held by another node (or thread): closed there.
        relay.directory.owner(ids.id).then(
          (owner) => {
            if (owner !== null && owner !== relay.directory.nodeId) relay.relayTooLarge(owner, ids.id, message);
          },
          () => undefined,
        );
      }
    };
    if (Number.isFinite(declared) && declared > limit) return tooLarge();
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      if (aborted) return;
      size += chunk.byteLength;
      if (size > limit) {
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
          table.renew(session, Date.now());
          table.inject(session, messages);
          return answerSent(res);
        }
        const cluster = relay!;
        cluster.directory.owner(ids.id).then(
          (owner) => {
            if (aborted) return;
            const here = table.get(ids.id);
            if (here && !here.ended) {
              table.inject(here, messages);
              return answerSent(res);
            }
            if (owner === null || owner === cluster.directory.nodeId) return this.notFound(res, ids);
            cluster.relaySend(owner, ids.id, messages);
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
  private notFound(res: HttpResponse, ids: SessionIds): void {
    this.misses.missed(ids.block, Date.now());
    answerError(res, new HeraldError('FALLBACK_SESSION_NOT_FOUND'));
  }
}
