/**
 * `GET /admin/v1/stream[?app=<appId>]`: live updates for the dashboard as server-sent events,
 * authenticated like every admin route (`Authorization: Bearer`; the page reads it with fetch,
 * since EventSource cannot send headers).
 *
 * Every second a `stats` event (connections, messages, dropped events); with `app`, the app's
 * debug events (`debug`) and sampling notices (`sampling`), and the app is watched (its taps
 * on) for as long as the stream is open. A slow reader loses debug events rather than growing
 * the server's buffers: while uWS holds unsent bytes for the stream, debug events are dropped
 * and counted in the next `stats`.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import { statusLine, type Reply } from '../http/uws-http.js';
import { adminErrorReply, type AdminDeps } from './routes.js';
import type { DebugMessage } from './debug-hub.js';

/** Interval of `stats` events, ms. */
export const STATS_INTERVAL_MS = 1000;

/** What a stream is opened from, read from the request before anything else. */
export interface StreamRequest {
  readonly authorization: string;
  readonly forwardedFor: string;
  /** Raw query string without '?'. */
  readonly query: string;
  readonly remoteAddress: string;
}

/**
 * Where a stream's answer goes: a uWS response (`UwsStreamSink`), or a front-end thread's
 * response reached over a port (stream-relay.ts).
 */
export interface StreamSink {
  /** Answers an error instead of a stream. */
  refuse(reply: Reply): void;
  /** The 200 and the event-stream headers, with a first comment line. */
  begin(): void;
  /** One chunk of the stream. */
  write(chunk: string): void;
  /** True while the client has not taken what was written (optional events are dropped meanwhile). */
  readonly behind: boolean;
  /** Ends the response (shutdown). */
  end(): void;
  /** Called once when the client goes away. */
  onClosed(listener: () => void): void;
}

/** Open streams, so that shutdown can end them. */
export interface StreamRegistry {
  /** Registers the stream route on `app` (the main app, and each app a TLS reload makes: http/tls.ts). */
  register(app: TemplatedApp): void;
  /** Opens a stream whose request was read elsewhere (a front-end thread's), answered through `sink`. */
  open(request: StreamRequest, sink: StreamSink): void;
  closeAll(): void;
}

export function adminStreams(deps: AdminDeps): StreamRegistry {
  const open = new Set<() => void>();
  const register = (target: TemplatedApp): void => {
    target.get('/admin/v1/stream', (res: HttpResponse, req: HttpRequest) => {
      try {
        startStream(readStreamRequest(res, req), new UwsStreamSink(res), deps, open);
      } catch (err) {
        log.error('admin stream failed', { error: describeError(err) });
        try {
          res.cork(() => res.writeStatus('500 Internal Server Error').end('', true));
        } catch {
          // Already answered or aborted.
        }
      }
    });
  };
  return {
    register,
    open: (request, sink) => startStream(request, sink, deps, open),
    closeAll: () => {
      for (const close of [...open]) close();
    },
  };
}

/** The request's part a stream needs, read now: uWS invalidates the request when its handler returns. */
export function readStreamRequest(res: HttpResponse, req: HttpRequest): StreamRequest {
  return {
    authorization: req.getHeader('authorization'),
    forwardedFor: req.getHeader('x-forwarded-for'),
    query: req.getQuery() ?? '',
    remoteAddress: Buffer.from(res.getRemoteAddressAsText()).toString(),
  };
}

/** One stream: checked, its head written, a `stats` event every second, the app's debug events. */
function startStream(request: StreamRequest, sink: StreamSink, deps: AdminDeps, open: Set<() => void>): void {
  const appId = new URLSearchParams(request.query).get('app');
  const stream = new EventStream(sink, open);
  const address = deps.clientAddressOf(request.remoteAddress, request.forwardedFor);
  try {
    deps.auth.check(request.authorization, address);
    if (deps.ctx.state.draining) throw new HeraldError('NOT_READY');
    if (appId !== null && !deps.ctx.appsById.has(appId)) throw new HeraldError('ADMIN_NOT_FOUND', `No app with id ${appId.slice(0, 200)}`);
  } catch (err) {
    sink.refuse(adminErrorReply(err, '/admin/v1/stream'));
    return;
  }
  sink.begin();
  const stats = (): void => {
    stream.send(
      'stats',
      {
        t: Date.now(),
        connections: deps.connectionCount(),
        appConnections: appId === null ? undefined : deps.connectionCount(appId),
        messages: deps.hub.messages,
        connectionsOpened: deps.hub.connectionsOpened,
        dropped: stream.dropped,
      },
      false,
    );
  };
  stats();
  stream.timer = setInterval(stats, STATS_INTERVAL_MS);
  if (appId !== null) {
    stream.unwatch = deps.hub.watch(appId, (message: DebugMessage) => {
      if (message.type === 'event') stream.send('debug', { t: message.t, ...message.event }, true);
      else stream.send('sampling', { t: message.t, every: message.every, eventsLastSecond: message.eventsLastSecond }, false);
    });
  }
  open.add(stream.close);
}

/**
 * One stream's events (optional ones dropped and counted while the client is behind) and its
 * end, by the client (gone) or by shutdown.
 */
class EventStream {
  /** Optional events dropped so far (told in `stats`). */
  dropped = 0;
  timer: NodeJS.Timeout | undefined = undefined;
  unwatch: (() => void) | undefined = undefined;
  private gone = false;
  private stopped = false;

  constructor(
    private readonly sink: StreamSink,
    private readonly open: Set<() => void>,
  ) {
    sink.onClosed(() => {
      this.gone = true;
      this.stop();
    });
  }

  /** Ends the stream (shutdown); registered in `open` once the stream has begun. */
  readonly close = (): void => {
    this.stop();
    if (this.gone) return;
    this.gone = true;
    this.sink.end();
  };

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    this.unwatch?.();
    this.open.delete(this.close);
  }

  /** One server-sent event; an `optional` one is dropped (and counted) while the client is behind. */
  send(event: string, data: unknown, optional: boolean): void {
    if (this.gone) return;
    if (this.sink.behind && optional) {
      this.dropped++;
      return;
    }
    this.sink.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }
}

/**
 * A stream answered on a uWS response: uWS buffers what the socket does not take at once, and
 * the sink is `behind` until the socket is writable again. `onBehind` is told each change.
 */
export class UwsStreamSink implements StreamSink {
  behind = false;
  private closed = false;
  private readonly closedListeners: (() => void)[] = [];

  constructor(
    private readonly res: HttpResponse,
    private readonly onBehind?: (behind: boolean) => void,
  ) {
    res.onAborted(() => this.markClosed());
  }

  onClosed(listener: () => void): void {
    this.closedListeners.push(listener);
  }

  refuse(reply: Reply): void {
    if (this.closed) return;
    this.closed = true;
    this.res.cork(() => {
      this.res.writeStatus(statusLine(reply.status)).writeHeader('content-type', 'application/json');
      for (const [k, v] of Object.entries(reply.headers ?? {})) this.res.writeHeader(k, v);
      this.res.end(typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body ?? ''));
    });
  }

  begin(): void {
    if (this.closed) return;
    this.res.cork(() => {
      this.res.writeHeader('content-type', 'text/event-stream; charset=utf-8');
      this.res.writeHeader('cache-control', 'no-store');
      this.res.writeHeader('x-accel-buffering', 'no');
      this.res.write(': herald admin stream\n\n');
    });
  }

  write(chunk: string): void {
    if (this.closed) return;
    let accepted = true;
    this.res.cork(() => {
      accepted = this.res.write(chunk);
    });
    if (!accepted && !this.behind) {
      this.setBehind(true);
      this.res.onWritable(() => {
        this.setBehind(false);
        return true;
      });
    }
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.res.cork(() => this.res.end());
    } catch {
      // Already gone.
    }
  }

  private setBehind(behind: boolean): void {
    this.behind = behind;
    this.onBehind?.(behind);
  }

  /** uWS calls onAborted once, and never after the response was ended. */
  private markClosed(): void {
    this.closed = true;
    for (const listener of this.closedListeners.splice(0)) listener();
  }
}
