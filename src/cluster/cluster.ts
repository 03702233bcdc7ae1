/**
 * One node's membership of a cluster: its two Redis connections (connection.ts), its node id
 * and session (node-session.ts), the cluster's members as Redis records them, and the control
 * messages between nodes (`<prefix>ctl` to every node, `<prefix>ctl:<nodeId>` to one, as JSON).
 * The composition root builds it once from the `cluster` config and hands it to the areas that
 * share state through Redis: the channel adapter (channels/adapter/redis, which starts and
 * closes it with the node, and runs the node's liveness, liveness.ts, on the channel state it
 * records under the session), the tenant store, the HTTP fallback's session directory, and the
 * admin overview.
 */
import type { Redis, RedisOptions } from 'ioredis';
import type { ClusterConfig } from '../config/schema.js';
import { log } from '../log.js';
import type { ClusterFigures } from '../metrics/prometheus.js';
import { createRedisConnections, describeRedis, replyTimeoutMs, whenAvailable, type RedisConnections } from './connection.js';
import { ClusterKeys } from './keys.js';
import { NodeSession } from './node-session.js';

/** What a Cluster is built from: the `cluster` config's connection and timing settings. */
export type ClusterSettings = Omit<ClusterConfig, 'publishPartitions' | 'publishLeaseMs' | 'postgresTimeouts' | 'subscriptionWaitMs'>;

export interface ClusterOptions {
  nodeId: string;
  /** Extra TLS options for rediss:// (private CA). */
  tls?: RedisOptions['tls'];
}

/** One registered session of the cluster (Cluster.members). */
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

/** GET /admin/v1/overview's `cluster` (docs/admin-api.md). */
export interface ClusterOverview extends ClusterFigures {
  nodeId: string;
  /** Where Redis is, without any password (connection.ts describeRedis). */
  redis: string;
  keyPrefix: string;
  nodeTimeoutMs: number;
  /** The registered sessions, by node id; null while Redis cannot be read. */
  nodes: ClusterMember[] | null;
  /** Dead sessions being reaped; null while Redis cannot be read. */
  reaping: number | null;
}

/** Messages between nodes over the control channels. */
export type ControlMessage =
  /** Close every connection of this user of the app (C5, terminate_connections). */
  | { type: 'terminateUser'; appId: string; userId: string }
  /** An HTTP fallback session's request relayed to or answered by the node holding it (channels/http-fallback); `to`: the holder, a front-end thread of the node with several. */
  | { type: 'fallback'; data: unknown; to?: string }
  /** An app or push instance changed through the admin API of the origin node (src/tenants). */
  | { type: 'tenantChanged'; kind: 'app' | 'push'; id: string }
  /** A recovering join's mark, published to this node's own channel by its history read (channels/adapter/redis/history-seam.ts). */
  | { type: 'historyMark'; token: string };

/** Hears a control message from another node (or from this one, when sent to 'all'). */
export type ControlListener = (message: ControlMessage, origin: string) => void;

/** Publishes a control message from node `origin` to every node ('all', the origin included) or to one node id. */
export function sendControlOn(commands: Redis, keys: ClusterKeys, origin: string, target: 'all' | string, message: ControlMessage): Promise<number> {
  const topic = target === 'all' ? keys.controlAll() : keys.controlNode(target);
  return whenAvailable(() => commands.publish(topic, JSON.stringify({ origin, message })));
}

export class Cluster {
  readonly connections: RedisConnections;
  readonly keys: ClusterKeys;
  readonly session: NodeSession;
  private readonly controlTopics: string[];
  private readonly controlListeners: ControlListener[] = [];
  /** The subscriber connection is up and subscribed to the control channels (see listening). */
  private subscribed = false;
  private readonly onMessage = (topic: string, message: string) => this.dispatch(topic, message);
  private readonly onReady = () => this.resubscribe();
  private readonly onClose = () => {
    this.subscribed = false;
  };

  constructor(
    readonly config: ClusterSettings,
    options: ClusterOptions,
  ) {
    this.connections = createRedisConnections(config, {
      nodeId: options.nodeId,
      replyTimeoutMs: replyTimeoutMs(config.nodeTimeoutMs),
      ...(options.tls && { tls: options.tls }),
    });
    this.keys = new ClusterKeys(config.keyPrefix);
    this.session = new NodeSession(options.nodeId);
    this.controlTopics = [this.keys.controlAll(), this.keys.controlNode(options.nodeId)];
  }

  get nodeId(): string {
    return this.session.nodeId;
  }

  /** Connects (up to `readyTimeoutMs`) and listens to the control channels. */
  async start(readyTimeoutMs = 10_000): Promise<this> {
    await this.connections.ready(readyTimeoutMs, { failFast: true });
    await warnIfEvicting(this.connections.commands);
    const { subscriber } = this.connections;
    subscriber.on('message', this.onMessage);
    subscriber.on('ready', this.onReady);
    subscriber.on('close', this.onClose);
    await whenAvailable(() => subscriber.subscribe(...this.controlTopics));
    this.subscribed = true;
    return this;
  }

  /** True while this node receives control messages: false from a drop of the subscriber connection until it is subscribed again. */
  get listening(): boolean {
    return this.subscribed && this.connections.subscriber.status === 'ready';
  }

  async close(): Promise<void> {
    this.stopListening();
    await this.connections.close();
  }

  /** A crash, for tests: drops the connections at once. */
  drop(): void {
    this.stopListening();
    this.connections.drop();
  }

  /** Sends a control message to every node ('all', this one included) or to one node id. */
  sendControl(target: 'all' | string, message: ControlMessage): Promise<number> {
    return sendControlOn(this.connections.commands, this.keys, this.nodeId, target, message);
  }

  /** Adds a listener of the control messages this node receives. */
  onControl(listener: ControlListener): void {
    this.controlListeners.push(listener);
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

  /**
   * The cluster as this node sees it, for the admin overview, with the channel adapter's
   * figures: always answers, also during an outage (then `nodes` and `reaping` are null).
   */
  async overview(figures: ClusterFigures): Promise<ClusterOverview> {
    const members = await this.members().catch(() => null);
    return {
      nodeId: this.nodeId,
      redis: describeRedis(this.config),
      keyPrefix: this.config.keyPrefix,
      nodeTimeoutMs: this.config.nodeTimeoutMs,
      ...figures,
      nodes: members?.nodes ?? null,
      reaping: members?.reaping ?? null,
    };
  }

  private stopListening(): void {
    const { subscriber } = this.connections;
    subscriber.off('message', this.onMessage);
    subscriber.off('ready', this.onReady);
    subscriber.off('close', this.onClose);
    this.subscribed = false;
  }

  private resubscribe(): void {
    this.connections.subscriber.subscribe(...this.controlTopics).then(
      () => {
        this.subscribed = true;
      },
      (err: unknown) => {
        log.warn('cluster: re-subscribing after reconnect failed; retried on the next reconnect', { error: String(err) });
      },
    );
  }

  private dispatch(topic: string, message: string): void {
    if (!this.controlTopics.includes(topic)) return;
    let parsed: { origin: string; message: ControlMessage };
    try {
      parsed = JSON.parse(message) as { origin: string; message: ControlMessage };
    } catch (err) {
      log.error('cluster: unreadable control message', { topic, error: String(err) });
      return;
    }
    for (const listener of this.controlListeners) {
      try {
        listener(parsed.message, parsed.origin);
      } catch (err) {
        log.error('cluster: control message handler failed', { topic, error: String(err) });
      }
    }
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
