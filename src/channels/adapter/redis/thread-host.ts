/**
 * The main thread's side of a cluster node served by several front-end threads: the node's
 * membership, liveness and re-registration, its one subscriber connection (the delivery bus)
 * and its reports stay here, on the main thread's RedisChannelAdapter; each thread runs the
 * per-request work on its own command connection (thread-node.ts).
 *
 * - A thread's first subscriber of a channel makes the node listen to it (`busWatch`, answered
 *   once Redis confirmed the SUBSCRIBE), its last one lets it go (`busUnwatch`): the bus counts
 *   the threads as it counts sockets. What the node receives goes into the threads' shared
 *   fan-out, to the threads with subscribers on the topic.
 * - A re-registration asks each thread to record its share under the new session (`RecordedPart`).
 * - The node's availability is written to shared memory every CLUSTER_FLAGS_MS for the threads.
 */
import type { Cluster } from '../../../cluster/cluster.js';
import type { NodeThreads, RedisChannelAdapter } from './redis-adapter.js';
import type { NodeSubscription, Registration } from './channel-state.js';
import type { RecordedPart } from './session-records.js';
import { threadOfHolder } from '../../http-fallback/cluster-directory.js';
import { CLUSTER_FLAGS_MS, ClusterFlags, MARK_SIGNAL, type ThreadClusterInit, type ThreadLink } from './thread-node.js';

/** The front-end threads, as the node sees them (front-end/threads.ts). */
export interface NodeThreadsView {
  /** The links to the threads running now. */
  links(): ThreadLink[];
  /** A notice to one thread. */
  tell(thread: number, type: string, body: unknown): void;
  terminateUser(appId: string, userId: string): Promise<number>;
  /** Every user signed in on some thread. */
  signedIn(): { appId: string; userId: string }[];
}

/** The main thread's producer into the threads' shared fan-out (front-end/fanout.ts). */
export interface SignalSender {
  /** A signal to one thread, after every frame sent before it. */
  signal(thread: number, name: string, message: string): void;
}

/** How long a thread may take to record its share at a re-registration (ms). */
const REGISTER_TIMEOUT_MS = 30_000;

/** Pause before a re-registration a thread failed is made again (ms). */
const REGISTER_RETRY_MS = 1000;

export class ClusterThreadsHost implements NodeThreads {
  private threads: NodeThreadsView | undefined;
  private adapter: RedisChannelAdapter | undefined;
  private readonly flags = new ClusterFlags();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly cluster: Cluster,
    private readonly fanout: SignalSender,
  ) {
    // An HTTP fallback session's relay for the thread holding it (thread-directory.ts).
    cluster.onControl((message, origin) => {
      if (message.type !== 'fallback' || message.to === undefined) return;
      const thread = threadOfHolder(message.to, cluster.nodeId);
      if (thread !== null) this.threads?.tell(thread, 'fallbackRemote', { origin, message: message.data });
    });
  }

  /** The node's adapter is up: its state is shared with the threads from now on. */
  started(adapter: RedisChannelAdapter): void {
    this.adapter = adapter;
    const write = (): void => this.flags.write(adapter.node.registered, adapter.node.available, adapter.node.bus.listening);
    write();
    this.timer = setInterval(write, CLUSTER_FLAGS_MS);
    this.timer.unref();
  }

  /** The threads are running. */
  follow(threads: NodeThreadsView): void {
    this.threads = threads;
  }

  init(): ThreadClusterInit {
    return { nodeId: this.cluster.nodeId, session: this.cluster.session.current, flags: this.flags.buffer };
  }

  /** What a thread asks of the node. */
  serve(_thread: number, link: ThreadLink): void {
    link.on<{ appId: string; channel: string }>('busWatch', ({ appId, channel }) => this.adapter?.threadWatch(appId, channel));
    link.on<{ appId: string; channel: string }>('busUnwatch', ({ appId, channel }) => this.adapter?.threadUnwatch(appId, channel));
    link.on<{ appId: string; channel: string }>('catchUp', ({ appId, channel }) => this.adapter?.threadCatchUp(appId, channel) ?? false);
    link.on<{ session: string }>('sessionGone', ({ session }) => {
      // Once for the node, whichever thread found it first.
      if (this.cluster.session.current === session) this.cluster.session.reportGone();
    });
  }

  parts(): RecordedPart[] {
    return (this.threads?.links() ?? []).map((link) => ({
      register: (session) =>
        link.ask<{ registration: Registration; left: NodeSubscription[] }>('clusterRegister', { session }, [], REGISTER_TIMEOUT_MS).catch((err: unknown) => {
          // The switch fails with it; no reconnect of this thread's connections may follow to
          // retry it (the thread's own connection, or its answer, failed): retried in a second.
          setTimeout(() => {
            if (this.cluster.session.current === session) this.cluster.session.reportGone();
          }, REGISTER_RETRY_MS).unref();
          throw err;
        }),
      settled: () => link.ask<void>('clusterSettled', null, [], REGISTER_TIMEOUT_MS),
      forget: (left) => link.tell('clusterForget', { left }),
    }));
  }

  terminateUser(appId: string, userId: string): Promise<number> {
    return this.threads?.terminateUser(appId, userId) ?? Promise.resolve(0);
  }

  onlineUsers(): { appId: string; userId: string }[] {
    return this.threads?.signedIn() ?? [];
  }

  relayFailures(): number {
    return this.flags.relayFailures;
  }

  mark(thread: number, token: string): void {
    this.fanout.signal(thread, MARK_SIGNAL, token);
  }

  close(): void {
    clearInterval(this.timer);
  }
}
