/**
 * The admin sign-in limit behind a reverse proxy: with the proxy in `trustedProxies` it counts
 * the forwarded client address, so one client past the limit locks only itself (JSON routes,
 * tenant routes and the live stream alike); without it, X-Forwarded-For is ignored and a client
 * cannot dodge the limit by writing a new address into the header.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';

const TOKEN = 'signin-proxy-admin-token-0123456789';
/** Failed sign-ins per address before it is refused (admin/auth.ts MAX_FAILURES, docs/admin-api.md). */
const MAX_FAILURES = 10;
let behindProxy: HeraldProcess;
let direct: HeraldProcess;

beforeAll(async () => {
  [behindProxy, direct] = await Promise.all([
    startHerald({ config: { admin: { token: TOKEN }, trustedProxies: ['127.0.0.1'] } }),
    startHerald({ config: { admin: { token: TOKEN } } }),
  ]);
}, 60_000);

afterAll(async () => {
  await Promise.all([behindProxy?.dispose(), direct?.dispose()]);
});

/** An admin request with `token`, forwarded for `forwardedFor` when given: status and Retry-After (the body is not read). */
async function signIn(herald: HeraldProcess, path: string, token: string, forwardedFor?: string): Promise<{ status: number; retryAfter: string | null }> {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (forwardedFor !== undefined) headers['x-forwarded-for'] = forwardedFor;
  const controller = new AbortController();
  const res = await fetch(`${herald.baseUrl}${path}`, { headers, signal: controller.signal });
  // The live stream stays open when accepted: the status is all this test reads.
  controller.abort();
  return { status: res.status, retryAfter: res.headers.get('retry-after') };
}

describe('admin sign-in limit behind a trusted proxy', () => {
  it('counts the forwarded address: the client past the limit is refused, another client behind the same proxy is not', async () => {
    const attacker = '198.51.100.7';
    const operator = '203.0.113.20';
    for (let i = 0; i < MAX_FAILURES; i++) expect((await signIn(behindProxy, '/admin/v1/session', `guess-${i}`, attacker)).status).toBe(401);
    // The attacker is locked out, the right token included, on every admin route.
    for (const path of ['/admin/v1/session', '/admin/v1/apps', '/admin/v1/stream']) {
      const refused = await signIn(behindProxy, path, TOKEN, attacker);
      expect(refused.status, path).toBe(429);
      expect(Number(refused.retryAfter), path).toBeGreaterThanOrEqual(1);
    }
    // A proxy hop written by the attacker itself is not believed: the nearest untrusted address counts.
    expect((await signIn(behindProxy, '/admin/v1/session', TOKEN, `${operator}, ${attacker}`)).status).toBe(429);
    // The operator behind the same proxy still signs in, and its own failures are its own.
    for (const path of ['/admin/v1/session', '/admin/v1/apps', '/admin/v1/stream']) expect((await signIn(behindProxy, path, TOKEN, operator)).status, path).toBe(200);
    expect((await signIn(behindProxy, '/admin/v1/session', 'typo', operator)).status).toBe(401);
  });
});

describe('admin sign-in limit without trustedProxies', () => {
  it('ignores X-Forwarded-For: a new forwarded address on each try does not escape the limit', async () => {
    for (let i = 0; i < MAX_FAILURES; i++) expect((await signIn(direct, '/admin/v1/session', `guess-${i}`, `198.51.100.${i + 1}`)).status).toBe(401);
    const refused = await signIn(direct, '/admin/v1/session', TOKEN, '198.51.100.99');
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect((await signIn(direct, '/admin/v1/session', TOKEN)).status).toBe(429);
  });
});
