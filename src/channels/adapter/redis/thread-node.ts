/**
 * A front-end thread's share of its cluster node (several front-end threads): the process stays
 * one node, whose membership, liveness, subscriber connection and reports are the main thread's.
 * The thread runs the channel adapter's per-request work on its own command connection, under
 * the node's id and session: joins and leaves, publishes to the other nodes, admissions, rate
 * counters. It listens to a channel through the main thread's delivery bus (one SUBSCRIBE per
 * channel for the node, whatever the threads), which relays what other nodes publish into the
 * threads' shared fan-out; a frame a thread publishes comes back to the node's sockets the same
 * way, in the order Redis took it.
 *
 * The main thread writes its availability to shared memory (`ClusterFlags`) for the threads to
 * read without asking.
 */
import type { Redis } from 'ioredis';
import type { ClusterSettings, ControlMessage } from '../../../cluster/cluster.js';
import { sendControlOn } from '../../../cluster/cluster.js';
import { createCommandConnection, replyTimeoutMs } from '../../../cluster/connection.js';
import { ClusterKeys } from '../../../cluster/keys.js';
import { NodeSession } from '../../../cluster/node-session.js';
import { RedisChannelState } from './channel-state.js';
import type { ChannelNode, NodeBus } from './cluster-node.js';
import { publishOnBus } from './delivery-bus.js';
import { RedisKeys } from './keys.js';

/** The control link between a front-end thread and the main thread (front-end/control.ts), as used here. */
export interface ThreadLink {
  on<T>(type: string, handler: (body: T) => unknown): void;
  ask<R>(type: string, body?: unknown, transfer?: readonly never[], timeoutMs?: number): Promise<R>;
  tell(type: string, body?: unknown): void;
}

/** The fan-out signal that carries a recovering join's mark to its thread. */
export const MARK_SIGNAL = 'mark';

/** What a front-end thread of a cluster node is started with. */
export interface ThreadClusterInit {
  nodeId: string;
  /** The node's session when the thread starts. */
  session: string;
  /** ClusterFlags' buffer. */
  flags: SharedArrayBuffer;
}

const REGISTERED = 0;
const AVAILABLE = 1;
const LISTENING = 2;
/** Frames the threads could not relay to the other nodes (the node's herald_cluster_relay_failures_total). */
const RELAY_FAILURES = 3;

/** The main thread's cluster state, shared with its front-end threads. */
export class ClusterFlags {
  private readonly cells: Int32Array;

  constructor(readonly buffer: SharedArrayBuffer = new SharedArrayBuffer(4 * 4)) {
    this.cells = new Int32Array(buffer);
  }

  /** Main: the node's registration, availability and whether its subscriber listens, now. */
  write(registered: boolean, available: boolean, listening: boolean): void {
    Atomics.store(this.cells, REGISTERED, registered ? 1 : 0);
    Atomics.store(this.cells, AVAILABLE, available ? 1 : 0);
    Atomics.store(this.cells, LISTENING, listening ? 1 : 0);
  }

  get registered(): boolean {
    return Atomics.load(this.cells, REGISTERED) === 1;
  }

  get available(): boolean {
    return Atomics.load(this.cells, AVAILABLE) === 1;
  }

  get listening(): boolean {
    return Atomics.load(this.cells, LISTENING) === 1;
  }

  /** A thread: a frame it could not relay. */
  relayFailed(): void {
    Atomics.add(this.cells, RELAY_FAILURES, 1);
  }

  /** Main: the frames the threads could not relay, so far. */
  get relayFailures(): number {
    return Atomics.load(this.cells, RELAY_FAILURES);
  }
}

/** How often the main thread writes its cluster state for the threads (ms). */
export const CLUSTER_FLAGS_MS = 20;

/** The main thread's bus, reached over the control link; channels counted here so that only this thread's first and last subscriber of one cross it. */
class RelayedBus implements NodeBus {
  private readonly watched = new Map<string, { count: number; confirmed: Promise<void> }>();

  constructor(
    private readonly commands: Redis,
    private readonly keys: RedisKeys,
    private readonly origin: string,
    private readonly link: ThreadLink,
    private readonly flags: ClusterFlags,
  ) {}

  watch(appId: string, channel: string): Promise<void> {
    const key = `${appId}\u0000${channel}`;
    const seen = this.watched.get(key);
    if (seen) {
      seen.count++;
      return seen.confirmed;
    }
    // Not listening (the link failed: the thread is ending) is what a dropped subscriber connection means too.
    const confirmed = this.link.ask<void>('busWatch', { appId, channel }).catch(() => {});
    this.watched.set(key, { count: 1, confirmed });
    return confirmed;
  }

  unwatch(appId: string, channel: string): void {
    const key = `${appId}\u0000${channel}`;
    const seen = this.watched.get(key);
    if (!seen) return;
    if (--seen.count > 0) return;
    this.watched.delete(key);
    this.link.tell('busUnwatch', { appId, channel });
  }

  watches(appId: string, channel: string): boolean {
    return this.watched.has(`${appId}\u0000${channel}`);
  }

  watchedCount(): number {
    return this.watched.size;
  }

  get listening(): boolean {
    return this.flags.listening;
  }

  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): Promise<number> {
    return publishOnBus(this.commands, this.keys, this.origin, appId, channel, frame, exceptSocketId);
  }
}

export class ThreadNode implements ChannelNode {
  readonly keys: RedisKeys;
  readonly state: RedisChannelState;
  readonly commands: Redis;
  readonly bus: RelayedBus;
  private readonly session: NodeSession;
  private readonly controlKeys: ClusterKeys;
  private readonly connection: ReturnType<typeof createCommandConnection>;
  private readonly flags: ClusterFlags;

  constructor(
    private readonly settings: ClusterSettings,
    init: ThreadClusterInit,
    thread: number,
    link: ThreadLink,
  ) {
    this.flags = new ClusterFlags(init.flags);
    this.connection = createCommandConnection(settings, { nodeId: `${init.nodeId}-t${thread}`, replyTimeoutMs: replyTimeoutMs(settings.nodeTimeoutMs) });
    this.commands = this.connection.commands;
    this.keys = new RedisKeys(settings.keyPrefix);
    this.controlKeys = new ClusterKeys(settings.keyPrefix);
    this.session = new NodeSession(init.nodeId);
    this.session.adopt(init.session);
    // A script found the session gone: the main thread re-registers the node (once for all threads).
    this.session.onGone(() => link.tell('sessionGone', { session: this.session.current }));
    // Back after a drop of this thread's connection: what failed meanwhile (a socket's
    // disconnect, a join) is set right by re-registering the node, as after a drop of main's.
    let connected = false;
    this.connection.commands.on('ready', () => {
      if (connected) this.session.reportGone();
      connected = true;
    });
    this.state = new RedisChannelState(this.commands, this.keys, this.session);
    // Not the node id: the node's subscriber brings this thread's frames back to every thread.
    this.bus = new RelayedBus(this.commands, this.keys, `${init.nodeId}/t${thread}`, link, this.flags);
  }

  get nodeId(): string {
    return this.session.nodeId;
  }

  get nodeTimeoutMs(): number {
    return this.settings.nodeTimeoutMs;
  }

  get registered(): boolean {
    return this.flags.registered && this.commands.status === 'ready';
  }

  get available(): boolean {
    return this.flags.available && this.commands.status === 'ready';
  }

  /** A frame this thread could not relay to the other nodes: counted for the node. */
  relayFailed(): void {
    this.flags.relayFailed();
  }

  /** Takes the session the main thread switched the node to. */
  adopt(session: string): void {
    this.session.adopt(session);
  }

  /** `origin`: who answers are for (a fallback session's relay names this thread). */
  sendControl(target: 'all' | string, message: ControlMessage, origin = this.nodeId): Promise<number> {
    return sendControlOn(this.commands, this.controlKeys, origin, target, message);
  }

  async start(readyTimeoutMs = 10_000): Promise<void> {
    await this.connection.ready(readyTimeoutMs);
  }

  /** Closes the connection; the node's session is the main thread's to end. */
  async stop(): Promise<void> {
    await this.connection.close();
  }
}
