/**
 * Channel HTTP API failure paths against the built server: every 401, 403, 413 and 400 with
 * its body, CORS and keep-alive. Requests are signed here with node:crypto (independently of
 * Herald's signature.ts) and sent with fetch, so each can be tampered with precisely.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { Agent, request as httpRequest } from 'node:http';
import Pusher from 'pusher';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';
import type { ChannelsCreds as Creds } from '../helpers/sdk-clients.js';
import { signedQuery, type SignOptions } from '../helpers/signed-request.js';

const MAIN = { id: 'app-id', key: 'app-key', secret: 'app-secret' };
const OTHER = { id: 'other-id', key: 'other-key', secret: 'other-secret' };
const DISABLED = { id: 'off-id', key: 'off-key', secret: 'off-secret', enabled: false };
const QUOTA = { id: 'quota-id', key: 'quota-key', secret: 'quota-secret', messageQuota: 5 };

let herald: HeraldProcess;

/** Sends a request signed as the spec says; values are URL-escaped in the URL, not in the signed string. */
async function signedFetch(creds: Creds, method: 'GET' | 'POST', path: string, opts: SignOptions = {}): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const query = signedQuery(creds, method, path, opts);
  const res = await fetch(`${herald.baseUrl}${path}?${query}`, {
    method,
    ...(opts.body !== undefined ? { body: opts.body, headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

const trigger = (body: unknown, creds: Creds = MAIN) => signedFetch(creds, 'POST', `/apps/${creds.id}/events`, { body: JSON.stringify(body) });
const batch = (body: unknown) => signedFetch(MAIN, 'POST', '/apps/app-id/batch_events', { body: JSON.stringify(body) });

beforeAll(async () => {
  herald = await startHerald({ config: { apps: [MAIN, OTHER, DISABLED, QUOTA] } });
});
afterAll(() => herald.dispose());

describe('channel API authentication (401)', () => {
  it('refuses a bad signature and shows the string that should have been signed', async () => {
    const r = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { params: { filter_by_prefix: 'presence-' }, signature: 'f'.repeat(64) });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe('AUTH_BAD_SIGNATURE');
    expect(r.body.error).toContain('GET\\n/apps/app-id/channels\\nauth_key=app-key&auth_timestamp=');
    expect(r.body.error).toContain('&filter_by_prefix=presence-');
    expect(r.body.error).not.toContain(MAIN.secret);
  });

  it('refuses a request signed with another secret (seen through the pusher SDK)', async () => {
    const sdk = new Pusher({ appId: MAIN.id, key: MAIN.key, secret: 'wrong-secret', host: '127.0.0.1', port: String(herald.port), useTLS: false });
    const err = (await sdk.trigger('news', 'ev', { a: 1 }).catch((e: unknown) => e)) as Pusher.RequestError;
    expect(err).toBeInstanceOf(Pusher.RequestError);
    expect(err.status).toBe(401);
    expect(JSON.parse(err.body!)).toMatchObject({ code: 'AUTH_BAD_SIGNATURE' });
  });

  it('refuses a timestamp more than 600 s away from server time', async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const timestamp of [now - 700, now + 700]) {
      const r = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { timestamp });
      expect(r.status).toBe(401);
      expect(r.body.code).toBe('AUTH_STALE_TIMESTAMP');
      expect(r.body.error).toContain(`auth_timestamp ${timestamp}`);
    }
    // Within the window the request passes authentication and meets the next check (a 400).
    expect((await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { timestamp: now - 500, params: { info: 'user_count' } })).status).toBe(400);
  });

  it('refuses a body_md5 that does not match the body, or a body without one', async () => {
    const body = JSON.stringify({ name: 'ev', data: 'x', channel: 'news' });
    const wrong = await signedFetch(MAIN, 'POST', '/apps/app-id/events', { body, bodyMd5: createHash('md5').update('other').digest('hex') });
    expect(wrong.status).toBe(401);
    expect(wrong.body.code).toBe('AUTH_BAD_BODY_MD5');
    expect(wrong.body.error).toContain(createHash('md5').update(body).digest('hex'));
    const missing = await signedFetch(MAIN, 'POST', '/apps/app-id/events', { body, bodyMd5: null });
    expect(missing.status).toBe(401);
    expect(missing.body.code).toBe('AUTH_BAD_BODY_MD5');
  });

  it('refuses an unknown key, and a key used on another app id', async () => {
    const unknown = await signedFetch({ id: 'app-id', key: 'who', secret: 'x' }, 'GET', '/apps/app-id/channels');
    expect(unknown.status).toBe(401);
    expect(unknown.body).toMatchObject({ code: 'AUTH_UNKNOWN_KEY' });
    const mismatch = await signedFetch({ ...OTHER, id: MAIN.id }, 'GET', '/apps/app-id/channels');
    expect(mismatch.status).toBe(401);
    expect(mismatch.body.code).toBe('AUTH_APP_MISMATCH');
    expect(mismatch.body.error).toContain("'other-key' does not belong to app id 'app-id'");
  });

  it('refuses a request without authentication parameters', async () => {
    const res = await fetch(`${herald.baseUrl}/apps/app-id/channels`);
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'AUTH_MISSING_PARAMS' });
  });
});

describe('channel API 403', () => {
  it('refuses a disabled app, with an explanation', async () => {
    const r = await trigger({ name: 'ev', data: 'x', channel: 'news' }, DISABLED);
    expect(r.status).toBe(403);
    expect(r.body).toEqual({ code: 'APP_DISABLED', error: expect.stringContaining('off-id is disabled') });
    expect((await signedFetch(DISABLED, 'GET', '/apps/off-id/channels')).status).toBe(403);
  });

  it('refuses a trigger that would exceed the daily message quota', async () => {
    const channels = ['a', 'b', 'c', 'd', 'e', 'f'];
    const r = await trigger({ name: 'ev', data: 'x', channels }, QUOTA);
    expect(r.status).toBe(403);
    expect(r.body.code).toBe('APP_OVER_QUOTA');
    expect(r.body.error).toContain('0 of 5 messages used today (UTC), this request needs 6');
    // With info each channel counts two.
    const withInfo = await trigger({ name: 'ev', data: 'x', channels: ['a', 'b', 'c'], info: 'subscription_count' }, QUOTA);
    expect(withInfo.status).toBe(403);
    expect(withInfo.body.error).toContain('this request needs 6');
  });
});

describe('channel API 413', () => {
  it('refuses event data over 10 KB on C1 and in any event of C2', async () => {
    const big = 'x'.repeat(10 * 1024 + 1);
    const c1 = await trigger({ name: 'ev', data: big, channel: 'news' });
    expect(c1.status).toBe(413);
    expect(c1.body).toEqual({ code: 'EVENT_DATA_TOO_LARGE', error: 'data is 10241 bytes; the limit is 10240 bytes' });
    // Bytes, not characters: 5121 two-byte characters are over.
    expect((await trigger({ name: 'ev', data: 'é'.repeat(5121), channel: 'news' })).status).toBe(413);
    const c2 = await batch({ batch: [{ name: 'ev', data: 'ok', channel: 'news' }, { name: 'ev', data: big, channel: 'news' }] });
    expect(c2.status).toBe(413);
    expect(c2.body.error).toBe('batch[1].data is 10241 bytes; the limit is 10240 bytes');
  });

  it('refuses a body over the server-wide request size limit', async () => {
    const r = await trigger({ name: 'ev', data: 'x', channel: 'news', padding: 'p'.repeat(300 * 1024) });
    expect(r.status).toBe(413);
    expect(r.body.code).toBe('BODY_TOO_LARGE');
  });
});

describe('channel API 400', () => {
  const cases: [string, unknown, string, string | RegExp][] = [
    ['invalid channel name', { name: 'ev', data: 'x', channels: ['ok', 'not ok'] }, 'INVALID_CHANNEL_NAME', "channels[1] 'not ok' is not a valid channel name"],
    ['channel name over 200', { name: 'ev', data: 'x', channel: 'c'.repeat(201) }, 'INVALID_CHANNEL_NAME', 'channel '],
    ['more than 100 channels', { name: 'ev', data: 'x', channels: Array.from({ length: 101 }, (_, i) => `c${i}`) }, 'INVALID_PARAMETERS', 'channels may name at most 100 channels'],
    ['no channel', { name: 'ev', data: 'x' }, 'INVALID_PARAMETERS', 'channels (or channel) is required'],
    ['both channel and channels', { name: 'ev', data: 'x', channel: 'a', channels: ['b'] }, 'INVALID_PARAMETERS', 'not both'],
    ['event name over 200', { name: 'n'.repeat(201), data: 'x', channel: 'a' }, 'INVALID_PARAMETERS', 'name must be at most 200 characters'],
    ['missing data', { name: 'ev', channel: 'a' }, 'INVALID_PARAMETERS', 'data is required'],
    ['data not a string', { name: 'ev', data: { a: 1 }, channel: 'a' }, 'INVALID_PARAMETERS', 'data must be a string'],
    ['invalid socket_id', { name: 'ev', data: 'x', channel: 'a', socket_id: 'abc' }, 'INVALID_SOCKET_ID', "socket_id 'abc' is not a socket id"],
    ['unknown info attribute', { name: 'ev', data: 'x', channel: 'a', info: 'user_count,cache' }, 'INVALID_PARAMETERS', "unknown info attribute 'cache'"],
  ];
  it.each(cases)('C1: %s', async (_label, body, code, message) => {
    const r = await trigger(body);
    expect(r.status).toBe(400);
    expect(r.body.code).toBe(code);
    expect(r.body.error).toMatch(message);
  });

  it('C1: a body that is not JSON', async () => {
    const r = await signedFetch(MAIN, 'POST', '/apps/app-id/events', { body: '{"name":' });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe('INVALID_JSON');
  });

  it('C1: parameters in the query string are validated like the body', async () => {
    const r = await signedFetch(MAIN, 'POST', '/apps/app-id/events', { params: { name: 'ev', data: 'x', channels: ['good', 'bad/name'] } });
    expect(r.status).toBe(400);
    expect(r.body).toMatchObject({ code: 'INVALID_CHANNEL_NAME', error: expect.stringContaining("channels[1] 'bad/name'") });
  });

  it('C2: more than 10 events, an empty batch, an event without a channel', async () => {
    const event = { name: 'ev', data: 'x', channel: 'news' };
    const tooMany = await batch({ batch: Array.from({ length: 11 }, () => event) });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body).toEqual({ code: 'INVALID_PARAMETERS', error: 'batch holds 11 events; at most 10 are allowed per request' });
    expect((await batch({ batch: [] })).body.error).toBe('batch must hold at least one event');
    expect((await batch({})).body.error).toBe('batch is required');
    const noChannel = await batch({ batch: [event, { name: 'ev', data: 'x' }] });
    expect(noChannel.status).toBe(400);
    expect(noChannel.body.error).toBe('batch[1].channel is required');
    const badChannel = await batch({ batch: [{ ...event, channel: 'a b' }] });
    expect(badChannel.body).toMatchObject({ code: 'INVALID_CHANNEL_NAME', error: expect.stringContaining("batch[0].channel 'a b'") });
  });

  it('C3: user_count only when limited to presence channels, and only user_count', async () => {
    const noPrefix = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { params: { info: 'user_count' } });
    expect(noPrefix.status).toBe(400);
    expect(noPrefix.body.code).toBe('INFO_NOT_APPLICABLE');
    expect(noPrefix.body.error).toContain('filter_by_prefix=presence-');
    const privatePrefix = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { params: { info: 'user_count', filter_by_prefix: 'private-' } });
    expect(privatePrefix.status).toBe(400);
    const otherAttribute = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { params: { info: 'subscription_count', filter_by_prefix: 'presence-' } });
    expect(otherAttribute.status).toBe(400);
    expect(otherAttribute.body.error).toContain("unknown info attribute 'subscription_count'");
  });

  it('C4: attributes that do not apply to the channel', async () => {
    const get = (channel: string, info: string) => signedFetch(MAIN, 'GET', `/apps/app-id/channels/${channel}`, { params: { info } });
    const userCount = await get('news', 'user_count');
    expect(userCount.status).toBe(400);
    expect(userCount.body).toEqual({ code: 'INFO_NOT_APPLICABLE', error: "user_count is only available for presence channels; 'news' is not one" });
    const subsOnPresence = await get('presence-room', 'subscription_count');
    expect(subsOnPresence.status).toBe(400);
    expect(subsOnPresence.body.error).toContain('not available for presence channels');
    const subsDisabled = await get('news', 'subscription_count');
    expect(subsDisabled.status).toBe(400);
    expect(subsDisabled.body.error).toContain('subscription_count is not enabled for app app-id');
    const cache = await get('news', 'cache');
    expect(cache.status).toBe(400);
    expect(cache.body.error).toContain('cache is only available for cache channels');
    const bad = await signedFetch(MAIN, 'GET', '/apps/app-id/channels/bad%20name');
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_CHANNEL_NAME');
  });

  it('C5: terminate_connections takes no parameters', async () => {
    const r = await signedFetch(MAIN, 'POST', '/apps/app-id/users/u1/terminate_connections', { body: '{"force":true}' });
    expect(r.status).toBe(400);
    expect(r.body.error).toContain('takes no parameters; got force');
  });

  it('C6: users of a non-presence channel', async () => {
    const r = await signedFetch(MAIN, 'GET', '/apps/app-id/channels/private-room/users');
    expect(r.status).toBe(400);
    expect(r.body).toEqual({ code: 'NOT_PRESENCE_CHANNEL', error: "'private-room' is not a presence channel: only presence- channels have users" });
  });
});

describe('channel API transport', () => {
  it('answers a CORS preflight and puts Access-Control-Allow-Origin on answers, errors included', async () => {
    const pre = await fetch(`${herald.baseUrl}/apps/app-id/events`, {
      method: 'OPTIONS',
      headers: { origin: 'https://example.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(pre.status).toBe(204);
    expect(pre.headers.get('access-control-allow-origin')).toBe('*');
    expect(pre.headers.get('access-control-allow-methods')).toContain('POST');
    expect(pre.headers.get('access-control-allow-headers')).toBe('content-type');
    const preGet = await fetch(`${herald.baseUrl}/apps/app-id/channels/news/users`, { method: 'OPTIONS' });
    expect(preGet.status).toBe(204);
    expect(preGet.headers.get('access-control-allow-methods')).toContain('GET');
    const err = await signedFetch(MAIN, 'GET', '/apps/app-id/channels', { signature: '0' });
    expect(err.status).toBe(401);
    expect(err.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('keeps the connection alive between requests', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const reused: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${herald.baseUrl}/apps/app-id/channels`, { agent }, (res) => {
          expect(res.statusCode).toBe(401);
          res.resume();
          res.on('end', () => resolve());
        });
        req.on('error', reject);
        req.end();
        reused.push(req.reusedSocket);
      });
    }
    agent.destroy();
    expect(reused).toEqual([false, true, true]);
  });

  it('answers unknown channel API routes with a JSON 404', async () => {
    const res = await fetch(`${herald.baseUrl}/apps/app-id/nothing`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ code: 'ROUTE_NOT_FOUND' });
  });
});
