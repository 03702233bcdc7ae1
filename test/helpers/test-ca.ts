/**
 * A test certificate authority in a temp dir (openssl): `ca.pem` (what clients trust, also as
 * NODE_EXTRA_CA_CERTS) and server certificates for localhost and 127.0.0.1 signed by it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Makes the CA in a new temp dir named with `prefix`; the caller removes `dir`. */
export function createTestCa(prefix: string): { dir: string; ca: Buffer } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  openssl(dir, 'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=Herald Test CA');
  return { dir, ca: readFileSync(join(dir, 'ca.pem')) };
}

/** A server certificate `<name>.pem` and key `<name>-key.pem` in the CA's dir; returns its serial (hex, upper case). */
export function serverCert(dir: string, name: string): string {
  writeFileSync(join(dir, 'san.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  openssl(dir, 'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}-key.pem`, '-out', `${name}.csr`, '-subj', '/CN=localhost');
  openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '2', '-extfile', 'san.ext', '-out', `${name}.pem`);
  return execFileSync('openssl', ['x509', '-in', `${name}.pem`, '-noout', '-serial'], { cwd: dir, encoding: 'utf8' }).trim().split('=')[1]!.toUpperCase();
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
}
