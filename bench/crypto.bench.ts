/**
 * The signature primitives (src/crypto.ts) beside node:crypto's own per-call objects, the
 * reference they replace, on a channel API string to sign (~150 B) and a 120 B body.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { constantTimeEqual, hmacSha256Hex, md5Hex } from '../src/crypto.js';
import type { MicroSuite } from './micro-suite.js';

const secret = '7ad3773142a6692b25b8';
const toSign =
  'POST\n/apps/app-id/events\nauth_key=278d425bdf160c739803&auth_timestamp=1763780000&auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f';
const body = Buffer.from(JSON.stringify({ name: 'new-message', channel: 'private-chat-room-7', data: JSON.stringify({ message: 'hello world', from: 'user-42' }) }));

export const suite: MicroSuite = {
  source: 'src/crypto.ts',
  setup(bench) {
    const signature = hmacSha256Hex(secret, toSign);
    if (signature !== createHmac('sha256', secret).update(toSign).digest('hex')) throw new Error('hmacSha256Hex disagrees with createHmac');
    const given = `${signature}`;
    bench
      .add('hmacSha256Hex (string to sign, 150 B)', () => {
        hmacSha256Hex(secret, toSign);
      })
      .add('reference: createHmac(...).update().digest("hex")', () => {
        createHmac('sha256', secret).update(toSign, 'utf8').digest('hex');
      })
      .add('md5Hex (120 B body)', () => {
        md5Hex(body);
      })
      .add('reference: createHash("md5").update().digest("hex")', () => {
        createHash('md5').update(body).digest('hex');
      })
      .add('constantTimeEqual (64 hex chars)', () => {
        constantTimeEqual(signature, given);
      })
      .add('reference: Buffer.from ×2 + timingSafeEqual', () => {
        const a = Buffer.from(signature, 'utf8');
        const b = Buffer.from(given, 'utf8');
        return a.length === b.length && timingSafeEqual(a, b);
      });
  },
};
