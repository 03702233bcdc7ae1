/**
 * What the admin API takes beyond the config schema: credentials are key material only (PEM
 * text, the service-account JSON, VAPID keys), validated as such; a file path field (`*File`:
 * `privateKeyFile`, `serviceAccountFile`, `caFile`) is refused, since through the network it
 * would read any file the server can. File paths belong to the config file. No message here
 * quotes a value it was given.
 */
import { checkKeyMaterial } from '../config/key-material.js';
import type { PushInstanceConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';
import { isObject } from '../json.js';

/** Field names that name a file on the server. */
const FILE_FIELD = /File$/;

/** Nesting searched for file fields; the schema's deepest is `push[].fcm.caFile`, a body deeper is refused by the schema anyway. */
const MAX_DEPTH = 8;

/**
 * 422 naming the first `*File` field anywhere in `body` (`where`: `push[]` or `apps[]`) that
 * names something: `null` (as listings show an unset `caFile`) names no file and passes.
 */
export function refuseFilePaths(body: Record<string, unknown>, where: string): void {
  const field = fileField(body, where, 0);
  if (field !== undefined) {
    throw new HeraldError(
      'ADMIN_INVALID_TENANT',
      `invalid ${field}: file paths are not accepted through the admin API; give the key material itself (PEM text, the service-account JSON as serviceAccount, VAPID keys) or name the file in the config file`,
    );
  }
}

function fileField(value: unknown, at: string, depth: number): string | undefined {
  if (depth > MAX_DEPTH) return undefined;
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = fileField(item, `${at}[]`, depth + 1);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  if (!isObject(value)) return undefined;
  for (const [name, child] of Object.entries(value)) {
    if (FILE_FIELD.test(name) && child !== null && child !== undefined) return `${at}.${name}`;
    const found = fileField(child, `${at}.${name}`, depth + 1);
    if (found !== undefined) return found;
  }
  return undefined;
}

/**
 * A stored push instance as the base of a change: the fields that named a key file are
 * dropped (the key text they gave is kept), so the merged body is validated as key material.
 */
export function withoutKeyFiles(config: PushInstanceConfig): PushInstanceConfig {
  const { apns, fcm } = config;
  const next = { ...config };
  if (apns) {
    const { privateKeyFile: _file, ...rest } = apns;
    next.apns = rest;
  }
  if (fcm) {
    const { serviceAccountFile: _file, ...rest } = fcm;
    next.fcm = rest;
  }
  return next;
}

/**
 * 422 for unusable key material of a push instance the API takes (the same checks as the
 * config file's): a key that is not a PEM private key of the right kind, VAPID keys that are
 * not a pair, a non-https gateway URL. `body` is what the request gave, to name the field it used.
 */
export function checkPushKeyMaterial(config: PushInstanceConfig, body: Record<string, unknown>): void {
  checkKeyMaterial(
    { push: [config] },
    (field, message) => {
      let named = field.replace(/^push\.0\./, 'push[].');
      const fcm = body.fcm;
      if (named === 'push[].fcm.privateKey' && isObject(fcm) && fcm.privateKey === undefined && fcm.serviceAccount !== undefined) named = 'push[].fcm.serviceAccount';
      throw new HeraldError('ADMIN_INVALID_TENANT', `invalid ${named}: ${message}`);
    },
    'api',
  );
}
