/**
 * The admin endpoints, put together: token check, JSON routes, the live stream and the dashboard
 * page, built only when `admin.token` is set (otherwise none of it exists: 404).
 */
import type { TemplatedApp } from 'uWebSockets.js';
import type { Route } from '../http/router.js';
import { clientAddressResolver } from '../net/client-address.js';
import { AdminAuth } from './auth.js';
import { adminRoutes, type AdminDeps } from './routes.js';
import { dashboardRoutes } from './static.js';
import { adminStreams, type StreamRequest, type StreamSink } from './stream.js';

export interface AdminEndpoints {
  routes: Route[];
  /** Registers the live stream's route on an app (the main one, and each one a TLS reload makes). */
  registerStream(app: TemplatedApp): void;
  /** Opens a live stream whose request a front-end thread read (stream-relay.ts). */
  openStream(request: StreamRequest, sink: StreamSink): void;
  /** Ends the open live streams (shutdown). */
  close(): void;
}

/**
 * Built by the composition root (server.ts), which hands it the debug hub it built and
 * registers the live stream (a streamed response the route table does not serve) on its app.
 */
export function createAdminEndpoints(deps: Omit<AdminDeps, 'auth' | 'clientAddressOf'> & { token: string; trustedProxies: readonly string[] }): AdminEndpoints {
  const { token, trustedProxies, ...rest } = deps;
  const full: AdminDeps = { ...rest, auth: new AdminAuth(token), clientAddressOf: clientAddressResolver(trustedProxies) };
  const streams = adminStreams(full);
  return {
    routes: [...adminRoutes(full), ...dashboardRoutes()],
    registerStream: (app) => streams.register(app),
    openStream: (request, sink) => streams.open(request, sink),
    close: () => streams.closeAll(),
  };
}
