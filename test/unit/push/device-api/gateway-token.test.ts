import { createECDH } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkGatewayToken } from '../../../../src/push/device-api/gateway-token.js';

const ecdh = createECDH('prime256v1');
ecdh.generateKeys();
const P256DH = ecdh.getPublicKey().toString('base64url');
const AUTH = Buffer.alloc(16, 7).toString('base64url');

function web(subscription: unknown, encoding: BufferEncoding = 'base64'): string {
  return Buffer.from(JSON.stringify(subscription)).toString(encoding);
}

describe('gateway token formats', () => {
  it('APNs: 64 to 200 hex digits, even, stored lower-case', () => {
    const token = 'AB'.repeat(32);
    expect(checkGatewayToken('apns', token)).toEqual({ ok: true, token: token.toLowerCase() });
    expect(checkGatewayToken('apns', 'a'.repeat(200)).ok).toBe(true);
    for (const bad of ['a'.repeat(62), 'a'.repeat(65), 'a'.repeat(202), `${'a'.repeat(63)}g`, `${'a'.repeat(62)} a`]) {
      const result = checkGatewayToken('apns', bad);
      expect(result.ok, bad).toBe(false);
      if (!result.ok) expect(result.reason).toContain('APNs device token');
    }
  });

  it('FCM: printable ASCII without spaces, at most 4096', () => {
    const token = 'dXk3:APA91bH-xyz_123';
    expect(checkGatewayToken('fcm', token)).toEqual({ ok: true, token });
    expect(checkGatewayToken('fcm', 'x'.repeat(4097)).ok).toBe(false);
    expect(checkGatewayToken('fcm', 'two words').ok).toBe(false);
    expect(checkGatewayToken('fcm', 'tab\there').ok).toBe(false);
    expect(checkGatewayToken('fcm', 'é').ok).toBe(false);
  });

  it('web: base64 of a PushSubscription with an https endpoint and RFC 8291 keys', () => {
    const good = { endpoint: 'https://fcm.googleapis.com/fcm/send/abc', expirationTime: null, keys: { p256dh: P256DH, auth: AUTH } };
    expect(checkGatewayToken('web', web(good))).toEqual({ ok: true, token: web(good) });
    expect(checkGatewayToken('web', web(good, 'base64url')).ok).toBe(true);
    const cases: [string, string][] = [
      ['not base64!', 'not base64'],
      [Buffer.from('plain text').toString('base64'), 'JSON'],
      [web([1, 2]), 'endpoint missing'],
      [web({ ...good, endpoint: 'http://push.example.com/x' }), 'https'],
      [web({ ...good, endpoint: 'not a url' }), 'not a URL'],
      [web({ endpoint: good.endpoint }), 'keys missing'],
      [web({ ...good, keys: { auth: AUTH } }), 'p256dh'],
      [web({ ...good, keys: { p256dh: AUTH, auth: AUTH } }), 'p256dh'],
      [web({ ...good, keys: { p256dh: P256DH, auth: 'c2hvcnQ' } }), 'auth'],
      ['A'.repeat(8200), 'longer than'],
    ];
    for (const [token, why] of cases) {
      const result = checkGatewayToken('web', token);
      expect(result.ok, why).toBe(false);
      if (!result.ok) {
        expect(result.reason).toContain('web device token');
        expect(result.reason).toContain(why);
      }
    }
  });
});
