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
import { statusLine } from '../http/uws-http.js';
import { adminErrorReply, type AdminDeps } from './routes.js';
import type { DebugMessage } from './debug-hub.js';

/** Interval of `stats` events, ms. */
export const STATS_INTERVAL_MS = 1000;

/** Open streams, so that shutdown can end them. */
export interface StreamRegistry {
  /** Registers the stream route on `app` (the main app, and each app a TLS reload makes: http/tls.ts). */
  register(app: TemplatedApp): void;
  closeAll(): void;
}

export function adminStreams(deps: AdminDeps): StreamRegistry {
  const open = new Set<() => void>();
  const register = (target: TemplatedApp): void => {
    target.get('/admin/v1/stream', (res: HttpResponse, req: HttpRequest) => {
    try {
      startStream(res, req, deps, open);
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
    closeAll: () => {
      for (const close of [...open]) close();
    },
  };
}

/** One stream: checked, its head written, a `stats` event every second, the app's debug events. */
function startStream(res: HttpResponse, req: HttpRequest, deps: AdminDeps, open: Set<() => void>): void {
  // The request is read now: uWS invalidates it when this handler returns.
  const authorization = req.getHeader('authorization');
  const forwardedFor = req.getHeader('x-forwarded-for');
  const appId = new URLSearchParams(req.getQuery() ?? '').get('app');
  const stream = new EventStream(res, open);
  const address = deps.clientAddressOf(Buffer.from(res.getRemoteAddressAsText()).toString(), forwardedFor);
  try {
    deps.auth.check(authorization, address);
    if (deps.ctx.state.draining) throw new HeraldError('NOT_READY');
    if (appId !== null && !deps.ctx.appsById.has(appId)) throw new HeraldError('ADMIN_NOT_FOUND', `No app with id ${appId.slice(0, 200)}`);
  } catch (err) {
    stream.refuse(err);
    return;
  }
  stream.begin();
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
 * The response side of one stream: its refusal or head, its events (optional ones dropped and
 * counted while uWS holds unsent bytes), and its end, by the client (abort) or by shutdown.
 */
class EventStream {
  /** Optional events dropped so far (told in `stats`). */
  dropped = 0;
  timer: NodeJS.Timeout | undefined = undefined;
  unwatch: (() => void) | undefined = undefined;
  private aborted = false;
  private stopped = false;
  /** uWS buffers what the socket does not take at once; while it does, optional events are dropped. */
  private blocked = false;

  constructor(
    private readonly res: HttpResponse,
    private readonly open: Set<() => void>,
  ) {
    res.onAborted(() => {
      this.aborted = true;
      this.stop();
    });
  }

  /** Ends the stream (shutdown); registered in `open` once the stream has begun. */
  readonly close = (): void => {
    this.stop();
    if (this.aborted) return;
    this.aborted = true;
    try {
      this.res.cork(() => this.res.end());
    } catch {
      // Already gone.
    }
  };

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.timer);
    this.unwatch?.();
    this.open.delete(this.close);
  }

  /** Answers the error (the admin API's JSON error) instead of a stream. */
  refuse(err: unknown): void {
    const reply = adminErrorReply(err, '/admin/v1/stream');
    this.res.cork(() => {
      this.res.writeStatus(statusLine(reply.status)).writeHeader('content-type', 'application/json');
      for (const [k, v] of Object.entries(reply.headers ?? {})) this.res.writeHeader(k, v);
      this.res.end(String(reply.body));
    });
  }

  /** The 200 and the event-stream headers, with a first comment line. */
  begin(): void {
    this.res.cork(() => {
      this.res.writeHeader('content-type', 'text/event-stream; charset=utf-8');
      this.res.writeHeader('cache-control', 'no-store');
      this.res.writeHeader('x-accel-buffering', 'no');
      this.res.write(': herald admin stream\n\n');
    });
  }

  /** One server-sent event; an `optional` one is dropped (and counted) while the client is behind. */
  send(event: string, data: unknown, optional: boolean): void {
    if (this.aborted) return;
    if (this.blocked && optional) {
      this.dropped++;
      return;
    }
    const chunk = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
    let accepted = true;
    this.res.cork(() => {
      accepted = this.res.write(chunk);
    });
    if (!accepted && !this.blocked) {
      this.blocked = true;
      this.res.onWritable(() => {
        this.blocked = false;
        return true;
      });
    }
  }
}
