/**
 * Test certificates and keys from test/fixtures (see its README), for the fake gateways
 * (server side) and for the clients under test (caFile).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Absolute path of a file in test/fixtures. */
export function fixturePath(name: string): string {
  return fileURLToPath(new URL(`../fixtures/${name}`, import.meta.url));
}

/** A fixture file's text. */
export function readFixture(name: string): string {
  return readFileSync(fixturePath(name), 'utf8');
}

/** Path of the test CA certificate: give it to clients as `caFile`. */
export const TEST_CA_FILE = fixturePath('ca.pem');

/** Key and certificate (localhost, 127.0.0.1) every fake gateway serves. */
export function serverTlsOptions(): { key: string; cert: string } {
  return { key: readFixture('server-key.pem'), cert: readFixture('server.pem') };
}

/** APNs .p8-style signing key (EC P-256, PKCS8) and its SPKI public key, both PEM. */
export function apnsKeys(): { privateKey: string; publicKey: string } {
  return { privateKey: readFixture('apns-key.pem'), publicKey: readFixture('apns-pub.pem') };
}

/** FCM service-account key (RSA-2048, PKCS8) and its SPKI public key, both PEM. */
export function fcmKeys(): { privateKey: string; publicKey: string } {
  return { privateKey: readFixture('fcm-key.pem'), publicKey: readFixture('fcm-pub.pem') };
}

/** VAPID key pair, base64url, as `web-push generateVAPIDKeys` gives it. */
export function vapidKeys(): { publicKey: string; privateKey: string } {
  return JSON.parse(readFixture('vapid.json')) as { publicKey: string; privateKey: string };
}
