/**
 * The connection request `/app/<key>?protocol=7&client=..&version=..`: which app, or why the
 * connection is refused (sent as pusher:error and as the close code right after open).
 * Checks that depend on live counts (4004) happen at open, not here.
 */
import type { AppConfig } from '../../config/schema.js';
import { CLOSE_CODES } from '../../errors.js';

/** The protocol version Herald speaks. */
export const PROTOCOL_VERSION = 7;

export type Handshake =
  | { ok: true; app: AppConfig }
  | { ok: false; code: number; message: string };

export function parseHandshake(url: string, query: string, appsByKey: ReadonlyMap<string, AppConfig>): Handshake {
  const match = /^\/app\/([^/]+)\/?$/.exec(url);
  if (!match) return { ok: false, code: CLOSE_CODES.PATH_NOT_FOUND, message: 'Path not found: connect to /app/<app key>' };
  const params = new URLSearchParams(query);
  const protocol = params.get('protocol');
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
  if (!app) return { ok: false, code: CLOSE_CODES.UNKNOWN_APP, message: 'App key not in this cluster' };
  if (!app.enabled) return { ok: false, code: CLOSE_CODES.APP_DISABLED, message: 'Application is disabled' };
  return { ok: true, app };
}
