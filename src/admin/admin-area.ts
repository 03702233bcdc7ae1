/**
 * The admin area's composition: token check, JSON routes, the live stream and the dashboard
 * page, built only when `admin.token` is set (otherwise none of it exists: 404).
 */
import type { TemplatedApp } from 'uWebSockets.js';
import type { Route } from '../http/router.js';
import { AdminAuth } from './auth.js';
import { adminRoutes, type AdminDeps } from './routes.js';
import { dashboardRoutes } from './static.js';
import { registerAdminStream } from './stream.js';

export interface AdminArea {
  routes: Route[];
  /** Registers the live stream's route on the app again (under each TLS server name). */
  registerStream(app: TemplatedApp): void;
  /** Ends the open live streams (shutdown). */
  close(): void;
}

/**
 * Built by the composition root (server.ts), which hands it the uWS app for the live stream
 * (a streamed response the route table does not serve) and the debug hub it built.
 */
export function createAdminArea(deps: Omit<AdminDeps, 'auth'> & { token: string; uws: TemplatedApp }): AdminArea {
  const { token, uws, ...rest } = deps;
  const full: AdminDeps = { ...rest, auth: new AdminAuth(token) };
  const streams = registerAdminStream(uws, full);
  return {
    routes: [...adminRoutes(full), ...dashboardRoutes()],
    registerStream: (app) => streams.register(app),
    close: () => streams.closeAll(),
  };
}
