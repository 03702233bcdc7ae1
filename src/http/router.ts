/** The route table: every HTTP route of Herald, registered on the uWS app in one place. */
import type { TemplatedApp } from 'uWebSockets.js';
import { uwsHandler, type Handler, type RouteOptions } from './uws-http.js';

export type Method = 'get' | 'post' | 'put' | 'del' | 'patch' | 'options' | 'any';

export interface Route {
  method: Method;
  /** uWS pattern; `:name` segments become ctx.params.name. */
  pattern: string;
  handler: Handler;
  options: RouteOptions;
}

export function paramNames(pattern: string): string[] {
  return pattern.split('/').filter((s) => s.startsWith(':')).map((s) => s.slice(1));
}

export function registerRoutes(app: TemplatedApp, routes: readonly Route[]): void {
  for (const route of routes) {
    app[route.method](route.pattern, uwsHandler(paramNames(route.pattern), route.handler, route.options));
  }
}
