/**
 * A self-signed TLS certificate for the sandbox gateway, made with node:crypto alone: an EC
 * P-256 key and an X.509 v3 certificate (DER written here, signed ECDSA-SHA256) for
 * `localhost`, 127.0.0.1 and ::1. The certificate is its own CA (basicConstraints CA:TRUE), so
 * a client given it as `caFile` trusts the server and nothing else.
 */
import { generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';

/** PEM texts of the certificate and of its PKCS#8 private key. */
export interface SelfSignedCertificate {
  cert: string;
  key: string;
}

/** Names the certificate is valid for (subjectAltName). */
const DNS_NAMES = ['localhost'];
const IP_ADDRESSES = [Buffer.from([127, 0, 0, 1]), Buffer.from('00000000000000000000000000000001', 'hex')];
const VALID_DAYS = 3650;
const DAY_MS = 86_400_000;

/** A new key and a certificate valid from a day ago for VALID_DAYS days, named `commonName`. */
export function selfSignedCertificate(commonName: string, now: Date = new Date()): SelfSignedCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01; // positive and without a leading zero byte
  const name = sequence(set(sequence(oid('2.5.4.3'), tlv(0x0c, Buffer.from(commonName, 'utf8')))));
  const ecdsaWithSha256 = sequence(oid('1.2.840.10045.4.3.2'));
  const extensions = sequence(
    extension('2.5.29.19', true, sequence(tlv(0x01, Buffer.from([0xff])))), // basicConstraints CA:TRUE
    extension('2.5.29.15', true, tlv(0x03, Buffer.from([0x02, 0x84]))), // keyUsage digitalSignature, keyCertSign
    extension('2.5.29.17', false, sequence(
      ...DNS_NAMES.map((dns) => tlv(0x82, Buffer.from(dns, 'ascii'))),
      ...IP_ADDRESSES.map((ip) => tlv(0x87, ip)),
    )),
  );
  const tbs = sequence(
    tlv(0xa0, tlv(0x02, Buffer.from([0x02]))), // version v3
    tlv(0x02, serial),
    ecdsaWithSha256,
    name,
    sequence(time(new Date(now.getTime() - DAY_MS)), time(new Date(now.getTime() + VALID_DAYS * DAY_MS))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, extensions),
  );
  const signature = sign('sha256', tbs, { key: privateKey, dsaEncoding: 'der' });
  const der = sequence(tbs, ecdsaWithSha256, tlv(0x03, Buffer.concat([Buffer.from([0]), signature])));
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n?$/, '\n')}-----END CERTIFICATE-----\n`;
  // Parse it back: a certificate Node cannot read is a bug here, not a failed handshake later.
  if (!new X509Certificate(cert).checkPrivateKey(privateKey)) throw new Error('self-signed certificate does not match its key');
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}

/** One DER element: tag, definite length, content. */
function tlv(tag: number, content: Buffer): Buffer {
  const length = content.length;
  let header: Buffer;
  if (length < 0x80) header = Buffer.from([tag, length]);
  else if (length < 0x100) header = Buffer.from([tag, 0x81, length]);
  else header = Buffer.from([tag, 0x82, length >> 8, length & 0xff]);
  return Buffer.concat([header, content]);
}

function sequence(...items: Buffer[]): Buffer {
  return tlv(0x30, Buffer.concat(items));
}

function set(...items: Buffer[]): Buffer {
  return tlv(0x31, Buffer.concat(items));
}

/** An OBJECT IDENTIFIER from its dotted form. */
function oid(dotted: string): Buffer {
  const [first, second, ...rest] = dotted.split('.').map(Number);
  const bytes = [first! * 40 + second!];
  for (const arc of rest) {
    const base128 = [arc & 0x7f];
    for (let value = arc >>> 7; value > 0; value >>>= 7) base128.unshift((value & 0x7f) | 0x80);
    bytes.push(...base128);
  }
  return tlv(0x06, Buffer.from(bytes));
}

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return sequence(oid(id), ...(critical ? [tlv(0x01, Buffer.from([0xff]))] : []), tlv(0x04, value));
}

/** UTCTime up to 2049, GeneralizedTime after (RFC 5280 4.1.2.5). */
function time(date: Date): Buffer {
  const digits = date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return date.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${digits.slice(2)}Z`, 'ascii')) : tlv(0x18, Buffer.from(`${digits}Z`, 'ascii'));
}
