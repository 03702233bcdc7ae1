import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { apnsKeys, fcmKeys, vapidKeys } from '../../fakes/tls.js';

const instanceId = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const fcm = () => ({ projectId: 'p', clientEmail: 'e@p.iam.gserviceaccount.com', privateKey: fcmKeys().privateKey });
const apns = () => ({ teamId: 'T', keyId: 'K', privateKey: apnsKeys().privateKey });
const web = () => ({ vapidPublicKey: vapidKeys().publicKey, vapidPrivateKey: vapidKeys().privateKey, subject: 'mailto:a@b.c' });
const config = (instance: Record<string, unknown>) => ({ shards: 1, push: [{ instanceId, secretKey: 's', ...instance }] });

describe('push key material at start-up', () => {
  it('accepts good keys without contacting anything', () => {
    expect(() => parseConfig(config({ apns: apns(), fcm: fcm(), web: web() }))).not.toThrow();
  });

  it('names the field of a key that does not parse or is of the wrong kind', () => {
    expect(() => parseConfig(config({ fcm: { ...fcm(), privateKey: 'nope' } }))).toThrow(/invalid config at push\.0\.fcm\.privateKey: is not a PEM private key/);
    expect(() => parseConfig(config({ apns: { ...apns(), privateKey: fcmKeys().privateKey } }))).toThrow(/invalid config at push\.0\.apns\.privateKey: must be an EC P-256 key/);
    expect(() => parseConfig(config({ fcm: { ...fcm(), privateKey: apnsKeys().privateKey } }))).toThrow(/invalid config at push\.0\.fcm\.privateKey: must be the service account RSA key/);
    expect(() => parseConfig(config({ web: { ...web(), vapidPrivateKey: 'abc' } }))).toThrow(/invalid config at push\.0\.web: unusable VAPID keys/);
  });

  it('refuses an http:// FCM token URI (the client speaks HTTPS only)', () => {
    expect(() => parseConfig(config({ fcm: { ...fcm(), tokenUri: 'http://127.0.0.1:1/token' } }))).toThrow(/invalid config at push\.0\.fcm\.tokenUri: must be an https:\/\/ URL/);
  });

  it('names an unreadable caFile', () => {
    expect(() => parseConfig(config({ fcm: { ...fcm(), caFile: '/no/such/ca.pem' } }))).toThrow(/invalid config at push\.0\.fcm\.caFile: cannot read/);
  });
});

describe('push keys from files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-keys-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string): string => {
    writeFileSync(join(dir, name), text);
    return join(dir, name);
  };

  it('reads the APNs .p8 key from privateKeyFile', () => {
    const p8 = file('AuthKey_K.p8', apnsKeys().privateKey);
    const parsed = parseConfig(config({ apns: { teamId: 'T', keyId: 'K', privateKeyFile: p8 } }));
    expect(parsed.push[0]!.apns).toMatchObject({ privateKey: apnsKeys().privateKey, privateKeyFile: p8 });
  });

  it('says a path given as privateKey belongs in privateKeyFile, instead of a decoder error', () => {
    expect(() => parseConfig(config({ apns: { ...apns(), privateKey: '/etc/herald/AuthKey_K.p8' } }))).toThrow(
      /invalid config at push\.0\.apns\.privateKey: is not a PEM private key but looks like a path: .*use privateKeyFile/,
    );
  });

  it('names an unreadable, doubled or missing APNs key', () => {
    expect(() => parseConfig(config({ apns: { teamId: 'T', keyId: 'K', privateKeyFile: join(dir, 'none.p8') } }))).toThrow(/invalid config at push\.0\.apns\.privateKeyFile: cannot read/);
    expect(() => parseConfig(config({ apns: { ...apns(), privateKeyFile: file('k.p8', apnsKeys().privateKey) } }))).toThrow(/push\.0\.apns\.privateKeyFile: set privateKey .* not both/);
    expect(() => parseConfig(config({ apns: { teamId: 'T', keyId: 'K' } }))).toThrow(/push\.0\.apns\.privateKey: required: privateKey \(PEM text\) or privateKeyFile/);
    expect(() => parseConfig(config({ apns: { teamId: 'T', keyId: 'K', privateKeyFile: file('rsa.p8', fcmKeys().privateKey) } }))).toThrow(/push\.0\.apns\.privateKeyFile: must be an EC P-256 key/);
  });

  it('reads FCM credentials from the service-account JSON file', () => {
    const json = file('sa.json', JSON.stringify({ type: 'service_account', project_id: 'my-project', client_email: 'herald@my-project.iam.gserviceaccount.com', private_key: fcmKeys().privateKey }));
    const parsed = parseConfig(config({ fcm: { serviceAccountFile: json } }));
    expect(parsed.push[0]!.fcm).toMatchObject({ projectId: 'my-project', clientEmail: 'herald@my-project.iam.gserviceaccount.com', privateKey: fcmKeys().privateKey });
    // A field set beside the file wins.
    expect(parseConfig(config({ fcm: { serviceAccountFile: json, projectId: 'other' } })).push[0]!.fcm?.projectId).toBe('other');
  });

  it('names a bad service-account file or a missing field', () => {
    expect(() => parseConfig(config({ fcm: { serviceAccountFile: file('bad.json', '{"project_id": "p"}') } }))).toThrow(/push\.0\.fcm\.serviceAccountFile: .* is not a service-account key file: no client_email, private_key/);
    expect(() => parseConfig(config({ fcm: { serviceAccountFile: join(dir, 'none.json') } }))).toThrow(/push\.0\.fcm\.serviceAccountFile: cannot read/);
    expect(() => parseConfig(config({ fcm: { projectId: 'p', clientEmail: 'e@p' } }))).toThrow(/push\.0\.fcm\.privateKey: required: set privateKey, or serviceAccount \(the JSON key\), or serviceAccountFile/);
  });

  it('never quotes what it read: a file that is not JSON, or not a key, is named with the reason only', () => {
    const secretText = 'HIDDEN_VALUE=do-not-print-me\nOTHER=1';
    const notJson = file('env.json', secretText);
    expect(() => parseConfig(config({ fcm: { serviceAccountFile: notJson } }))).toThrow(/push\.0\.fcm\.serviceAccountFile: .* is not a service-account key file: not valid JSON \(Unexpected character in JSON at position 0\)/);
    expect(() => parseConfig(config({ fcm: { serviceAccountFile: notJson } }))).not.toThrow(/HIDDEN|do-not-print/);
    const notKey = file('passwd.p8', 'root:x:0:0:root:/root:/bin/bash-secret-tail');
    expect(() => parseConfig(config({ apns: { teamId: 'T', keyId: 'K', privateKeyFile: notKey } }))).toThrow(/push\.0\.apns\.privateKeyFile: is not a PEM private key/);
    expect(() => parseConfig(config({ apns: { teamId: 'T', keyId: 'K', privateKeyFile: notKey } }))).not.toThrow(/root:|secret-tail/);
  });
});

describe('the service-account JSON key itself (serviceAccount)', () => {
  const account = () => ({ type: 'service_account', project_id: 'my-project', client_email: 'herald@my-project.iam.gserviceaccount.com', private_key: fcmKeys().privateKey });

  it('gives projectId, clientEmail and privateKey, as an object or as its text, and is not kept as such', () => {
    for (const given of [account(), JSON.stringify(account())]) {
      const fcmConfig = parseConfig(config({ fcm: { serviceAccount: given } })).push[0]!.fcm!;
      expect(fcmConfig).toMatchObject({ projectId: 'my-project', clientEmail: 'herald@my-project.iam.gserviceaccount.com', privateKey: fcmKeys().privateKey });
      expect(fcmConfig).not.toHaveProperty('serviceAccount');
    }
  });

  it('names the field, never its text: not JSON, fields missing, a key that does not parse', () => {
    const cases: [unknown, RegExp][] = [
      ['{"private_key": "MARK-secret-text"', /push\.0\.fcm\.serviceAccount: is not a service-account key: not valid JSON/],
      ['MARK-secret-text', /push\.0\.fcm\.serviceAccount: is not a service-account key: not valid JSON/],
      [{ project_id: 'MARK-project' }, /push\.0\.fcm\.serviceAccount: is not a service-account key: no client_email, private_key/],
      [{ ...account(), private_key: 'MARK-secret-text, not a key' }, /push\.0\.fcm\.privateKey: is not a PEM private key/],
    ];
    for (const [given, expected] of cases) {
      expect(() => parseConfig(config({ fcm: { serviceAccount: given } }))).toThrow(expected);
      expect(() => parseConfig(config({ fcm: { serviceAccount: given } }))).not.toThrow(/MARK/);
    }
    expect(() => parseConfig(config({ fcm: { serviceAccount: account(), serviceAccountFile: '/x.json' } }))).toThrow(/serviceAccount .*not both/);
  });
});

describe('ids, keys and names', () => {
  it('refuse control characters, naming the field', () => {
    const base = { id: 'a', key: 'k', secret: 's' };
    expect(() => parseConfig({ shards: 1, apps: [{ ...base, key: 'k\r\nX-Injected: yes' }] })).toThrow(/invalid config at apps\.0\.key: must not contain control characters/);
    expect(() => parseConfig({ shards: 1, apps: [{ ...base, id: 'a\u0000' }] })).toThrow(/invalid config at apps\.0\.id: must not contain control characters/);
    expect(() => parseConfig(config({ apns: { ...apns(), keyId: 'K\n' } }))).toThrow(/push\.0\.apns\.keyId: must not contain control characters/);
    expect(() => parseConfig(config({ fcm: { ...fcm(), projectId: 'p\r' } }))).toThrow(/push\.0\.fcm\.projectId: must not contain control characters/);
    expect(() => parseConfig({ shards: 1, apps: [{ ...base, key: 'ключ-é' }] })).not.toThrow();
  });
});

describe('VAPID keys', () => {
  it('must be a pair', () => {
    const other = 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM';
    expect(() => parseConfig(config({ web: { ...web(), vapidPublicKey: other } }))).toThrow(/push\.0\.web\.vapidPublicKey: is not the public key of vapidPrivateKey/);
  });
});
