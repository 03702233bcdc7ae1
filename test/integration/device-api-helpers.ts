/**
 * Shared by the device API integration tests: a thin fetch client for the device API paths,
 * gateway tokens of each platform in their real formats, and push error assertions.
 */
import { createECDH, createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { expect } from 'vitest';
import { DEFAULT_PUSH, REPO_ROOT } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';
import { deviceShardFor } from '../../src/shards/hash.js';
import type { HeraldShardApi } from '../../src/shard-api.js';

export type Platform = 'apns' | 'fcm' | 'web';

export interface ApiResponse {
  status: number;
  headers: Headers;
  /** Parsed JSON, or the raw text when the body is not JSON. */
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export const VAPID = JSON.parse(readFileSync(join(REPO_ROOT, 'test/fixtures/vapid.json'), 'utf8')) as { publicKey: string; privateKey: string };

/** A second instance, with web push configured (UUID-shaped, as the official SDK needs). */
export const WEB_INSTANCE = {
  instanceId: '3f2a9c41-7b1e-4d2a-8c5e-9a0b1c2d3e4f',
  secretKey: 'web-instance-secret',
  web: { vapidPublicKey: VAPID.publicKey, vapidPrivateKey: VAPID.privateKey, subject: 'mailto:test@example.com' },
};

export interface RequestOptions {
  body?: unknown;
  /** Raw body bytes or text, sent as is. */
  rawBody?: string | Uint8Array;
  headers?: Record<string, string>;
  /** Leave out the default `content-type: application/json`. */
  noContentType?: boolean;
}

/** fetch against Herald; JSON bodies get `content-type: application/json` unless told otherwise. */
export async function call(baseUrl: string, method: string, path: string, options: RequestOptions = {}): Promise<ApiResponse> {
  const headers: Record<string, string> = { ...(options.headers ?? {}) };
  let body: string | Uint8Array | undefined;
  if (options.rawBody !== undefined) body = options.rawBody;
  else if (options.body !== undefined) body = JSON.stringify(options.body);
  if (!options.noContentType && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) {
    headers['content-type'] = 'application/json';
  }
  const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text === '' ? '' : JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: res.status, headers: res.headers, body: parsed };
}

/** Paths of one instance's device API. */
export class DeviceApi {
  constructor(
    readonly baseUrl: string,
    readonly instanceId: string,
  ) {}

  get prefix(): string {
    return `/device_api/v1/instances/${this.instanceId}/devices`;
  }

  call(method: string, path: string, options?: RequestOptions): Promise<ApiResponse> {
    return call(this.baseUrl, method, `${this.prefix}${path}`, options);
  }

  register(platform: Platform, body: unknown, options: RequestOptions = {}): Promise<ApiResponse> {
    return this.call('POST', `/${platform}`, { ...options, body });
  }

  /** Registers a device and returns its id (asserts 200). */
  async registerOk(platform: Platform, token: string, extra: Record<string, unknown> = {}): Promise<string> {
    const res = await this.register(platform, { token, ...(platform === 'apns' ? { bundleIdentifier: 'com.example.app' } : {}), ...extra });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.id as string;
  }

  get(platform: Platform, id: string, options?: RequestOptions) {
    return this.call('GET', `/${platform}/${id}`, options);
  }
  remove(platform: Platform, id: string) {
    return this.call('DELETE', `/${platform}/${id}`, { noContentType: true });
  }
  setMetadata(platform: Platform, id: string, metadata: unknown, options: RequestOptions = {}) {
    return this.call('PUT', `/${platform}/${id}/metadata`, { ...options, body: metadata });
  }
  setToken(platform: Platform, id: string, body: unknown, options: RequestOptions = {}) {
    return this.call('PUT', `/${platform}/${id}/token`, { ...options, body });
  }
  setUser(platform: Platform, id: string, jwt: string | undefined, options: RequestOptions = {}) {
    const headers = { ...(options.headers ?? {}), ...(jwt !== undefined ? { authorization: `Bearer ${jwt}` } : {}) };
    return this.call('PUT', `/${platform}/${id}/user`, { ...options, headers });
  }
  listInterests(platform: Platform, id: string, query = '') {
    return this.call('GET', `/${platform}/${id}/interests${query}`, { noContentType: true });
  }
  replaceInterests(platform: Platform, id: string, interests: unknown, options: RequestOptions = {}) {
    return this.call('PUT', `/${platform}/${id}/interests`, { ...options, body: { interests } });
  }
  addInterest(platform: Platform, id: string, interest: string) {
    return this.call('POST', `/${platform}/${id}/interests/${encodeURIComponent(interest)}`, { noContentType: true });
  }
  removeInterest(platform: Platform, id: string, interest: string) {
    return this.call('DELETE', `/${platform}/${id}/interests/${encodeURIComponent(interest)}`, { noContentType: true });
  }

  /** Every interest of a device, following nextCursor pages of `limit`. */
  async allInterests(platform: Platform, id: string, limit = 100): Promise<string[]> {
    const all: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10_000; page++) {
      const query = `?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const res = await this.listInterests(platform, id, query);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      all.push(...(res.body.interests as string[]));
      cursor = res.body.responseMetadata?.nextCursor;
      if (!cursor) return all;
    }
    throw new Error('too many pages');
  }
}

/** A distinct APNs token (64 hex digits) per seed. */
export function apnsToken(seed: string | number): string {
  return Buffer.from(`apns-token-${seed}`.padEnd(32, '.').slice(0, 32)).toString('hex');
}

/** A distinct FCM-looking registration token per seed. */
export function fcmToken(seed: string | number): string {
  return `fcm:${Buffer.from(`registration-${seed}`).toString('base64url')}_APA91b`;
}

const webKey = createECDH('prime256v1');
webKey.generateKeys();

/** A web token: base64 of a PushSubscription JSON with a real P-256 key, distinct per seed. */
export function webToken(seed: string | number, overrides: Record<string, unknown> = {}): string {
  const subscription = {
    endpoint: `https://push.example.com/send/${seed}`,
    expirationTime: null,
    keys: { p256dh: webKey.getPublicKey().toString('base64url'), auth: createHash('sha256').update(String(seed)).digest().subarray(0, 16).toString('base64url') },
    ...overrides,
  };
  return Buffer.from(JSON.stringify(subscription)).toString('base64');
}

/** A token of `platform` for `seed`. */
export function tokenFor(platform: Platform, seed: string | number): string {
  return platform === 'apns' ? apnsToken(seed) : platform === 'fcm' ? fcmToken(seed) : webToken(seed);
}

/** Asserts a push error: status, `{error, description}` shape, and words the description must contain. */
export function expectPushError(res: ApiResponse, status: number, ...words: (string | RegExp)[]): void {
  const detail = `${res.status} ${JSON.stringify(res.body)}`;
  expect(res.status, detail).toBe(status);
  expect(typeof res.body, detail).toBe('object');
  expect(Object.keys(res.body).sort(), detail).toEqual(['description', 'error']);
  expect(typeof res.body.error, detail).toBe('string');
  expect(typeof res.body.description, detail).toBe('string');
  for (const word of words) {
    if (typeof word === 'string') expect(res.body.description.toLowerCase(), detail).toContain(word.toLowerCase());
    else expect(res.body.description, detail).toMatch(word);
  }
}

/** Push domain Herald uses by default (and the official SDK hard-codes in the issuer). */
export const PUSH_DOMAIN = 'pushnotifications.pusher.com';

/**
 * A user token like the official SDK's generateToken, with claims that can be left out
 * (`undefined`) or replaced, for the D10/D11 error rows.
 */
export async function userToken(
  secret: string,
  instanceId: string,
  claims: { sub?: unknown; exp?: unknown; iss?: unknown } = {},
  alg = 'HS256',
): Promise<string> {
  const payload: Record<string, unknown> = {
    sub: 'user-1',
    exp: Math.floor(Date.now() / 1000) + 3600,
    iss: `https://${instanceId}.${PUSH_DOMAIN}`,
  };
  for (const [k, v] of Object.entries(claims)) {
    if (v === undefined) delete payload[k];
    else payload[k] = v;
  }
  return new SignJWT(payload).setProtectedHeader({ alg, typ: 'JWT' }).sign(new TextEncoder().encode(secret));
}

/**
 * Runs the debug-only shard request `device.checkConsistency` on every shard of a STOPPED
 * server's data dir: starts the built shard workers (dist) on that dir, asks each to cross-check
 * its device records against the interest and user indexes, and closes them. Returns every
 * problem found (empty means consistent).
 */
export async function checkShardConsistency(dataDir: string): Promise<string[]> {
  const dist = (path: string) => pathToFileURL(join(REPO_ROOT, 'dist/src', path)).href;
  const { ShardPool } = (await import(dist('shards/pool.js'))) as typeof import('../../src/shards/pool.js');
  const { parseConfig } = (await import(dist('config/load.js'))) as typeof import('../../src/config/load.js');
  const identity = JSON.parse(readFileSync(join(dataDir, 'herald.json'), 'utf8')) as { shards: number; installSecret: string };
  const config = parseConfig({ dataDir, shards: identity.shards });
  const pool = new ShardPool<HeraldShardApi>({
    workerFile: join(REPO_ROOT, 'dist/src/shard-worker.js'),
    shardCount: identity.shards,
    dataDir,
    config,
    installSecret: identity.installSecret,
    requestTimeoutMs: 30_000,
    testHooks: true,
  });
  try {
    const answers = await pool.broadcast({ type: 'device.checkConsistency' });
    return answers.flatMap((a, shard) => a.problems.map((p) => `shard ${shard}: ${p}`));
  } finally {
    await pool.close();
  }
}

/**
 * Resolves once every write that shards `wanted` (or all `shardCount`) of the node at `baseUrl`
 * issued so far is on disk, so a kill -9 or a crash after it loses none: a device registration
 * is answered 200 once committed and a shard commits in order, so an acknowledged registration
 * on a shard comes after that shard's earlier writes (its webhook outbox, its channels).
 */
export async function committedOnShards(baseUrl: string, shardCount: number, wanted: readonly number[] | 'all', tag: string): Promise<void> {
  const api = new DeviceApi(baseUrl, DEFAULT_PUSH.instanceId);
  const needed = new Set(wanted === 'all' ? Array.from({ length: shardCount }, (_, i) => i) : wanted);
  const seen = new Set<number>();
  let n = 0;
  await until(
    async () => {
      const shard = deviceShardFor(await api.registerOk('fcm', tokenFor('fcm', `${tag}-${n++}`)), shardCount);
      if (needed.has(shard)) seen.add(shard);
      return seen.size === needed.size;
    },
    () => `an acknowledged write on shards ${[...needed].join(', ')} (so far on: ${[...seen].join(', ')})`,
  );
}
