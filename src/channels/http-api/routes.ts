/** Channel HTTP API routes (C1-C6). */
import type { ServerContext } from '../../server-context.js';
import type { Route } from '../../http/router.js';

export function channelApiRoutes(_ctx: ServerContext): Route[] {
  return [];
}
