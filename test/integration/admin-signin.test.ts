/**
 * Admin sign-in against the built server from many loopback source addresses (127.0.0.x: any
 * address of 127/8 can be a source on Linux): guessing spread over addresses, each below the
 * per-address limit, meets the global budget (429 with Retry-After, one warning in the log),
 * while an address that signed in before keeps signing in.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { HeraldProcess, startHerald } from '../helpers/herald-process.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'signin-admin-token-0123456789';
let herald: HeraldProcess;

beforeAll(async () => {
  herald = await startHerald({ config: { admin: { token: TOKEN } } });
}, 60_000);

afterAll(async () => {
  await herald?.dispose();
});

/** GET /admin/v1/session from `localAddress` with `token`: status and Retry-After. */
function session(localAddress: string, token: string): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: herald.port, path: '/admin/v1/session', localAddress, agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('admin sign-in from many addresses', () => {
  it('delays everyone past the global budget, warns once, and lets a known address through', async () => {
    // The operator signs in first, from its own address.
    expect((await session('127.0.0.200', TOKEN)).status).toBe(200);
    // 300 guesses from 30 addresses: 10 each, never past the per-address limit on its own.
    const statuses: number[] = [];
    const retryAfters: string[] = [];
    for (let round = 0; round < 10; round++) {
      for (let a = 2; a < 32; a++) {
        const answer = await session(`127.0.0.${a}`, `guess-${round}-${a}`);
        statuses.push(answer.status);
        if (answer.retryAfter) retryAfters.push(answer.retryAfter);
      }
    }
    expect(statuses).toContain(429);
    expect(statuses.filter((s) => s === 401).length).toBeLessThan(60);
    expect(retryAfters.every((v) => Number(v) >= 1)).toBe(true);
    // A new address is delayed too, right token included.
    const newcomer = await session('127.0.0.100', TOKEN);
    expect(newcomer.status).toBe(429);
    expect(Number(newcomer.retryAfter)).toBeGreaterThanOrEqual(1);
    // The operator's address is not.
    expect((await session('127.0.0.200', TOKEN)).status).toBe(200);
    await until(() => herald.stderr.includes('too many failed sign-ins from several addresses'), 'the burst warning');
    expect(herald.stderr.split('too many failed sign-ins from several addresses').length - 1).toBe(1);
    expect(herald.stderr).not.toContain(TOKEN);
  });
});
