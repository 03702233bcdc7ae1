/**
 * Route registration: puts a list of routes on a uWS app, wrapped with the drain check and the
 * HTTP metrics. The route table itself, every route of Herald in one list, is assembled in
 * server.ts (startHerald) from each area's route module.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { HeraldError } from '../errors.js';
import { describeError, log, logLevelEnabled, RateLimitedLog } from '../log.js';
import { apiOfPattern, recordHttpRequest } from '../metrics/http-metrics.js';
import { uwsHandler, type AnswerObserver, type Handler, type RouteOptions } from './uws-http.js';

export type Method = 'get' | 'post' | 'put' | 'del' | 'patch' | 'options' | 'any';

export interface Route {
  method: Method;
  /** uWS pattern; `:name` segments become ctx.params.name. */
  pattern: string;
  handler: Handler;
  options: RouteOptions;
  /**
   * Answered normally while the server drains (probes: /ready, /health, /metrics). Every other
   * route answers 503 NOT_READY then, on keep-alive connections opened before the drain.
   */
  servedWhileDraining?: boolean;
}

export interface RegisterOptions {
  /** True once shutdown has begun. */
  draining?: () => boolean;
}

export function paramNames(pattern: string): string[] {
  return pattern.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
}

export function registerRoutes(app: TemplatedApp, routes: readonly Route[], opts: RegisterOptions = {}): void {
  const draining = opts.draining;
  for (const route of routes) {
    const handler: Handler =
      draining && !route.servedWhileDraining
        ? (rc) => {
            if (draining()) throw new HeraldError('NOT_READY', 'Server is shutting down: retry on another instance or after the restart');
            return route.handler(rc);
          }
        : route.handler;
    app[route.method](route.pattern, guarded(uwsHandler(paramNames(route.pattern), handler, route.options, answerObserver(route.pattern))));
  }
}

/** 4xx answers at debug level: one line per method, route and status every 10 s, with a count. */
const clientErrorLog = new RateLimitedLog('debug', 10_000);

/** Counts every answer for /metrics and logs 4xx ones at debug level (never bodies or headers). */
function answerObserver(pattern: string): AnswerObserver {
  const api = apiOfPattern(pattern);
  return (rc, reply, startMs) => {
    const status = reply.status;
    recordHttpRequest(api, status, startMs);
    if (status >= 400 && status < 500 && logLevelEnabled('debug')) {
      const code = reply.error?.code ?? '';
      clientErrorLog.write(`${rc.method} ${pattern} ${status} ${code}`, 'http request refused', {
        method: rc.method,
        path: rc.path.slice(0, 200),
        status,
        api,
        ...(reply.error ? { code, reason: reply.error.message.slice(0, 300) } : {}),
      });
    }
  };
}

/**
 * uWS ends the process on any exception thrown out of a request callback. The route helper
 * catches handler failures itself; this is the last guard around it: the failure is logged and
 * the request, when it is not answered yet, gets a bare 500 and its connection closed.
 */
function guarded(callback: (res: HttpResponse, req: HttpRequest) => void): (res: HttpResponse, req: HttpRequest) => void {
  return (res, req) => {
    try {
      callback(res, req);
    } catch (err) {
      log.error('http request callback failed', { error: describeError(err) });
      try {
        res.cork(() => res.writeStatus('500 Internal Server Error').end('', true));
      } catch {
        // Already answered or aborted: uWS refuses the access, nothing more to do.
      }
    }
  };
}
