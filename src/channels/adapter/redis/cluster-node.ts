/**
 * Assembles one node's channel parts on its cluster membership (src/cluster: connections,
 * session, liveness, control messages): shared channel state, the records the liveness reaps
 * and re-registers (session-records.ts) and the delivery bus. The RedisChannelAdapter
 * (redis-adapter.ts) is built on this; tests use it to run several simulated nodes on one Redis.
 * The node starts and closes its cluster with itself.
 */
import type { Redis } from 'ioredis';
import type { Cluster, ControlMessage } from '../../../cluster/cluster.js';
import type { RedisConnections } from '../../../cluster/connection.js';
import { NodeLiveness } from '../../../cluster/liveness.js';
import type { NodeSession } from '../../../cluster/node-session.js';
import { RedisChannelState, type ChannelTransition, type NodeSnapshot } from './channel-state.js';
import { DeliveryBus, type DeliveryHandlers } from './delivery-bus.js';
import { RedisKeys } from './keys.js';
import { ChannelSessionRecords, type RecordedPart } from './session-records.js';

export interface ClusterNodeOptions extends DeliveryHandlers {
  /** What the node has locally (sockets, subscriptions), read at re-registration. */
  snapshot: () => NodeSnapshot;
  /** The node's front-end threads, each recording its own share at a re-registration (several threads). */
  parts?: () => RecordedPart[];
  /** Transitions found by a reap or a re-registration that this node must report. */
  onTransitions: (transitions: ChannelTransition[]) => void;
  /** Overrides for tests: heartbeat and reaper periods (ms). */
  heartbeatIntervalMs?: number;
  reapIntervalMs?: number;
}

/** The part of the delivery bus the channel adapter uses (a front-end thread's relays to the main thread's bus). */
export type NodeBus = Pick<DeliveryBus, 'watch' | 'unwatch' | 'watches' | 'publish' | 'listening' | 'watchedCount'>;

/**
 * What the channel adapter uses of its node: the whole node (ClusterNode), or, on a front-end
 * thread of a node with several, the thread's share of it (thread-node.ts).
 */
export interface ChannelNode {
  readonly nodeId: string;
  readonly keys: RedisKeys;
  readonly state: RedisChannelState;
  /** The connection this side runs its commands on. */
  readonly commands: Redis;
  readonly bus: NodeBus;
  readonly nodeTimeoutMs: number;
  /** Redis is reachable and the node's session registered. */
  readonly registered: boolean;
  /** Registered, and the node receives what the others publish (frames and control messages). */
  readonly available: boolean;
  sendControl(target: 'all' | string, message: ControlMessage): Promise<number>;
  start(readyTimeoutMs?: number): Promise<unknown>;
  stop(deregister?: boolean): Promise<void>;
}

export class ClusterNode implements ChannelNode {
  /** The cluster's connections. */
  readonly connections: RedisConnections;
  readonly keys: RedisKeys;
  readonly session: NodeSession;
  readonly state: RedisChannelState;
  readonly liveness: NodeLiveness;
  readonly bus: DeliveryBus;

  constructor(
    readonly cluster: Cluster,
    options: ClusterNodeOptions,
  ) {
    this.connections = cluster.connections;
    this.keys = new RedisKeys(cluster.keys.prefix);
    this.session = cluster.session;
    const { commands, subscriber } = this.connections;
    this.state = new RedisChannelState(commands, this.keys, this.session);
    const records = new ChannelSessionRecords(commands, this.keys, this.state, { snapshot: options.snapshot, onTransitions: options.onTransitions, ...(options.parts && { parts: options.parts }) });
    this.liveness = new NodeLiveness(commands, this.keys, this.session, records, {
      nodeTimeoutMs: cluster.config.nodeTimeoutMs,
      ...(options.heartbeatIntervalMs !== undefined && { heartbeatIntervalMs: options.heartbeatIntervalMs }),
      ...(options.reapIntervalMs !== undefined && { reapIntervalMs: options.reapIntervalMs }),
    });
    this.bus = new DeliveryBus(commands, subscriber, this.keys, cluster.nodeId, options);
  }

  get nodeId(): string {
    return this.session.nodeId;
  }

  get commands(): Redis {
    return this.connections.commands;
  }

  get nodeTimeoutMs(): number {
    return this.cluster.config.nodeTimeoutMs;
  }

  get registered(): boolean {
    return this.liveness.available;
  }

  get available(): boolean {
    return this.liveness.available && this.bus.listening && this.cluster.listening;
  }

  sendControl(target: 'all' | string, message: ControlMessage): Promise<number> {
    return this.cluster.sendControl(target, message);
  }

  /** Starts the cluster (connects, up to `readyTimeoutMs`), registers the session, starts heartbeats, reaper and bus. */
  async start(readyTimeoutMs = 10_000): Promise<this> {
    await this.cluster.start(readyTimeoutMs);
    await this.liveness.start();
    await this.bus.start();
    return this;
  }

  /**
   * Graceful stop: (with `deregister`, the default) removes this node's
   * session at once, reporting its transitions, then closes the cluster.
   */
  async stop(deregister = true): Promise<void> {
    await this.bus.stop().catch(() => {});
    await this.liveness.stop(deregister).catch(() => {});
    await this.cluster.close();
  }

  /** A crash, for tests: drops the connections without deregistering (others must reap it). */
  crash(): void {
    void this.liveness.stop(false);
    this.cluster.drop();
  }
}
