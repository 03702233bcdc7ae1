/**
 * Checks of push credentials: every PEM key and VAPID key is parsed, and every CA file read,
 * when the config is loaded (and on each reload), and when the admin API takes a push
 * instance, so a bad one is an error naming its field instead of failed sends later. Nothing
 * here contacts a gateway. What a failure says never quotes the key: it names the field and
 * the reason (an OpenSSL error code, not the text it read).
 */
import { createECDH, createPrivateKey } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import webpush from 'web-push';
import type { HeraldConfig, TlsConfig } from './schema.js';

type Fail = (field: string, message: string) => never;

/** Reads the TLS files and checks that they make a TLS context (start-up and every reload). */
export function checkTlsFiles(tls: Readonly<TlsConfig>, fail: Fail): void {
  const read = (field: 'certFile' | 'keyFile'): Buffer => {
    try {
      return readFileSync(tls[field]);
    } catch (err) {
      return fail(`tls.${field}`, `cannot read ${tls[field]}: ${(err as Error).message}`);
    }
  };
  const cert = read('certFile');
  const key = read('keyFile');
  try {
    createSecureContext({ cert });
  } catch (err) {
    fail('tls.certFile', `${tls.certFile} is not a PEM certificate: ${(err as Error).message}`);
  }
  try {
    createSecureContext({ cert, key, ...(tls.passphrase === undefined ? {} : { passphrase: tls.passphrase }) });
  } catch (err) {
    fail('tls.keyFile', `${tls.keyFile} is not a usable private key for tls.certFile (or tls.passphrase is wrong): ${(err as Error).message}`);
  }
}

/** Where the config came from: the config file may name files; the admin API gives key material only. */
export type KeyMaterialSource = 'file' | 'api';

/** Throws `(field, message)` for the first unusable key material. */
export function checkKeyMaterial(config: Readonly<Pick<HeraldConfig, 'push'>>, fail: (field: string, message: string) => never, source: KeyMaterialSource = 'file'): void {
  const fileHint = (option: string): string => (source === 'file' ? `to name a file use ${option}` : 'file paths belong to the config file');
  config.push.forEach((instance, i) => {
    const at = `push.${i}`;
    if (instance.apns) {
      const key = parseKey(instance.apns.privateKey, keyField(instance.apns, `${at}.apns`), fail, fileHint('privateKeyFile (the path of the .p8 file)'));
      if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
        fail(keyField(instance.apns, `${at}.apns`), 'must be an EC P-256 key (the .p8 file, PEM PKCS#8)');
      }
      checkCaFile(instance.apns.caFile, `${at}.apns.caFile`, fail);
    }
    if (instance.fcm) {
      const key = parseKey(instance.fcm.privateKey, instance.fcm.serviceAccountFile ? `${at}.fcm.serviceAccountFile` : `${at}.fcm.privateKey`, fail, fileHint('serviceAccountFile (the path of the service-account JSON file)'));
      if (key.asymmetricKeyType !== 'rsa') fail(`${at}.fcm.privateKey`, 'must be the service account RSA key (PEM PKCS#8)');
      // The token and send clients speak HTTPS only: an http:// URL would fail every send.
      if (!instance.fcm.tokenUri.startsWith('https://')) fail(`${at}.fcm.tokenUri`, 'must be an https:// URL');
      if (!instance.fcm.endpoint.startsWith('https://')) fail(`${at}.fcm.endpoint`, 'must be an https:// URL');
      checkCaFile(instance.fcm.caFile, `${at}.fcm.caFile`, fail);
    }
    if (instance.apns && !instance.apns.endpoint.startsWith('https://')) fail(`${at}.apns.endpoint`, 'must be an https:// URL');
    if (instance.web) {
      try {
        // web-push's messages name the key at fault and quote only the subject.
        webpush.getVapidHeaders('https://push.example', instance.web.subject, instance.web.vapidPublicKey, instance.web.vapidPrivateKey, 'aes128gcm');
      } catch (err) {
        fail(`${at}.web`, `unusable VAPID keys or subject: ${(err as Error).message}`);
      }
      if (!vapidPair(instance.web.vapidPublicKey, instance.web.vapidPrivateKey)) {
        fail(`${at}.web.vapidPublicKey`, 'is not the public key of vapidPrivateKey (give the pair that web-push generate-vapid-keys printed together)');
      }
      checkCaFile(instance.web.caFile, `${at}.web.caFile`, fail);
    }
  });
}

/** The field a key came from: privateKeyFile when it was read from a file. */
function keyField(config: { privateKeyFile?: string | undefined }, at: string): string {
  return config.privateKeyFile === undefined ? `${at}.privateKey` : `${at}.privateKeyFile`;
}

function parseKey(pem: string, field: string, fail: (field: string, message: string) => never, fileHint: string): ReturnType<typeof createPrivateKey> {
  if (!pem.includes('-----BEGIN') && field.endsWith('.privateKey') && /^[^\n]*([/\\]|\.(p8|pem|json|key))$/i.test(pem.trim())) {
    return fail(field, `is not a PEM private key but looks like a path: privateKey holds the key itself (PEM text, -----BEGIN PRIVATE KEY-----...); ${fileHint}`);
  }
  try {
    return createPrivateKey(pem);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    return fail(field, `is not a PEM private key (PEM text, -----BEGIN PRIVATE KEY-----...)${typeof code === 'string' ? `: ${code}` : ''}`);
  }
}

/** Whether the VAPID public key (base64url, uncompressed P-256 point) is that of the private key. */
function vapidPair(publicKey: string, privateKey: string): boolean {
  try {
    const ecdh = createECDH('prime256v1');
    ecdh.setPrivateKey(Buffer.from(privateKey, 'base64url'));
    return ecdh.getPublicKey().equals(Buffer.from(publicKey, 'base64url'));
  } catch {
    return false;
  }
}

function checkCaFile(path: string | null | undefined, field: string, fail: (field: string, message: string) => never): void {
  if (!path) return;
  try {
    readFileSync(path);
  } catch (err) {
    fail(field, `cannot read ${path}: ${(err as Error).message}`);
  }
}

/** Platforms an instance has no credentials for (its devices there fail with `no credentials for <platform>`). */
export function missingPlatforms(instance: Readonly<HeraldConfig['push'][number]>): string[] {
  return (['apns', 'fcm', 'web'] as const).filter((p) => instance[p] === null);
}
