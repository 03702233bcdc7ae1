/** Push device-api routes. */
import type { ServerContext } from '../../server-context.js';
import type { Route } from '../../http/router.js';

export function deviceApiRoutes(_ctx: ServerContext): Route[] {
  return [];
}
