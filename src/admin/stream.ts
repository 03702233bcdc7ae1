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
import { log } from '../log.js';
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
      log.error('admin stream failed', { error: String((err as Error)?.stack ?? err) });
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

function startStream(res: HttpResponse, req: HttpRequest, deps: AdminDeps, open: Set<() => void>): void {
  const authorization = req.getHeader('authorization');
  const appId = new URLSearchParams(req.getQuery() ?? '').get('app');
  let aborted = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined = undefined;
  let unwatch: (() => void) | undefined = undefined;
  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    unwatch?.();
    open.delete(close);
  };
  const close = (): void => {
    stop();
    if (aborted) return;
    aborted = true;
    try {
      res.cork(() => res.end());
    } catch {
      // Already gone.
    }
  };
  res.onAborted(() => {
    aborted = true;
    stop();
  });
  const address = Buffer.from(res.getRemoteAddressAsText()).toString();
  const refuse = (err: unknown): void => {
    const reply = adminErrorReply(err, '/admin/v1/stream');
    res.cork(() => {
      res.writeStatus(statusLine(reply.status)).writeHeader('content-type', 'application/json');
      for (const [k, v] of Object.entries(reply.headers ?? {})) res.writeHeader(k, v);
      res.end(String(reply.body));
    });
  };
  try {
    deps.auth.check(authorization, address);
    if (deps.ctx.state.draining) throw new HeraldError('NOT_READY');
    if (appId !== null && !deps.ctx.appsById.has(appId)) throw new HeraldError('ADMIN_NOT_FOUND', `No app with id ${appId.slice(0, 200)}`);
  } catch (err) {
    refuse(err);
    return;
  }

  let dropped = 0;
  // uWS buffers what the socket does not take at once; while it does, debug events are dropped.
  let blocked = false;
  const write = (chunk: string, optional: boolean): void => {
    if (aborted) return;
    if (blocked && optional) {
      dropped++;
      return;
    }
    let accepted = true;
    res.cork(() => {
      accepted = res.write(chunk);
    });
    if (!accepted && !blocked) {
      blocked = true;
      res.onWritable(() => {
        blocked = false;
        return true;
      });
    }
  };
  const sse = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

  res.cork(() => {
    res.writeHeader('content-type', 'text/event-stream; charset=utf-8');
    res.writeHeader('cache-control', 'no-store');
    res.writeHeader('x-accel-buffering', 'no');
    res.write(': herald admin stream\n\n');
  });

  const stats = (): void => {
    write(
      sse('stats', {
        t: Date.now(),
        connections: deps.connectionCount(),
        appConnections: appId === null ? undefined : deps.connectionCount(appId),
        messages: deps.hub.messages,
        connectionsOpened: deps.hub.connectionsOpened,
        dropped,
      }),
      false,
    );
  };
  stats();
  timer = setInterval(stats, STATS_INTERVAL_MS);
  unwatch =
    appId === null
      ? undefined
      : deps.hub.watch(appId, (message: DebugMessage) => {
          if (message.type === 'event') write(sse('debug', { t: message.t, ...message.event }), true);
          else write(sse('sampling', { t: message.t, every: message.every, eventsLastSecond: message.eventsLastSecond }), false);
        });
  open.add(close);
}
