import { createECDH } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkGatewayToken } from '../../../../../src/push/http/devices/gateway-token.js';

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

  it('web: refuses endpoints on loopback, private, link-local or unspecified addresses and localhost names, unless allowed', () => {
    const keys = { p256dh: P256DH, auth: AUTH };
    const refused = [
      'https://127.0.0.1:8443/push/x', 'https://127.8.9.10/x', 'https://localhost/x', 'https://LOCALHOST./x', 'https://push.localhost/x',
      'https://10.1.2.3/x', 'https://172.16.0.1/x', 'https://172.31.255.255/x', 'https://192.168.1.1/x',
      'https://169.254.169.254/latest/meta-data', 'https://0.0.0.0/x', 'https://[::1]/x', 'https://[::]/x',
      'https://[fe80::1]/x', 'https://[fc00::1]/x', 'https://[fd12:3456::1]/x', 'https://[::ffff:127.0.0.1]/x', 'https://[::ffff:10.0.0.1]/x',
      // Numeric forms the URL parser normalises to 127.0.0.1.
      'https://2130706433/x', 'https://0x7f.1/x', 'https://127.1/x',
      // CGNAT, benchmarking, NAT64, 6to4, site-local, IPv4-translated, multicast, broadcast, documentation.
      'https://100.64.0.1/x', 'https://198.18.0.1/x', 'https://[64:ff9b::7f00:1]/x', 'https://[2002:7f00:1::1]/x', 'https://[fec0::1]/x',
      'https://[::ffff:0:7f00:1]/x', 'https://224.0.0.1/x', 'https://[ff02::1]/x', 'https://255.255.255.255/x', 'https://[2001:db8::1]/x',
    ];
    for (const endpoint of refused) {
      const token = web({ endpoint, keys });
      const result = checkGatewayToken('web', token);
      expect(result.ok, endpoint).toBe(false);
      if (!result.ok) expect(result.reason).toContain('allowPrivateEndpoints');
      expect(checkGatewayToken('web', token, { allowPrivateEndpoints: true }), endpoint).toEqual({ ok: true, token });
    }
    // The operator's allowlist lets its own ranges through, and only those.
    const allowPrivateAddresses = ['10.0.0.0/8', '100.64.0.0/10'];
    expect(checkGatewayToken('web', web({ endpoint: 'https://10.1.2.3/x', keys }), { allowPrivateAddresses }).ok).toBe(true);
    expect(checkGatewayToken('web', web({ endpoint: 'https://100.64.0.1/x', keys }), { allowPrivateAddresses }).ok).toBe(true);
    expect(checkGatewayToken('web', web({ endpoint: 'https://192.168.1.1/x', keys }), { allowPrivateAddresses }).ok).toBe(false);
    const accepted = [
      'https://fcm.googleapis.com/fcm/send/abc', 'https://updates.push.services.mozilla.com/wpush/v2/x', 'https://8.8.8.8/x',
      'https://172.32.0.1/x', 'https://192.169.0.1/x', 'https://[2606:4700::1111]/x', 'https://localhost.example.com/x',
    ];
    for (const endpoint of accepted) expect(checkGatewayToken('web', web({ endpoint, keys })).ok, endpoint).toBe(true);
  });
});
