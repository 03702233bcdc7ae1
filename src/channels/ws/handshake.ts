/**
 * The connection request `/app/<key>?protocol=7&client=..&version=..`: which app, or why the
 * connection is refused (sent as pusher:error and as the close code right after open).
 * Checks that depend on live counts (4004) happen at open, not here.
 */
import type { AppConfig } from '../../config/schema.js';
import { CLOSE_CODES } from '../../errors.js';
import { logUnknownAppKey } from '../unknown-key-log.js';

/** The protocol version Herald speaks. */
export const PROTOCOL_VERSION = 7;

export type Handshake =
  | { ok: true; app: AppConfig }
  | { ok: false; code: number; message: string };

export function parseHandshake(url: string, query: string, appsByKey: ReadonlyMap<string, AppConfig>): Handshake {
  const match = /^\/app\/([^/]+)\/?$/.exec(url);
  if (!match) return { ok: false, code: CLOSE_CODES.PATH_NOT_FOUND, message: 'Path not found: connect to /app/<app key>' };
  const protocol = queryParam(query, 'protocol');
  if (protocol === null || protocol === '') {
    return { ok: false, code: CLOSE_CODES.NO_PROTOCOL_VERSION, message: 'No protocol version: add ?protocol=7' };
  }
  if (!/^\d{1,6}$/.test(protocol)) {
    return { ok: false, code: CLOSE_CODES.INVALID_VERSION_FORMAT, message: `Invalid protocol version format '${protocol.slice(0, 20)}'` };
  }
  if (Number(protocol) !== PROTOCOL_VERSION) {
    return { ok: false, code: CLOSE_CODES.UNSUPPORTED_PROTOCOL, message: `Unsupported protocol version ${protocol}; Herald speaks ${PROTOCOL_VERSION}` };
  }
  let key: string;
  try {
    key = decodeURIComponent(match[1]!);
  } catch {
    key = match[1]!;
  }
  const app = appsByKey.get(key);
  if (!app) {
    logUnknownAppKey(key, 'websocket');
    return { ok: false, code: CLOSE_CODES.UNKNOWN_APP, message: `no app has key '${key.slice(0, 100)}' (apps[].key)` };
  }
  if (!app.enabled) return { ok: false, code: CLOSE_CODES.APP_DISABLED, message: 'Application is disabled' };
  return { ok: true, app };
}

/**
 * The first value of `name` in a query string, as `new URLSearchParams(query).get(name)` reads
 * it, or null. A query with no `%` or `+` (what clients send) needs no decoding and is split by
 * hand: a connect does not build a URLSearchParams (~2 µs); any other goes through it.
 */
export function queryParam(query: string, name: string): string | null {
  if (query.includes('%') || query.includes('+')) return new URLSearchParams(query).get(name);
  let start = query.startsWith('?') ? 1 : 0;
  while (start < query.length) {
    let end = query.indexOf('&', start);
    if (end < 0) end = query.length;
    let eq = query.indexOf('=', start);
    if (eq < 0 || eq > end) eq = end;
    if (eq - start === name.length && query.startsWith(name, start)) return query.slice(Math.min(eq + 1, end), end);
    start = end + 1;
  }
  return null;
}
