/**
 * Request checks every push API (device, publish, reporting) shares, on the main thread:
 * instance lookup, Content-Type, JSON object bodies, the secret-key Bearer check and route
 * option presets. Each throws a HeraldError from the catalogue, answered with the push error
 * body `{"error", "description"}` by routes built with pushRouteOptions().
 */
import type { PushInstanceConfig } from '../../config/schema.js';
import { secretEquals } from '../../crypto.js';
import { HeraldError, type ErrorCode } from '../../errors.js';
import { CORS_ANY_ORIGIN, preflightReply } from '../../http/cors.js';
import type { Reply, RouteOptions } from '../../http/uws-http.js';
import { decodeJsonObject } from '../../json.js';
import type { ServerContext } from '../../server-context.js';
import { graceSecret } from '../../config/secret-grace.js';

/** Instance ids are UUID-shaped (8-4-4-4-12 hex digits, either case). */
const INSTANCE_ID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** True when `id` has the UUID shape of an instance id. */
export function isValidInstanceId(id: string): boolean {
  return INSTANCE_ID.test(id);
}

/**
 * The configured instance named by a path segment: 400 INSTANCE_ID_MISSING when empty, 400
 * INSTANCE_ID_INVALID when not UUID-shaped, 404 INSTANCE_NOT_FOUND when not configured.
 */
export function requireInstance(ctx: Pick<ServerContext, 'pushInstances'>, instanceId: string | undefined): PushInstanceConfig {
  if (!instanceId) throw new HeraldError('INSTANCE_ID_MISSING');
  if (!isValidInstanceId(instanceId)) {
    throw new HeraldError('INSTANCE_ID_INVALID', `Instance id ${quote(instanceId)} is not valid: it must be a UUID`);
  }
  const instance = ctx.pushInstances.get(instanceId);
  if (!instance) throw new HeraldError('INSTANCE_NOT_FOUND', `Could not find the instance ${instanceId}`);
  if (!instance.enabled) {
    throw new HeraldError(
      'INSTANCE_DISABLED',
      `Push instance ${instanceId} is disabled; enable it (enabled: true in push[] of the config file for an instance defined there; the admin API or the dashboard's Push instances page for one created there)`,
    );
  }
  return instance;
}

/**
 * Requires `Content-Type: application/json` (parameters such as charset allowed). With
 * `allowMissing`, a request without the header passes: official SDKs send none on requests
 * without a body (the Android and web SDKs' user association, for example).
 */
export function requireJsonContentType(headers: Readonly<Record<string, string>>, options: { allowMissing?: boolean } = {}): void {
  const value = headers['content-type'];
  if (value === undefined || value.trim() === '') {
    if (options.allowMissing) return;
    throw new HeraldError('INVALID_CONTENT_TYPE', 'Content-Type header missing: it must be application/json');
  }
  const mediaType = value.split(';', 1)[0]!.trim().toLowerCase();
  if (mediaType !== 'application/json') {
    throw new HeraldError('INVALID_CONTENT_TYPE', `Content-Type must be application/json, got ${quote(value)}`);
  }
}

/** Parses a body that must be a JSON object; 400 INVALID_JSON (saying why) otherwise, including invalid UTF-8. */
export function parseJsonObject(body: Uint8Array): Record<string, unknown> {
  if (body.byteLength === 0) throw new HeraldError('INVALID_JSON', 'Request body is empty: it must be a JSON object');
  const read = decodeJsonObject(body);
  if (read.ok) return read.value;
  if (read.why === 'utf8') throw new HeraldError('INVALID_JSON', 'Request body is not valid UTF-8, so not a readable JSON object');
  if (read.why === 'syntax') throw new HeraldError('INVALID_JSON', `Request body is not readable JSON: ${read.message}`);
  const value = read.value;
  throw new HeraldError('INVALID_JSON', `Request body must be a JSON object, got ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}`);
}

/** What an `Authorization` header holds: nothing, a Bearer token, or some other scheme. */
export type AuthorizationHeader = { kind: 'missing' } | { kind: 'bearer'; token: string } | { kind: 'other' };

/** Reads `Authorization: Bearer <token>`; an empty header or a Bearer without a token counts as missing. */
export function readAuthorization(headers: Readonly<Record<string, string>>): AuthorizationHeader {
  const value = headers['authorization']?.trim();
  if (!value) return { kind: 'missing' };
  const match = /^Bearer(?:\s+(.*))?$/i.exec(value);
  if (!match) return { kind: 'other' };
  const token = match[1]?.trim();
  return token ? { kind: 'bearer', token } : { kind: 'missing' };
}

/**
 * The instance secret key as `Authorization: Bearer <secret key>`: 400 SECRET_KEY_MISSING
 * without the header, 401 SECRET_KEY_INVALID when it differs. The comparison is constant time
 * over SHA-256 digests, so neither content nor length leaks through timing.
 */
export function requireSecretKey(headers: Readonly<Record<string, string>>, instance: PushInstanceConfig): void {
  const auth = readAuthorization(headers);
  if (auth.kind === 'missing') {
    throw new HeraldError('SECRET_KEY_MISSING', 'Authorization header missing: send Authorization: Bearer <secret key>');
  }
  if (auth.kind !== 'bearer' || !instanceSecretEquals(auth.token, instance)) {
    throw new HeraldError('SECRET_KEY_INVALID', 'Incorrect secret key in the Authorization header');
  }
}

export { secretEquals };

/** Answer to a CORS preflight (OPTIONS) on a push API path (the web SDK calls from the customer's origin). */
export function corsPreflightReply(): Reply {
  return preflightReply('GET, POST, PUT, DELETE, OPTIONS', 'Content-Type, Authorization, X-Pusher-Library');
}

/** Route options for a push API route: push error bodies, a body cap (bytes), optional CORS. */
export function pushRouteOptions(options: { bodyLimit: number; bodyTooLarge?: ErrorCode; cors?: boolean }): RouteOptions {
  return {
    errorStyle: 'push',
    bodyLimit: options.bodyLimit,
    ...(options.bodyTooLarge ? { bodyTooLarge: options.bodyTooLarge } : {}),
    ...(options.cors ? { extraHeaders: { ...CORS_ANY_ORIGIN } } : {}),
  };
}

/** A 200 with a JSON body (`{}` when none is given: every SDK parses it). */
export function okReply(body: object = {}): Reply {
  return { status: 200, body };
}

/** A value for an error description: JSON-quoted and cut to 100 characters, so a huge or odd input cannot bloat or break the message. */
export function quote(value: unknown): string {
  const text = typeof value === 'string' ? value : String(value);
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
}

/** True when `token` is the instance's secret key, or its previous one while a rotation's grace period lasts (constant time). */
export function instanceSecretEquals(token: string, instance: PushInstanceConfig): boolean {
  const previous = graceSecret(instance);
  // Both compared every time, so the timing does not tell which one matched.
  const current = secretEquals(token, instance.secretKey);
  const old = previous !== undefined && secretEquals(token, previous);
  return current || old;
}
