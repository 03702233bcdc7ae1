import { describe, expect, it } from 'vitest';
import { SignJWT } from 'jose';
import PushNotifications from '@pusher/push-notifications-server';
import { HeraldError } from '../../../../src/errors.js';
import { acceptedIssuers, expectedIssuer, verifyUserToken } from '../../../../src/push/http/jwt.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const SECRET = 'push-secret';
const ISSUER = expectedIssuer(INSTANCE, 'pushnotifications.pusher.com');

function sign(payload: Record<string, unknown>, secret = SECRET, alg = 'HS256'): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg }).sign(new TextEncoder().encode(secret));
}
const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

async function failure(token: string, issuer: string | string[] = ISSUER): Promise<{ code: string; status: number; message: string }> {
  try {
    await verifyUserToken(token, SECRET, issuer);
  } catch (err) {
    if (err instanceof HeraldError) return { code: err.code, status: err.status, message: err.message };
    throw err;
  }
  throw new Error('token was accepted');
}

describe('user tokens', () => {
  it('accepts what the official server SDK generateToken issues', async () => {
    const sdk = new PushNotifications({ instanceId: INSTANCE, secretKey: SECRET });
    await expect(verifyUserToken(sdk.generateToken('user-7').token, SECRET, ISSUER)).resolves.toBe('user-7');
  });

  it('accepts the official SDK generateToken with a pushDomain of its own (the SDK always writes pushnotifications.pusher.com)', async () => {
    const sdk = new PushNotifications({ instanceId: INSTANCE, secretKey: SECRET, endpoint: 'push.example.com' });
    const issuers = acceptedIssuers(INSTANCE, 'push.example.com');
    await expect(verifyUserToken(sdk.generateToken('user-8').token, SECRET, issuers)).resolves.toBe('user-8');
    const own = await sign({ sub: 'u', exp: inAnHour(), iss: `https://${INSTANCE}.push.example.com` });
    await expect(verifyUserToken(own, SECRET, issuers)).resolves.toBe('u');
    // Another instance's issuer stays refused, and the message names both accepted ones.
    const other = await sign({ sub: 'u', exp: inAnHour(), iss: 'https://00000000-0000-4000-8000-000000000000.pushnotifications.pusher.com' });
    expect(await failure(other, issuers)).toMatchObject({ code: 'USER_TOKEN_ISSUER_INVALID', message: expect.stringContaining('push.example.com or https://') });
  });

  it('says which claim is missing or wrong', async () => {
    expect(await failure(await sign({ sub: 'u', iss: ISSUER }))).toMatchObject({ status: 400, message: expect.stringContaining('exp') });
    expect(await failure(await sign({ exp: inAnHour(), iss: ISSUER }))).toMatchObject({ status: 400, message: expect.stringContaining('sub') });
    expect(await failure(await sign({ sub: 'u', exp: inAnHour() }))).toMatchObject({ status: 400, message: expect.stringContaining('iss') });
    expect(await failure(await sign({ sub: 'x'.repeat(165), exp: inAnHour(), iss: ISSUER }))).toMatchObject({ code: 'USER_TOKEN_SUB_INVALID', message: expect.stringContaining('165') });
    expect(await failure(await sign({ sub: 42, exp: inAnHour(), iss: ISSUER }))).toMatchObject({ code: 'USER_TOKEN_SUB_INVALID', message: expect.stringContaining('string') });
    expect(await failure(await sign({ sub: '\ud800', exp: inAnHour(), iss: ISSUER }))).toMatchObject({ code: 'USER_TOKEN_SUB_INVALID' });
    expect(await failure(await sign({ sub: 'u', exp: inAnHour(), iss: 'https://other' }))).toMatchObject({ status: 403, message: expect.stringContaining(ISSUER) });
    expect((await verifyUserToken(await sign({ sub: 'x'.repeat(164), exp: inAnHour(), iss: ISSUER }), SECRET, ISSUER)).length).toBe(164);
  });

  it('refuses bad signatures, other algorithms, expired and non-JWT tokens with 401, never mentioning device tokens', async () => {
    const good = { sub: 'u', exp: inAnHour(), iss: ISSUER };
    const cases: [string, string][] = [
      [await sign(good, 'wrong-secret'), 'signature'],
      [await sign(good, SECRET, 'HS384'), 'HS256'],
      [await sign({ ...good, exp: Math.floor(Date.now() / 1000) - 5 }), 'malformed: expired (exp is in the past): have your auth endpoint issue a new one with the server SDK\'s generateToken(userId)'],
      [await sign({ ...good, exp: 'tomorrow' }), 'exp'],
      [await sign({ ...good, nbf: inAnHour() }), 'nbf'],
      ['a.b', 'not a valid JWT'],
      ['', 'not a valid JWT'],
    ];
    for (const [token, why] of cases) {
      const f = await failure(token);
      expect(f, why).toMatchObject({ code: 'USER_TOKEN_MALFORMED', status: 401 });
      expect(f.message, why).toContain(why);
      expect(f.message.toLowerCase()).not.toContain('device token');
    }
  });
});
