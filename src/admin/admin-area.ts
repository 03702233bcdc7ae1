/**
 * The admin area's composition: token check, JSON routes, the live stream and the dashboard
 * page, built only when `admin.token` is set (otherwise none of it exists: 404).
 */
import type { Route } from '../http/router.js';
import { AdminAuth } from './auth.js';
import { adminRoutes, type AdminDeps } from './routes.js';
import { dashboardRoutes } from './static.js';
import { registerAdminStream } from './stream.js';

export interface AdminArea {
  routes: Route[];
  /** Ends the open live streams (shutdown). */
  close(): void;
}

export function createAdminArea(deps: Omit<AdminDeps, 'auth'> & { token: string }): AdminArea {
  const { token, ...rest } = deps;
  const full: AdminDeps = { ...rest, auth: new AdminAuth(token) };
  const streams = registerAdminStream(deps.ctx.app, full);
  return {
    routes: [...adminRoutes(full), ...dashboardRoutes()],
    close: () => streams.closeAll(),
  };
}
