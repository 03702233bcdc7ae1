/**
 * Built-in TLS: HTTPS and WSS on the main port with uWS' SSLApp (plain HTTP is then not served
 * there). The certificate and key are checked with Node's TLS at start-up and on every reload,
 * so a bad file is a clear error naming the field, not a listener that fails handshakes.
 *
 * A reload (SIGHUP) re-reads the files. uWS cannot replace the certificate of the SSL context an
 * SSLApp was made with (the one every client without a server name gets, and uWS calls its
 * missing-server-name hook only for clients that send one), so a changed certificate gets a new
 * SSLApp, with every route and the WebSocket endpoint, listening on the same port beside the old
 * one (SO_REUSEPORT); then the old listener closes. From then on every new connection, with or
 * without a server name, is accepted by the new app; connections accepted before keep running
 * on the old app, which is never torn down (its routes and contexts stay valid while any of its
 * connections lives). Topic publishes go to every app that still has WebSocket connections
 * (TopicFanout, topic-fanout.ts), so old and new subscribers of a channel get the same frames.
 *
 * The old listener keeps accepting for SETTLE_MS beside the new one (both are in the port's
 * SO_REUSEPORT group, the kernel spreads connections over them), then closes right after an
 * event-loop poll, when its accept queue was just emptied; the kernel resets a connection still
 * queued there (completed TCP handshake, not accepted yet) unless `net.ipv4.tcp_migrate_req = 1`
 * moves it to the new listener. An app takes ~0.2 MB that stays until restart, so certificate
 * changes are installed at most once per HANDOVER_INTERVAL_MS (reloads in between: the last
 * files win), and reloads with unchanged files make none.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { AppOptions, RecognizedString, TemplatedApp, WebSocketBehavior, us_listen_socket } from 'uWebSockets.js';
import type { PublishingSocket, TopicFanout } from './topic-fanout.js';
import type { TlsConfig } from '../config/schema.js';
import { ConfigError } from '../config/load.js';
import { checkTlsFiles } from '../config/key-material.js';
import { log } from '../log.js';
import type { UwsModule } from './uws-native.js';
import { LIBUS_LISTEN_DEFAULT, type ListenWithOptions } from './uws-listen.js';

/** checkTlsFiles throwing ConfigError naming the field. */
function checkFiles(tls: TlsConfig): void {
  checkTlsFiles(tls, (field, message) => {
    throw new ConfigError(`invalid config at ${field}: ${message}`);
  });
}

function appOptions(tls: TlsConfig): AppOptions {
  return { cert_file_name: tls.certFile, key_file_name: tls.keyFile, ...(tls.passphrase === undefined ? {} : { passphrase: tls.passphrase }) };
}

/** What the files hold now (a changed certificate needs a new app; the same one does not), and the certificate's serial number. */
function fingerprint(tls: TlsConfig): { files: string; serial: string } {
  const cert = readFileSync(tls.certFile);
  const files = createHash('sha256')
    .update(cert)
    .update('\0')
    .update(readFileSync(tls.keyFile))
    .update('\0')
    .update(tls.passphrase ?? '')
    .digest('hex');
  return { files, serial: new X509Certificate(cert).serialNumber };
}

/** Certificate changes are installed at most this often (each keeps an app until restart). */
export const HANDOVER_INTERVAL_MS = 1000;

/** How long the old listener keeps accepting beside the new one (see handOver). */
const SETTLE_MS = 100;

/** Registers the routes (HTTP and the admin stream) on one app; run for every app made. */
export type RouteInstaller = (app: TemplatedApp) => void;

/** The main app: SSLApp with the certificate when `tls` is set, else a plain App. */
export class MainApp implements TopicFanout {
  private current: TemplatedApp;
  /** Apps with WebSocket connections (the current one always), for publishing. */
  private apps: TemplatedApp[];
  /** Open WebSocket connections per app (TLS only). */
  private readonly openSockets = new Map<TemplatedApp, number>();
  /** The app each WebSocket connection belongs to (TLS only): its own publish covers that one. */
  private readonly appOf = new WeakMap<object, TemplatedApp>();
  private installRoutes: RouteInstaller | undefined;
  private wsBehavior: WebSocketBehavior<never> | undefined;
  private listener: { host: string; port: number; socket: us_listen_socket } | undefined;
  /** Old listen sockets still accepting for SETTLE_MS after a handover (see handOver). */
  private readonly retiring = new Set<us_listen_socket>();
  private closed = false;
  /** Every app made (a thread that ends closes them all first: an open uWS app aborts a worker thread's exit). */
  private readonly made = new Set<TemplatedApp>();
  /** Fingerprint of the current app's files; when the last handover was; a handover waiting for the interval. */
  private installed = '';
  private handedOverAt = Number.NEGATIVE_INFINITY;
  private handoverTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly uws: UwsModule,
    private tls: TlsConfig | null,
  ) {
    if (tls === null) {
      this.current = uws.App();
    } else {
      checkFiles(tls);
      this.installed = fingerprint(tls).files;
      this.current = uws.SSLApp(appOptions(tls));
    }
    this.apps = [this.current];
  }

  /** The app new connections reach. */
  get app(): TemplatedApp {
    return this.current;
  }

  get secure(): boolean {
    return this.tls !== null;
  }

  /**
   * Registers the routes and the WebSocket endpoint on the app, and on every app a certificate
   * reload makes later.
   */
  install<T>(routes: RouteInstaller, behavior: WebSocketBehavior<T>): void {
    this.installRoutes = routes;
    this.wsBehavior = behavior as WebSocketBehavior<never>;
    this.installOn(this.current);
  }

  private installOn(app: TemplatedApp): void {
    this.made.add(app);
    const behavior = this.wsBehavior;
    this.installRoutes?.(app);
    if (!behavior) return;
    if (this.tls === null) {
      app.ws('/*', behavior);
      return;
    }
    // Counted per app: an old app leaves the publish list with its last connection.
    this.openSockets.set(app, 0);
    app.ws('/*', {
      ...behavior,
      open: (ws) => {
        const open = (this.openSockets.get(app) ?? 0) + 1;
        this.openSockets.set(app, open);
        // An upgrade the old app accepted before it lost its last connection: publishes again.
        if (open === 1 && !this.apps.includes(app)) this.apps = [...this.apps, app];
        this.appOf.set(ws, app);
        behavior.open?.(ws);
      },
      close: (ws, code, message) => {
        try {
          behavior.close?.(ws, code, message);
        } finally {
          const left = (this.openSockets.get(app) ?? 1) - 1;
          this.openSockets.set(app, left);
          if (left === 0 && app !== this.current) this.retire(app);
        }
      },
    });
  }

  /** The app no longer gets publishes (no connection left, none can come: its listener is closed). */
  private retire(app: TemplatedApp): void {
    this.apps = this.apps.filter((a) => a !== app);
  }

  publish(topic: RecognizedString, message: RecognizedString): void {
    const apps = this.apps;
    if (apps.length === 1) {
      apps[0]!.publish(topic, message);
      return;
    }
    for (const app of apps) app.publish(topic, message);
  }

  numSubscribers(topic: RecognizedString): number {
    const apps = this.apps;
    if (apps.length === 1) return apps[0]!.numSubscribers(topic);
    let n = 0;
    for (const app of apps) n += app.numSubscribers(topic);
    return n;
  }

  publishFrom(ws: PublishingSocket, topic: RecognizedString, message: RecognizedString): void {
    // A socket's publish reaches its own app's subscribers only.
    ws.publish(topic, message);
    const apps = this.apps;
    if (apps.length === 1) return;
    const own = this.appOf.get(ws);
    for (const app of apps) if (app !== own) app.publish(topic, message);
  }

  /** The listen socket the server opened for the app (host and the port it got). */
  listening(host: string, port: number, socket: us_listen_socket): void {
    this.listener = { host, port, socket };
  }

  /** Closes the listeners and every app, with their connections (a front-end thread that ends). */
  closeApps(): void {
    this.closeListener();
    for (const app of this.made) app.close();
    this.made.clear();
  }

  /**
   * Closes the listen socket(s): no new connection (shutdown). Once only: uSockets frees a
   * closed listen socket after the loop iteration, and closing it again then touches freed
   * memory (shutdown calls this on drain and again when the apps close).
   */
  closeListener(): void {
    this.closed = true;
    if (this.handoverTimer !== undefined) clearTimeout(this.handoverTimer);
    this.handoverTimer = undefined;
    if (this.listener) this.uws.us_listen_socket_close(this.listener.socket);
    this.listener = undefined;
    for (const socket of this.retiring) this.uws.us_listen_socket_close(socket);
    this.retiring.clear();
  }

  /**
   * Re-reads the certificate files (reload); throws ConfigError (nothing changed) when they are
   * bad. Changed files get a new app on the port (see above): at once, or when
   * HANDOVER_INTERVAL_MS has passed since the last handover (reloads in between join it).
   */
  reloadCertificates(tls: TlsConfig): void {
    checkFiles(tls);
    this.tls = tls;
    const installInMs = Math.max(0, Math.ceil(this.handedOverAt + HANDOVER_INTERVAL_MS - Date.now()));
    log.info('tls certificates re-read', { certFile: tls.certFile, installInMs });
    if (this.handoverTimer !== undefined) return;
    if (installInMs === 0) {
      this.handOver();
      return;
    }
    this.handoverTimer = setTimeout(() => {
      this.handoverTimer = undefined;
      this.handOver();
    }, installInMs);
    this.handoverTimer.unref();
  }

  /**
   * A new SSLApp with the current files, its routes and endpoint, listening beside the old app;
   * the old listener closes SETTLE_MS later. Anything failing leaves the old app serving.
   */
  private handOver(): void {
    const tls = this.tls;
    const listener = this.listener;
    if (tls === null || listener === undefined || this.closed) return;
    let next: TemplatedApp;
    let files: string;
    let serial: string;
    try {
      checkFiles(tls);
      ({ files, serial } = fingerprint(tls));
      if (files === this.installed) {
        log.info('tls certificates unchanged: the running certificate stays', { certFile: tls.certFile });
        return;
      }
      next = this.uws.SSLApp(appOptions(tls));
      this.installOn(next);
    } catch (err) {
      log.error('tls certificates not installed: the files changed since the reload and are bad now; the previous certificate stays', { error: (err as Error).message });
      return;
    }
    let socket: us_listen_socket | false = false;
    // The callback runs before listen returns.
    (next.listen as unknown as ListenWithOptions).call(next, listener.host, listener.port, LIBUS_LISTEN_DEFAULT, (s) => (socket = s));
    if (socket === false) {
      log.error('tls certificates not installed: cannot open a second listener on the port; the previous certificate stays', { host: listener.host, port: listener.port });
      return;
    }
    const old = this.current;
    const oldSocket = listener.socket;
    this.current = next;
    this.apps = [next, ...this.apps];
    this.listener = { ...listener, socket };
    this.installed = files;
    this.handedOverAt = Date.now();
    this.retiring.add(oldSocket);
    if ((this.openSockets.get(old) ?? 0) === 0) this.retire(old);
    // Both listeners accept for SETTLE_MS (the connections that queued up while the app was
    // made get accepted), then the old one closes right after a poll phase, when its accept
    // queue was just emptied: what is still queued there is reset by the kernel.
    setTimeout(() => {
      setImmediate(() => {
        if (!this.retiring.delete(oldSocket)) return;
        this.uws.us_listen_socket_close(oldSocket);
        log.info('tls certificates installed', { certFile: tls.certFile, serial, liveApps: this.apps.length });
      });
    }, SETTLE_MS).unref();
  }
}
