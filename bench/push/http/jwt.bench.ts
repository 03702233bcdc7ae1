/** Beams user-token verification (src/push/jwt.ts): jose HS256 with the algorithm pinned. */
import { SignJWT, jwtVerify } from 'jose';
import { expectedIssuer, verifyUserToken } from '../../../src/push/http/jwt.js';
import type { MicroSuite } from '../../micro-suite.js';

const instanceId = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const secretKey = 'push-secret-key-of-a-realistic-length-0123456789';
const issuer = expectedIssuer(instanceId, 'pushnotifications.pusher.com');

export const suite: MicroSuite = {
  source: 'src/push/http/jwt.ts',
  async setup(bench) {
    const key = new TextEncoder().encode(secretKey);
    const token = await new SignJWT({})
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setSubject('user-42')
      .setIssuer(issuer)
      .setExpirationTime('1h')
      .sign(key);
    bench.add('verifyUserToken (HS256 pinned, claims checked)', async () => {
      await verifyUserToken(token, secretKey, issuer);
    });
    bench.add('jose jwtVerify alone (HS256 pinned)', async () => {
      await jwtVerify(token, key, { algorithms: ['HS256'] });
    });
  },
};
