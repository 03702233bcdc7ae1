import { describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import { configSchema, type AppConfig } from '../../../../src/config/schema.js';
import { HeraldError } from '../../../../src/errors.js';
import { parseQueryPairs } from '../../../../src/channels/http-api/params.js';
import { authenticateRequest, constantTimeEqual, signRequest, stringToSign } from '../../../../src/channels/http-api/signature.js';

const [app, other] = configSchema.parse({
  apps: [
    { id: 'app-id', key: 'app-key', secret: 'app-secret' },
    { id: 'other-id', key: 'other-key', secret: 'other-secret' },
  ],
}).apps as [AppConfig, AppConfig];
const appsByKey = new Map([app, other].map((a) => [a.key, a]));
/** The SDK's own signer (exported at run time, missing from its typings). */
const SdkToken = (Pusher as unknown as { Token: new (key: string, secret: string) => { sign(data: string): string } }).Token;
const sdk = new Pusher({ appId: app.id, key: app.key, secret: app.secret, host: '127.0.0.1', port: '1', useTLS: false });

/** Authenticates a request whose query string was built by someone else; returns the error code or the app id. */
function check(method: string, path: string, query: string, body = '', nowMs = Date.now(), appId = app.id): string {
  try {
    return authenticateRequest({ method, path, query: parseQueryPairs(query), body: Buffer.from(body), appId }, appsByKey, nowMs).id;
  } catch (err) {
    if (err instanceof HeraldError) return err.code;
    throw err;
  }
}

function describeError(method: string, path: string, query: string, body = ''): HeraldError {
  try {
    authenticateRequest({ method, path, query: parseQueryPairs(query), body: Buffer.from(body), appId: app.id }, appsByKey);
  } catch (err) {
    return err as HeraldError;
  }
  throw new Error('expected an authentication failure');
}

describe('channel API signatures against the pusher SDK', () => {
  it('accepts a GET signed by the SDK, and refuses it once a parameter is changed', () => {
    const path = '/apps/app-id/channels';
    const query = sdk.createSignedQueryString({ method: 'GET', path, params: { filter_by_prefix: 'presence-', info: 'user_count' } });
    expect(query).toContain('filter_by_prefix=presence-');
    expect(check('GET', path, query)).toBe('app-id');
    expect(check('GET', path, query.replace('presence-', 'private-'))).toBe('AUTH_BAD_SIGNATURE');
    expect(check('POST', path, query)).toBe('AUTH_BAD_SIGNATURE');
    expect(check('GET', '/apps/app-id/channels/x', query)).toBe('AUTH_BAD_SIGNATURE');
  });

  it('accepts a POST with a body signed by the SDK and checks body_md5 against the bytes', () => {
    const path = '/apps/app-id/events';
    const body = JSON.stringify({ name: 'ev', data: '{"text":"héllo"}', channels: ['a', 'b'] });
    const query = sdk.createSignedQueryString({ method: 'POST', path, body });
    expect(query).toMatch(/body_md5=[0-9a-f]{32}/);
    expect(check('POST', path, query, body)).toBe('app-id');
    expect(check('POST', path, query, body.replace('a', 'c'))).toBe('AUTH_BAD_BODY_MD5');
    // A body with no body_md5 at all is refused even if the rest is signed.
    const unsignedBody = sdk.createSignedQueryString({ method: 'POST', path });
    expect(check('POST', path, unsignedBody, body)).toBe('AUTH_BAD_BODY_MD5');
  });

  it('computes the same string and signature as the SDK token for sorted, lower-cased, unescaped params', () => {
    const pairs = parseQueryPairs('Info=user_count&auth_version=1.0&auth_key=app-key&auth_timestamp=1700000000&channels[]=b&channels[]=a&auth_signature=x');
    const str = stringToSign('get', '/apps/app-id/channels', pairs);
    expect(str).toBe('GET\n/apps/app-id/channels\nauth_key=app-key&auth_timestamp=1700000000&auth_version=1.0&channels[]=b&channels[]=a&info=user_count');
    expect(signRequest(app.secret, 'get', '/apps/app-id/channels', pairs)).toBe(new SdkToken(app.key, app.secret).sign(str));
  });

  it('signs values unescaped when the client escaped them in the URL (other SDKs do)', () => {
    const ts = Math.floor(Date.now() / 1000);
    const params = `auth_key=app-key&auth_timestamp=${ts}&auth_version=1.0&filter_by_prefix=presence-a b,c`;
    const sig = new SdkToken(app.key, app.secret).sign(`GET\n/apps/app-id/channels\n${params}`);
    const escaped = `auth_key=app-key&auth_timestamp=${ts}&auth_version=1.0&filter_by_prefix=presence-a+b%2Cc&auth_signature=${sig}`;
    expect(check('GET', '/apps/app-id/channels', escaped)).toBe('app-id');
  });

  it('accepts a path the SDK signed before it was escaped on the wire', () => {
    const signedPath = '/apps/app-id/users/jo smith/terminate_connections';
    const query = sdk.createSignedQueryString({ method: 'POST', path: signedPath, body: '{}' });
    expect(check('POST', '/apps/app-id/users/jo%20smith/terminate_connections', query, '{}')).toBe('app-id');
    expect(check('POST', '/apps/app-id/users/jo%20smyth/terminate_connections', query, '{}')).toBe('AUTH_BAD_SIGNATURE');
  });

  it('accepts timestamps up to 600 s either side of server time and no further', () => {
    const path = '/apps/app-id/channels';
    const query = sdk.createSignedQueryString({ method: 'GET', path });
    const signedAt = Number(/auth_timestamp=(\d+)/.exec(query)![1]) * 1000;
    expect(check('GET', path, query, '', signedAt + 600_999)).toBe('app-id');
    expect(check('GET', path, query, '', signedAt - 600_000)).toBe('app-id');
    expect(check('GET', path, query, '', signedAt + 601_000)).toBe('AUTH_STALE_TIMESTAMP');
    expect(check('GET', path, query, '', signedAt - 601_000)).toBe('AUTH_STALE_TIMESTAMP');
  });

  it('refuses missing parameters, unknown keys, a key of another app and other versions', () => {
    const path = '/apps/app-id/channels';
    const query = sdk.createSignedQueryString({ method: 'GET', path });
    expect(check('GET', path, query.replace(/&auth_signature=[0-9a-f]+/, ''))).toBe('AUTH_MISSING_PARAMS');
    expect(check('GET', path, query.replace('auth_key=app-key', 'auth_key=nope'))).toBe('AUTH_UNKNOWN_KEY');
    expect(describeError('GET', path, query.replace('auth_key=app-key', 'auth_key=nope')).message).toBe("no app has key 'nope' (apps[].key)");
    expect(check('GET', '/apps/other-id/channels', query, '', Date.now(), 'other-id')).toBe('AUTH_APP_MISMATCH');
    expect(check('GET', path, query.replace('auth_version=1.0', 'auth_version=2.0'))).toBe('AUTH_BAD_VERSION');
  });

  it('explains a bad signature with the string to sign and never the secret or the right signature', () => {
    const path = '/apps/app-id/channels';
    const query = sdk.createSignedQueryString({ method: 'GET', path, params: { info: 'user_count' } });
    const tampered = query.replace(/auth_signature=[0-9a-f]+/, `auth_signature=${'0'.repeat(64)}`);
    const err = describeError('GET', path, tampered);
    expect(err.code).toBe('AUTH_BAD_SIGNATURE');
    expect(err.message).toMatch(/^Invalid signature: check the secret of app app-id \(apps\[\]\.secret\) in the caller; /);
    const expectedString = stringToSign('GET', path, parseQueryPairs(tampered));
    expect(err.message).toContain(JSON.stringify(expectedString));
    expect(err.message).not.toContain(app.secret);
    expect(err.message).not.toContain(/auth_signature=([0-9a-f]+)/.exec(query)![1]);
  });

  it('reads authentication keys and the method in any case, lower-casing non-ASCII keys as toLowerCase does', () => {
    const path = '/apps/app-id/events';
    const body = '{"name":"ev","data":"{}","channel":"a"}';
    const query = sdk.createSignedQueryString({ method: 'POST', path, body });
    const shouted = query.replace('auth_key=', 'AUTH_KEY=').replace('auth_signature=', 'Auth_Signature=').replace('body_md5=', 'Body_MD5=');
    expect(check('post', path, shouted, body)).toBe('app-id');
    expect(check('Post', path, shouted, body)).toBe('app-id');
    // Signed sorted, sent in another order: sorted again before the check.
    const pairs = query.split('&');
    expect(check('POST', path, [...pairs.slice(2, -1), pairs[1], pairs[0], pairs.at(-1)].join('&'), body)).toBe('app-id');
    expect(check('POST', path, [pairs.at(-1), ...pairs.slice(0, -1).reverse()].join('&'), body)).toBe('app-id');
    for (const method of ['get', 'post', 'put', 'Get', 'dElEtE']) {
      expect(stringToSign(method, '/p', parseQueryPairs('Ä=1&b=2'))).toBe(`${method.toUpperCase()}\n/p\nb=2&ä=1`);
    }
  });

  it('compares equal-length strings only', () => {
    expect(constantTimeEqual('abcd', 'abcd')).toBe(true);
    expect(constantTimeEqual('abcd', 'abce')).toBe(false);
    expect(constantTimeEqual('abcd', 'abcde')).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
  });
});
