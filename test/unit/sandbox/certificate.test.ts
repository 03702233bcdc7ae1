/**
 * The sandbox's self-signed certificate: an X.509 v3 certificate Node reads, valid now, for
 * localhost, 127.0.0.1 and ::1, that a TLS client given it as its only CA trusts (and one
 * without it refuses).
 */
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { request } from 'node:https';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selfSignedCertificate } from '../../../src/sandbox/certificate.js';

const { cert, key } = selfSignedCertificate('Herald sandbox test');
let server: Server;
let port: number;

beforeAll(async () => {
  server = createServer({ cert, key }, (_req, res) => res.end('hello'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

/** GET / on the server as `host`, trusting `ca` only when given; the body, or the error's code. */
function get(host: string, ca?: string): Promise<string> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', servername: host === '127.0.0.1' ? undefined : host, port, path: '/', ...(ca ? { ca } : {}), headers: { host } }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve(body));
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    req.end();
  });
}

describe('selfSignedCertificate', () => {
  it('is a CA certificate for localhost, 127.0.0.1 and ::1, valid now, signed by its own key', () => {
    const x509 = new X509Certificate(cert);
    expect(x509.subject).toBe('CN=Herald sandbox test');
    expect(x509.ca).toBe(true);
    expect(x509.subjectAltName).toBe('DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1');
    expect(x509.verify(x509.publicKey)).toBe(true);
    expect(Date.parse(x509.validFrom)).toBeLessThan(Date.now());
    expect(Date.parse(x509.validTo)).toBeGreaterThan(Date.now() + 365 * 86_400_000);
    expect(new X509Certificate(selfSignedCertificate('Herald sandbox test').cert).serialNumber).not.toBe(x509.serialNumber);
  });

  it('is trusted by a client given it as its CA, by address and by name, and refused by one without it', async () => {
    expect(await get('127.0.0.1', cert)).toBe('hello');
    expect(await get('localhost', cert)).toBe('hello');
    expect(await get('127.0.0.1')).toBe('DEPTH_ZERO_SELF_SIGNED_CERT');
  });
});
