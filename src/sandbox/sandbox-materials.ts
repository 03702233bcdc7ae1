/**
 * The sandbox gateway's key material, kept in its directory so that a restart serves the same
 * certificate and accepts the same keys (the config snippet printed once stays valid):
 * - `tls-cert.pem`, `tls-key.pem`: its self-signed certificate (Herald's `caFile`) and key;
 * - `apns-key.p8`: an APNs-style provider key (EC P-256, PKCS#8), Herald's `privateKeyFile`;
 * - `fcm-service-account.json`: a service-account key file (RSA-2048) whose `token_uri` is the
 *   sandbox, Herald's `serviceAccountFile`;
 * - `vapid.json`: a VAPID key pair for Herald's `web` settings;
 * - `web-subscriptions.json`: the web push subscriptions it made, with their private keys.
 * Files are created missing-only, readable by their owner alone.
 */
import { createECDH, createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { selfSignedCertificate } from './certificate.js';
import type { SubscriptionKeys } from './web-push-protocol.js';

/** The identities the sandbox accepts, as printed in the config snippet. */
export const SANDBOX_APNS_TEAM_ID = 'SANDBOXTEAM';
export const SANDBOX_APNS_KEY_ID = 'SANDBOXKEY';
export const SANDBOX_FCM_PROJECT_ID = 'herald-sandbox';
export const SANDBOX_FCM_CLIENT_EMAIL = 'herald-sandbox@herald-sandbox.iam.gserviceaccount.com';

/** Paths and public halves of the material in a sandbox directory. */
export interface SandboxMaterials {
  dir: string;
  certFile: string;
  cert: string;
  key: string;
  apnsKeyFile: string;
  /** SPKI PEM of the APNs provider key. */
  apnsPublicKey: string;
  fcmServiceAccountFile: string;
  /** SPKI PEM of the service-account key. */
  fcmPublicKey: string;
  vapid: { publicKey: string; privateKey: string };
}

/** A subscription as kept in web-subscriptions.json (keys base64url). */
interface SavedSubscription {
  id: string;
  privateKey: string;
  publicKey: string;
  authSecret: string;
}

/** Reads the material in `dir`, making the files that are missing (and `dir` itself). */
export function loadMaterials(dir: string, tokenUri: string): SandboxMaterials {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const path = (name: string): string => join(dir, name);
  if (!existsSync(path('tls-cert.pem')) || !existsSync(path('tls-key.pem'))) {
    const { cert, key } = selfSignedCertificate('Herald sandbox gateway');
    writePrivate(path('tls-key.pem'), key);
    writePrivate(path('tls-cert.pem'), cert);
  }
  if (!existsSync(path('apns-key.p8'))) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    writePrivate(path('apns-key.p8'), privateKey.export({ type: 'pkcs8', format: 'pem' }).toString());
  }
  const accountFile = path('fcm-service-account.json');
  if (!existsSync(accountFile)) {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writePrivate(accountFile, JSON.stringify({
      type: 'service_account',
      project_id: SANDBOX_FCM_PROJECT_ID,
      private_key_id: randomBytes(20).toString('hex'),
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: SANDBOX_FCM_CLIENT_EMAIL,
      token_uri: tokenUri,
    }, null, 2) + '\n');
  }
  if (!existsSync(path('vapid.json'))) {
    const ecdh = createECDH('prime256v1');
    ecdh.generateKeys();
    const vapid = { publicKey: ecdh.getPublicKey().toString('base64url'), privateKey: ecdh.getPrivateKey().toString('base64url') };
    writePrivate(path('vapid.json'), JSON.stringify(vapid, null, 2) + '\n');
  }
  const account = JSON.parse(readFileSync(accountFile, 'utf8')) as { private_key: string };
  return {
    dir,
    certFile: path('tls-cert.pem'),
    cert: readFileSync(path('tls-cert.pem'), 'utf8'),
    key: readFileSync(path('tls-key.pem'), 'utf8'),
    apnsKeyFile: path('apns-key.p8'),
    apnsPublicKey: publicHalf(readFileSync(path('apns-key.p8'), 'utf8')),
    fcmServiceAccountFile: accountFile,
    fcmPublicKey: publicHalf(account.private_key),
    vapid: JSON.parse(readFileSync(path('vapid.json'), 'utf8')) as SandboxMaterials['vapid'],
  };
}

/** The web push subscriptions made before, by id. */
export function loadSubscriptions(dir: string): Map<string, SubscriptionKeys> {
  const file = join(dir, 'web-subscriptions.json');
  const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as SavedSubscription[]) : [];
  return new Map(saved.map((s) => [s.id, {
    privateKey: Buffer.from(s.privateKey, 'base64url'),
    publicKey: Buffer.from(s.publicKey, 'base64url'),
    authSecret: Buffer.from(s.authSecret, 'base64url'),
  }]));
}

/** Rewrites web-subscriptions.json with every subscription in `subscriptions`. */
export function saveSubscriptions(dir: string, subscriptions: ReadonlyMap<string, SubscriptionKeys>): void {
  const saved: SavedSubscription[] = [...subscriptions].map(([id, keys]) => ({
    id,
    privateKey: keys.privateKey.toString('base64url'),
    publicKey: keys.publicKey.toString('base64url'),
    authSecret: keys.authSecret.toString('base64url'),
  }));
  writePrivate(join(dir, 'web-subscriptions.json'), JSON.stringify(saved, null, 2) + '\n');
}

function publicHalf(privateKeyPem: string): string {
  return createPublicKey(privateKeyPem).export({ type: 'spki', format: 'pem' }).toString();
}

function writePrivate(file: string, text: string): void {
  writeFileSync(file, text, { mode: 0o600 });
  chmodSync(file, 0o600);
}
