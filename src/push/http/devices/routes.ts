/**
 * The device API route table (D1-D15 under /device_api/v1, the web VAPID key) and user
 * deletion (/customer_api/v1 and /user_api/v1). Device routes allow any origin (CORS): the
 * web SDK calls them from the customer's pages.
 */
import type { Method, Route } from '../../../http/router.js';
import { pushRouteOptions } from '../common.js';
import { deviceApiHandlers, type DeviceApiContext } from './handlers.js';
import { pathFallback, pathTemplate } from '../path-fallback.js';

/** Body cap of device routes, bytes: registration and metadata bodies are small. */
export const DEVICE_BODY_LIMIT = 64 * 1024;
/** Body cap of D13, bytes: 5000 interests of 164 characters are about 850 KiB of JSON. */
export const INTEREST_SET_BODY_LIMIT = 1024 * 1024;

const INSTANCE = '/device_api/v1/instances/:instanceId';
const DEVICES = `${INSTANCE}/devices/:platform`;
const DEVICE = `${DEVICES}/:deviceId`;
const INTEREST = `${DEVICE}/interests/:interest`;
const USER_PATHS = ['/customer_api/v1/instances/:instanceId/users/:userId', '/user_api/v1/instances/:instanceId/users/:userId'];

export function deviceApiRoutes(ctx: DeviceApiContext): Route[] {
  const h = deviceApiHandlers(ctx);
  const small = pushRouteOptions({ bodyLimit: Math.min(DEVICE_BODY_LIMIT, ctx.config.maxRequestBodyBytes), bodyTooLarge: 'DEVICE_BODY_TOO_LARGE', cors: true });
  const large = pushRouteOptions({ bodyLimit: INTEREST_SET_BODY_LIMIT, bodyTooLarge: 'DEVICE_BODY_TOO_LARGE', cors: true });
  const none = pushRouteOptions({ bodyLimit: 0, cors: true });

  const deviceRoutes: Route[] = [
    { method: 'post', pattern: DEVICES, handler: h.register, options: small }, // D1, D2, web
    { method: 'get', pattern: DEVICE, handler: h.get, options: none }, // D3, D4
    { method: 'del', pattern: DEVICE, handler: h.remove, options: none }, // D5, D6
    { method: 'put', pattern: `${DEVICE}/metadata`, handler: h.setMetadata, options: small }, // D7, D8
    { method: 'put', pattern: `${DEVICE}/token`, handler: h.setToken, options: small }, // D9
    { method: 'put', pattern: `${DEVICE}/user`, handler: h.setUser, options: none }, // D10, D11
    { method: 'get', pattern: `${DEVICE}/interests`, handler: h.listInterests, options: none }, // D12
    { method: 'put', pattern: `${DEVICE}/interests`, handler: h.replaceInterests, options: large }, // D13
    { method: 'post', pattern: INTEREST, handler: h.addInterest, options: none }, // D14
    { method: 'del', pattern: INTEREST, handler: h.removeInterest, options: none }, // D15
    { method: 'get', pattern: `${INSTANCE}/web-vapid-public-key`, handler: h.vapidPublicKey, options: none },
  ];
  const userOptions = pushRouteOptions({ bodyLimit: 0 });
  const userRoutes: Route[] = USER_PATHS.map((pattern) => ({ method: 'del' as const, pattern, handler: h.deleteUser, options: userOptions }));

  const templatesOf = (routes: Route[]) => {
    const byPattern = new Map<string, Method[]>();
    for (const r of routes) byPattern.set(r.pattern, [...(byPattern.get(r.pattern) ?? []), r.method]);
    return [...byPattern].map(([pattern, methods]) => pathTemplate(pattern, methods));
  };
  return [
    ...deviceRoutes,
    ...userRoutes,
    // Unmatched paths of these prefixes: precise 400s for empty segments, CORS preflights, 404/405.
    { method: 'any', pattern: '/device_api/*', handler: pathFallback(templatesOf(deviceRoutes), { cors: true }), options: none },
    ...['/customer_api/*', '/user_api/*'].map((pattern) => ({
      method: 'any' as const,
      pattern,
      handler: pathFallback(templatesOf(userRoutes), { cors: false }),
      options: userOptions,
    })),
  ];
}
