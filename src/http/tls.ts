/**
 * Built-in TLS: HTTPS and WSS on the main port with uWS' SSLApp (plain HTTP is then not served
 * there). The certificate and key are checked with Node's TLS at start-up and on every reload,
 * so a bad file is a clear error naming the field, not a listener that fails handshakes.
 *
 * A reload (SIGHUP) re-reads the files: uWS cannot replace the context it started with, so the
 * new certificate is installed per server name (SNI). Every name a client asks for is added
 * when first seen and replaced on each reload; clients that send no server name (connections
 * by IP address) keep the start-up certificate until the next restart.
 */
import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import type { AppOptions, TemplatedApp } from 'uWebSockets.js';
import type { TlsConfig } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import { log } from '../log.js';
import type { UwsModule } from './uws-native.js';

/** Server names kept with their own certificate; beyond it, further names use the start-up one. */
const MAX_SERVER_NAMES = 1000;

/** Reads the files and checks that they make a TLS context; throws ConfigError naming the field. */
export function checkTlsFiles(tls: TlsConfig): void {
  const read = (field: 'certFile' | 'keyFile'): Buffer => {
    try {
      return readFileSync(tls[field]);
    } catch (err) {
      throw new ConfigError(`invalid config at tls.${field}: cannot read ${tls[field]}: ${(err as Error).message}`);
    }
  };
  const cert = read('certFile');
  const key = read('keyFile');
  try {
    createSecureContext({ cert });
  } catch (err) {
    throw new ConfigError(`invalid config at tls.certFile: ${tls.certFile} is not a PEM certificate: ${(err as Error).message}`);
  }
  try {
    createSecureContext({ cert, key, ...(tls.passphrase === undefined ? {} : { passphrase: tls.passphrase }) });
  } catch (err) {
    throw new ConfigError(`invalid config at tls.keyFile: ${tls.keyFile} is not a usable private key for tls.certFile (or tls.passphrase is wrong): ${(err as Error).message}`);
  }
}

function appOptions(tls: TlsConfig): AppOptions {
  return { cert_file_name: tls.certFile, key_file_name: tls.keyFile, ...(tls.passphrase === undefined ? {} : { passphrase: tls.passphrase }) };
}

/** The main app: SSLApp with the certificate when `tls` is set, else a plain App. */
export class MainApp {
  readonly app: TemplatedApp;
  private tls: TlsConfig | null;
  private readonly serverNames = new Set<string>();

  constructor(uws: UwsModule, tls: TlsConfig | null) {
    this.tls = tls;
    if (tls === null) {
      this.app = uws.App();
      return;
    }
    checkTlsFiles(tls);
    this.app = uws.SSLApp(appOptions(tls));
    this.app.missingServerName((hostname) => {
      // Runs inside a uWS callback: must not throw.
      try {
        if (this.tls === null || this.serverNames.size >= MAX_SERVER_NAMES) return;
        this.app.addServerName(hostname, appOptions(this.tls));
        this.serverNames.add(hostname);
      } catch (err) {
        log.error('tls: adding a server name failed', { hostname, error: String(err) });
      }
    });
  }

  get secure(): boolean {
    return this.tls !== null;
  }

  /** Re-reads the certificate files (reload); throws ConfigError (nothing changed) when they are bad. */
  reloadCertificates(tls: TlsConfig): void {
    checkTlsFiles(tls);
    this.tls = tls;
    for (const name of this.serverNames) {
      this.app.removeServerName(name);
      this.app.addServerName(name, appOptions(tls));
    }
    log.info('tls certificates re-read', { certFile: tls.certFile, serverNames: this.serverNames.size });
  }
}
