/**
 * Built-in TLS: HTTPS and WSS on the main port with uWS' SSLApp (plain HTTP is then not served
 * there). The certificate and key are checked with Node's TLS at start-up and on every reload,
 * so a bad file is a clear error naming the field, not a listener that fails handshakes.
 *
 * A reload (SIGHUP) re-reads the files. uWS cannot replace the context it started with, so
 * the certificate is also installed per server name (SNI) for every DNS name it covers, each
 * with its own copy of the routes (uWS keeps one router per server name); a reload replaces
 * those. Clients that send one of those names (every client connecting by host name) get the
 * new certificate; clients connecting by IP address without a server name keep the start-up
 * certificate until the next restart.
 *
 * Replacing a server name is not immediate. uWS routes every request of a connection through
 * the router stored on the SSL context the connection was accepted with, and removeServerName
 * deletes that router while the connection (holding a reference to the context) lives on: the
 * next request on a keep-alive connection from before the swap would be routed through freed
 * memory (closed without an answer, at best). So a reload first drains: for SWAP_DELAY_MS
 * every answer closes its connection (`Connection: close`) and uWS closes idle HTTP
 * connections after its 10 s idle timeout; only then are the server names replaced. Answers
 * keep closing their connection for CLOSE_AFTER_SWAP_MS more, for requests that were in
 * flight across the swap.
 */
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import type { AppOptions, TemplatedApp } from 'uWebSockets.js';
import type { TlsConfig } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import { checkTlsFiles } from '../config/key-material.js';
import { log } from '../log.js';
import type { UwsModule } from './uws-native.js';

/** checkTlsFiles throwing ConfigError naming the field. */
function checkFiles(tls: TlsConfig): void {
  checkTlsFiles(tls, (field, message) => {
    throw new ConfigError(`invalid config at ${field}: ${message}`);
  });
}

function appOptions(tls: TlsConfig): AppOptions {
  return { cert_file_name: tls.certFile, key_file_name: tls.keyFile, ...(tls.passphrase === undefined ? {} : { passphrase: tls.passphrase }) };
}

/** uWS closes an HTTP connection idle for 10 s (HTTP_IDLE_TIMEOUT_S); a margin on top. */
export const SWAP_DELAY_MS = 12_000;
/** Answers still close their connection this long after a swap (requests in flight across it). */
const CLOSE_AFTER_SWAP_MS = 60_000;

/** The DNS names a certificate covers (subjectAltName DNS entries, else its CN). */
export function certificateNames(certFile: string): string[] {
  const cert = new X509Certificate(readFileSync(certFile));
  const names = (cert.subjectAltName ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4));
  if (names.length > 0) return names;
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(cert.subject)?.[1];
  return cn ? [cn] : [];
}

/** The main app: SSLApp with the certificate when `tls` is set, else a plain App. */
export class MainApp {
  readonly app: TemplatedApp;
  private readonly serverNames = new Set<string>();
  /** Registers every route on the app's current router (set by installRoutes). */
  private registerRoutes: (() => void) | undefined;
  /** Set while a server-name swap waits for the drain (reloadCertificates). */
  private swapTimer: NodeJS.Timeout | undefined;
  /** When the server names were last replaced (epoch ms); -Infinity before any. */
  private swappedAt = Number.NEGATIVE_INFINITY;

  constructor(uws: UwsModule, private tls: TlsConfig | null) {
    if (tls === null) {
      this.app = uws.App();
      return;
    }
    checkFiles(tls);
    this.app = uws.SSLApp(appOptions(tls));
  }

  get secure(): boolean {
    return this.tls !== null;
  }

  /**
   * Takes the function that registers every route (HTTP and WebSocket) on the current router,
   * after it has run once for the default router, and installs the certificate's server names.
   */
  installRoutes(register: () => void): void {
    if (this.tls === null) return;
    this.registerRoutes = register;
    this.installServerNames(this.tls);
  }

  /**
   * Re-reads the certificate files (reload); throws ConfigError (nothing changed) when they are
   * bad. The server names get the new certificate after the drain (SWAP_DELAY_MS, see above);
   * reloads during a drain join it (the last files win).
   */
  reloadCertificates(tls: TlsConfig): void {
    checkFiles(tls);
    this.tls = tls;
    log.info('tls certificates re-read', { certFile: tls.certFile, installInMs: SWAP_DELAY_MS });
    if (!this.registerRoutes || this.swapTimer !== undefined) return;
    this.swapTimer = setTimeout(() => {
      this.swapTimer = undefined;
      const current = this.tls;
      if (current === null) return;
      try {
        checkFiles(current);
        this.installServerNames(current);
        this.swappedAt = Date.now();
        log.info('tls certificates installed', { certFile: current.certFile, serverNames: [...this.serverNames] });
      } catch (err) {
        log.error('tls certificates not installed: the files changed since the reload and are bad now; the previous certificate stays', { error: (err as Error).message });
      }
    }, SWAP_DELAY_MS);
    this.swapTimer.unref();
  }

  /**
   * True while answers must close their connection: during a drain and shortly after a swap
   * (no keep-alive connection may outlive the server-name contexts it was accepted with).
   */
  closesConnections(): boolean {
    return this.swapTimer !== undefined || Date.now() - this.swappedAt < CLOSE_AFTER_SWAP_MS;
  }

  /**
   * (Re)installs the certificate for every server name it covers and every one installed
   * before, each with the routes. Removing a name deletes its router: callers make sure no
   * connection accepted with it is still open (the drain). Runs synchronously, so no
   * handshake sees a name between its removal and its return.
   */
  private installServerNames(tls: TlsConfig): void {
    const register = this.registerRoutes;
    if (!register) return;
    for (const name of certificateNames(tls.certFile)) this.serverNames.add(name);
    for (const name of this.serverNames) {
      this.app.removeServerName(name);
      this.app.addServerName(name, appOptions(tls));
      this.app.domain(name);
      try {
        register();
      } finally {
        // No server name has the empty name: back to the default router.
        this.app.domain('');
      }
    }
  }
}
