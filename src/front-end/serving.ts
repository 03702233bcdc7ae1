/**
 * What serves the port on one thread (the main thread with one front-end thread, each
 * front-end thread with several): the routes, the HTTP fallback and the WebSocket endpoint on
 * the thread's uWS app, and their drain at shutdown.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { registerRoutes, type Route } from '../http/router.js';
import { inFlight } from '../http/uws-http.js';
import type { MainApp } from '../http/tls.js';
import { CLOSE_CODES } from '../errors.js';
import type { ServerState } from '../server-context.js';
import type { WebSocketEndpoint } from '../channels/ws/endpoint.js';
import type { HttpFallback } from '../channels/http-fallback/endpoint.js';

export interface Serving {
  ws: WebSocketEndpoint;
  fallback: HttpFallback;
}

/** Installs everything on the app, and on each app a TLS certificate reload makes (http/tls.ts); `stream` registers the admin API's live stream. */
export function installServing(main: MainApp, { ws, fallback }: Serving, routes: readonly Route[], state: ServerState, stream?: (app: TemplatedApp) => void): void {
  main.install((target) => {
    fallback.register(target);
    registerRoutes(target, routes, { draining: () => state.draining });
    stream?.(target);
  }, ws.behavior);
}

/**
 * Shutdown: no new connection, every connection closed with 4200, then waits until the requests
 * in flight are answered and the connections' close handlers ran (their leaves started), or
 * `deadline`; the fallback sessions' streams end. Answers what was left at the end.
 */
export async function drainServing(main: MainApp, { ws, fallback }: Serving, deadline: number): Promise<{ inFlight: number; connections: number }> {
  main.closeListener();
  ws.closeAll(CLOSE_CODES.GENERIC_RECONNECT, 'Server shutting down');
  while ((inFlight.count > 0 || ws.connectionCount() > 0) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }
  fallback.close();
  return { inFlight: inFlight.count, connections: ws.connectionCount() };
}
