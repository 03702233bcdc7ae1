import { describe, expect, it } from 'vitest';
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
