/**
 * The main thread's side of several front-end threads: it starts them (each gets its ports to
 * the shards, the shared counters and fan-out buffers, and a relay for the control plane's
 * routes), keeps what spans them (the user directory, the fallback session table), hands them
 * every tenant change and reload, drains them on shutdown, and watches them: a thread that dies
 * ends the process cleanly (its connections are dropped from the shards first), for the
 * supervisor to restart it.
 */
import { MessageChannel, Worker, type MessagePort } from 'node:worker_threads';
import { fileURLToPath } from 'node:url';
import type { HeraldConfig } from '../config/schema.js';
import type { TenantChange } from '../shards/context.js';
import type { Route } from '../http/router.js';
import type { DebugHub } from '../admin/debug-hub.js';
import type { PublishJob } from '../push/messages/publishes.js';
import { describeError, log } from '../log.js';
import { ControlLink } from './control.js';
import { UserDirectory } from './user-directory.js';
import { ThreadSessionTable } from './thread-directory.js';
import { relaySpecs, serveRelayedRoutes } from './route-relay.js';
import type { SharedCounters } from './shared-counters.js';
import { detachFanoutThread, type FanoutInit } from './fanout.js';
import type { FrontEndThreadData } from './thread-data.js';
import type { NodeThreadsView, ThreadClusterInit } from '../channels/adapter/open-adapter.js';
import type { TapTotals } from './thread-tap.js';
import type { FallbackRelay } from '../channels/http-fallback/directory.js';
import type { NodeCountersSnapshot } from '../metrics/counters-snapshot.js';
import { serveRelayedStreams } from '../admin/stream-relay.js';
import type { StreamRequest, StreamSink } from '../admin/stream.js';

const THREAD_FILE = fileURLToPath(new URL('./thread.js', import.meta.url));

/** How long the threads have to close their apps and end at shutdown (ms). */
const EXIT_TIMEOUT_MS = 5000;

/** How long a scrape waits for a thread's counters (ms). */
const COUNTERS_TIMEOUT_MS = 2000;

/** How long a thread may take to start listening (ms). */
const START_TIMEOUT_MS = 30_000;

export interface FrontEndThreadsDeps {
  config: Readonly<HeraldConfig>;
  dataDir: string;
  port: number;
  installSecret: string;
  /** Ports to every shard for a thread (shards/pool.ts), and new ones when a shard worker is replaced. */
  attach(thread: number): Promise<MessagePort[]>;
  counters: SharedCounters;
  fanout: FanoutInit;
  /** The control plane's routes, served here for every thread. */
  controlPlane: readonly Route[];
  /** Opens the admin API's live stream for a thread's client (absent: no admin API). */
  openStream?: (request: StreamRequest, sink: StreamSink) => void;
  hub: DebugHub;
  /** Tells watchers of a user, on every thread, that it came online or went offline. */
  presence(appId: string, userId: string, online: boolean): void;
  /** A cluster node's share for its threads (channels/adapter/redis/thread-host.ts): what each starts with, and the requests it serves. */
  cluster?: { init(): ThreadClusterInit; serve(thread: number, link: ControlLink): void };
  /** A thread died: the process ends (server.ts stops the rest). */
  died(thread: number, error: string): void;
}

interface Running {
  worker: Worker;
  link: ControlLink;
  stopRelay: () => void;
  exited: Promise<void>;
}

export class FrontEndThreads implements NodeThreadsView {
  private readonly threads: Running[] = [];
  readonly users: UserDirectory;
  private readonly sessions = new ThreadSessionTable();
  private stopping = false;
  private readonly dead = new Set<number>();

  private constructor(private readonly deps: FrontEndThreadsDeps) {
    this.users = new UserDirectory({ presence: deps.presence });
  }

  /** Starts `config.frontEndThreads` threads; resolves once each listens, or rejects (those started are ended). */
  static async start(deps: FrontEndThreadsDeps): Promise<FrontEndThreads> {
    const threads = new FrontEndThreads(deps);
    try {
      for (let t = 0; t < deps.config.frontEndThreads; t++) await threads.startOne(t);
    } catch (err) {
      await threads.exit();
      throw err;
    }
    return threads;
  }

  get count(): number {
    return this.threads.length;
  }

  /** A shard worker was replaced: the thread gets its new port to it. */
  shardPort(thread: number, shard: number, port: MessagePort): void {
    this.threads[thread]?.link.tell('shardPort', { shard, port }, [port]);
  }

  private async startOne(t: number): Promise<void> {
    const { config } = this.deps;
    const shardPorts = await this.deps.attach(t);
    const relay = new MessageChannel();
    const stopRoutes = serveRelayedRoutes(relay.port1, this.deps.controlPlane);
    const openStream = this.deps.openStream;
    const stopStreams = openStream ? serveRelayedStreams(relay.port1, openStream) : () => {};
    const stopRelay = (): void => {
      stopRoutes();
      stopStreams();
      relay.port1.close();
    };
    const data: FrontEndThreadData = {
      thread: t,
      threads: config.frontEndThreads,
      config: config as HeraldConfig,
      dataDir: this.deps.dataDir,
      port: this.deps.port,
      installSecret: this.deps.installSecret,
      shardPorts,
      counters: this.deps.counters.init,
      slots: config.apps.map((a) => [a.id, this.deps.counters.assignSlot(a.id)]),
      fanout: this.deps.fanout,
      relaySpecs: relaySpecs(this.deps.controlPlane),
      relayPort: relay.port2,
      adminStream: openStream !== undefined,
      ...(this.deps.cluster && { cluster: this.deps.cluster.init() }),
    };
    const worker = new Worker(THREAD_FILE, { workerData: data, transferList: [...shardPorts, relay.port2] });
    const link = new ControlLink(worker, config.shardRequestTimeoutMs);
    const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
    const running: Running = { worker, link, stopRelay, exited };
    this.threads[t] = running;
    this.serve(t, link);
    this.deps.cluster?.serve(t, link);
    const listening = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`front-end thread ${t} did not start within ${START_TIMEOUT_MS} ms`)), START_TIMEOUT_MS);
      link.on('listening', () => {
        clearTimeout(timer);
        resolve();
      });
      link.on<{ error: string }>('dying', ({ error }) => {
        clearTimeout(timer);
        reject(new Error(`front-end thread ${t} failed: ${error}`));
        this.lost(t, error);
      });
      worker.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
        this.lost(t, describeError(err));
      });
      worker.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`front-end thread ${t} exited with code ${code}`));
        link.close(`front-end thread ${t} exited`);
        if (!this.stopping) this.lost(t, `exited with code ${code}`);
      });
    });
    await listening;
  }

  /** What the thread asks of the main thread. */
  private serve(t: number, link: ControlLink): void {
    link.on<{ appId: string; userId: string; online: boolean }>('userPresence', ({ appId, userId, online }) => this.users.reported(t, appId, userId, online));
    link.on<{ appId: string; userIds: string[] }>('online', ({ appId, userIds }) => this.users.online(appId, userIds));
    link.on<{ appId: string; userId: string }>('terminateUser', ({ appId, userId }) => this.terminateUser(appId, userId));
    link.on<{ id: string }>('fallbackOwner', ({ id }) => this.sessions.owner(id));
    link.on<{ id: string; ttlMs: number }>('fallbackClaim', ({ id, ttlMs }) => this.sessions.claim(t, id, ttlMs));
    link.on<{ id: string }>('fallbackRelease', ({ id }) => this.sessions.release(t, id));
    link.on<{ to: number; message: FallbackRelay }>('fallbackRelay', ({ to, message }) => this.threads[to]?.link.tell('fallbackRelay', { from: t, message }));
    link.on<TapTotals>('tapTotals', (totals) => this.deps.hub.threadReported(t, totals));
    link.on<PublishJob>('publishAccepted', (job) => this.deps.hub.publishAccepted(job));
  }

  /** Every user signed in on some thread. */
  signedIn(): { appId: string; userId: string }[] {
    return this.users.signedIn();
  }

  /** A notice to thread `thread`, if it runs. */
  tell(thread: number, type: string, body: unknown): void {
    if (!this.dead.has(thread)) this.threads[thread]?.link.tell(type, body);
  }

  /** The links to the threads running now. */
  links(): ControlLink[] {
    return this.threads.filter((r, t) => r && !this.dead.has(t)).map((r) => r.link);
  }

  /** A thread is gone while the process runs: what it held is let go, and the process ends. */
  private lost(t: number, error: string): void {
    if (this.stopping || this.dead.has(t)) return;
    this.dead.add(t);
    log.error('front-end thread died: ending the process (its connections were dropped; the others are closed with 4200)', { thread: t, error });
    this.users.dropThread(t);
    this.sessions.dropThread(t);
    this.deps.counters.dropThread(t);
    // Producers stop addressing frames to it and waiting for it to read them.
    detachFanoutThread(this.deps.fanout, t);
    this.deps.died(t, error);
  }

  /** Closes the user's connections on every thread holding one; answers how many. */
  async terminateUser(appId: string, userId: string): Promise<number> {
    const closed = await Promise.all(this.users.threadsOf(appId, userId).map((t) => this.threads[t]?.link.ask<number>('terminateUser', { appId, userId }) ?? 0));
    return closed.reduce((a, b) => a + b, 0);
  }

  /** Every thread takes a tenant change (after the shards did); resolves once each has, with how many connections they closed. */
  async applyTenants(change: TenantChange, config: Readonly<HeraldConfig> | undefined): Promise<number> {
    const slots = (change.apps ?? []).map((a) => [a.id, this.deps.counters.assignSlot(a.id)]);
    const closed = await this.askAll<number>('tenants', { change, config, slots });
    // The threads closed the removed apps' sockets and forgot their slots.
    for (const appId of change.removedApps ?? []) this.deps.counters.releaseSlot(appId);
    return closed.reduce((a, b) => a + b, 0);
  }

  /**
   * Every thread takes a reloaded config (log level, settings read live, certificates). A thread
   * that cannot does not hold the others back: answers what was not applied, one line per thread
   * (its certificate files turned bad after the main thread checked them, or it did not answer).
   */
  async reload(config: Readonly<HeraldConfig>): Promise<string[]> {
    const live = this.threads.flatMap((r, t) => (this.dead.has(t) ? [] : [{ t, answer: r.link.ask<string | null>('reload', { config }) }]));
    const notApplied: string[] = [];
    for (const { t, answer } of live) {
      await answer.then(
        (refused) => {
          if (refused !== null) notApplied.push(`front-end thread ${t} kept its certificate: ${refused}`);
        },
        (err: unknown) => notApplied.push(`front-end thread ${t} did not take the new config: ${err instanceof Error ? err.message : String(err)}`),
      );
    }
    return notApplied;
  }

  /** Each thread's counters of the hot paths (metrics). */
  gatherCounters(): Promise<NodeCountersSnapshot[]> {
    // A thread that does not answer within 2 s is left out of this scrape.
    const asked = this.threads.filter((_, t) => !this.dead.has(t)).map((r) => r.link.ask<NodeCountersSnapshot>('counters', null, [], COUNTERS_TIMEOUT_MS));
    return Promise.allSettled(asked).then((all) => all.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : [])));
  }

  /** Shutdown, step 1: no new connections, every connection closed with 4200, requests answered (until the deadline). */
  async drain(deadline: number): Promise<void> {
    this.stopping = true;
    const left = await Promise.allSettled(this.threads.map((r) => r.link.ask<{ inFlight: number; connections: number }>('drain', { deadline }, [], Math.max(1000, deadline - Date.now() + 1000))));
    for (const [t, a] of left.entries()) {
      if (a.status === 'fulfilled' && (a.value.inFlight > 0 || a.value.connections > 0)) log.warn('shutdown: a front-end thread had requests or connections left at the deadline', { thread: t, ...a.value });
    }
  }

  /** Shutdown, last step: the threads close their apps and end. */
  async exit(): Promise<void> {
    this.stopping = true;
    for (const r of this.threads) {
      if (!r) continue;
      r.link.tell('exit');
      r.stopRelay();
    }
    // A thread that does not end in time is left to the process' exit.
    const late = new Promise<void>((resolve) => setTimeout(resolve, EXIT_TIMEOUT_MS).unref());
    await Promise.race([Promise.all(this.threads.filter(Boolean).map((r) => r.exited)), late]);
  }

  private async askAll<R>(type: string, body: unknown): Promise<R[]> {
    return Promise.all(this.threads.filter((_, t) => !this.dead.has(t)).map((r) => r.link.ask<R>(type, body)));
  }
}
