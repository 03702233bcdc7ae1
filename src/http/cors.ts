/**
 * CORS for the APIs browsers call from web pages (the channel HTTP API, the push device and
 * reporting APIs, the catch-all 404): any origin, no credentials, so `*` is enough.
 */
import type { Reply } from './uws-http.js';

/** Added to every answer of a route browsers may call. */
export const CORS_ANY_ORIGIN: Readonly<Record<string, string>> = Object.freeze({ 'access-control-allow-origin': '*' });

/** Seconds a browser may cache a preflight answer. */
export const PREFLIGHT_MAX_AGE_SECONDS = 86_400;

/** The 204 answer to a preflight (OPTIONS): the methods and request headers allowed. */
export function preflightReply(methods: string, allowHeaders: string): Reply {
  return {
    status: 204,
    headers: {
      'access-control-allow-methods': methods,
      'access-control-allow-headers': allowHeaders,
      'access-control-max-age': String(PREFLIGHT_MAX_AGE_SECONDS),
    },
  };
}
