/**
 * Assembles one node's cluster parts from the `cluster` config: the two Redis connections, the
 * session, shared channel state, liveness (heartbeat, reaper, re-registration) and the delivery
 * bus. The RedisChannelAdapter (redis-adapter.ts) is built on this; tests use it to
 * run several simulated nodes on one Redis.
 */
import type { ClusterConfig } from '../../../config/schema.js';
import type { Redis, RedisOptions } from 'ioredis';
import { log } from '../../../log.js';
import { RedisChannelState, type ChannelTransition, type NodeSnapshot } from './channel-state.js';
import { createRedisConnections, replyTimeoutMs, whenAvailable, type RedisConnections } from './connection.js';
import { DeliveryBus, type DeliveryHandlers } from './delivery-bus.js';
import { RedisKeys } from './keys.js';
import { NodeLiveness } from './node-liveness.js';
import { NodeSession } from './node-session.js';

export interface ClusterNodeOptions extends DeliveryHandlers {
  nodeId: string;
  /** What the node has locally (sockets, subscriptions), read at re-registration. */
  snapshot: () => NodeSnapshot;
  /** Transitions found by a reap or a re-registration that this node must report. */
  onTransitions: (transitions: ChannelTransition[]) => void;
  /** Overrides for tests: heartbeat and reaper periods (ms). */
  heartbeatIntervalMs?: number;
  reapIntervalMs?: number;
  /** Extra TLS options for rediss:// (private CA). */
  tls?: RedisOptions['tls'];
}

/** One registered session of the cluster (ClusterNode.members). */
export interface ClusterMember {
  nodeId: string;
  session: string;
  /** This node's current session. */
  self: boolean;
  /** Until its heartbeat is overdue (Redis time); negative once silent, until a survivor reaps it. */
  expiresInMs: number;
}

export interface ClusterMembers {
  nodes: ClusterMember[];
  /** Dead sessions claimed by a survivor and being reaped now. */
  reaping: number;
}

export class ClusterNode {
  readonly connections: RedisConnections;
  readonly keys: RedisKeys;
  readonly session: NodeSession;
  readonly state: RedisChannelState;
  readonly liveness: NodeLiveness;
  readonly bus: DeliveryBus;

  constructor(
    readonly config: Omit<ClusterConfig, 'publishPartitions' | 'publishLeaseMs' | 'postgresTimeouts' | 'subscriptionWaitMs'>,
    options: ClusterNodeOptions,
  ) {
    this.connections = createRedisConnections(config, {
      nodeId: options.nodeId,
      replyTimeoutMs: replyTimeoutMs(config.nodeTimeoutMs),
      ...(options.tls && { tls: options.tls }),
    });
    this.keys = new RedisKeys(config.keyPrefix);
    this.session = new NodeSession(options.nodeId);
    const { commands, subscriber } = this.connections;
    this.state = new RedisChannelState(commands, this.keys, this.session);
    const liveness = { nodeTimeoutMs: config.nodeTimeoutMs, snapshot: options.snapshot, onTransitions: options.onTransitions };
    this.liveness = new NodeLiveness(commands, this.keys, this.session, this.state, {
      ...liveness,
      ...(options.heartbeatIntervalMs !== undefined && { heartbeatIntervalMs: options.heartbeatIntervalMs }),
      ...(options.reapIntervalMs !== undefined && { reapIntervalMs: options.reapIntervalMs }),
    });
    this.bus = new DeliveryBus(commands, subscriber, this.keys, options.nodeId, options);
  }

  get nodeId(): string {
    return this.session.nodeId;
  }

  /** Connects (up to `readyTimeoutMs`), registers the session, starts heartbeats, reaper and bus. */
  async start(readyTimeoutMs = 10_000): Promise<this> {
    await this.connections.ready(readyTimeoutMs, { failFast: true });
    await warnIfEvicting(this.connections.commands);
    await this.liveness.start();
    await this.bus.start();
    return this;
  }

  /**
   * Graceful stop: (with `deregister`, the default) removes this node's
   * session at once, reporting its transitions, then closes the connections.
   */
  async stop(deregister = true): Promise<void> {
    await this.bus.stop().catch(() => {});
    await this.liveness.stop(deregister).catch(() => {});
    await this.connections.close();
  }

  /**
   * The cluster's nodes as Redis records them: every registered session with the time left
   * before it would be called dead (negative: silent past nodeTimeoutMs, about to be reaped),
   * and how many dead sessions are being reaped. Sorted by node id. Rejects with
   * RedisUnavailableError during an outage.
   */
  async members(): Promise<ClusterMembers> {
    const redis = this.connections.commands;
    const [time, entries, reaping] = await whenAvailable(() =>
      Promise.all([redis.time(), redis.zrange(this.keys.nodes(), '0', '-1', 'WITHSCORES'), redis.hlen(this.keys.reaping())]),
    );
    const now = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    const me = this.session.current;
    const nodes: ClusterMember[] = [];
    for (let i = 0; i + 1 < entries.length; i += 2) {
      const session = entries[i]!;
      nodes.push({ nodeId: NodeSession.nodeIdOf(session), session, self: session === me, expiresInMs: Number(entries[i + 1]) - now });
    }
    nodes.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
    return { nodes, reaping };
  }

  /** A crash, for tests: drops the connections without deregistering (others must reap it). */
  crash(): void {
    void this.liveness.stop(false);
    this.connections.drop();
  }
}

/**
 * Logs a warning when Redis may evict keys (`maxmemory-policy` other than `noeviction`): an
 * evicted subscription count, member or session would corrupt the cluster's state, where
 * `noeviction` makes writes fail (503, retried) instead. Read from INFO, which managed Redis
 * services allow where CONFIG is disabled; nothing when Redis does not say.
 */
export async function warnIfEvicting(redis: Redis): Promise<void> {
  const info = await redis.info('memory').catch(() => '');
  const policy = /^maxmemory_policy:(\S+)/m.exec(info)?.[1] ?? null;
  if (policy !== null && policy !== 'noeviction') {
    const maxmemory = /^maxmemory:(\d+)/m.exec(info)?.[1] ?? '?';
    log.warn("cluster: Redis may evict Herald's keys under memory pressure, which corrupts shared channel state: set maxmemory-policy noeviction", { maxmemoryPolicy: policy, maxmemory });
  }
}
