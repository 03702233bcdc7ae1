/**
 * Simulated cluster nodes for the Redis building-block tests: each is a real ClusterNode on a
 * Cluster of its own (its own connections and session on the test's redis-server) plus the little local state a Herald
 * node keeps (its sockets and subscriptions), and records of what it was told to report or
 * deliver.
 */
import type { ChannelTransition, ClusterMember, NodeSnapshot } from '../../src/channels/adapter/redis/channel-state.js';
import { ClusterNode } from '../../src/channels/adapter/redis/cluster-node.js';
import { Cluster, type ControlMessage } from '../../src/cluster/cluster.js';
import { afterEach } from 'vitest';
import { fileRedisServer } from './file-redis.js';
import type { RedisServer } from './redis-server.js';

export interface SimulatedNodeOptions {
  redisUrl: string;
  nodeId: string;
  keyPrefix?: string;
  nodeTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  reapIntervalMs?: number;
}

export class SimulatedNode {
  readonly node: ClusterNode;
  readonly transitions: ChannelTransition[] = [];
  readonly frames: { appId: string; channel: string; frame: string; except: string | undefined }[] = [];
  readonly controls: { message: ControlMessage; origin: string }[] = [];
  /** Frames and control messages as they arrived: `frame:<frame>` / `control:<type>`. */
  readonly arrivals: string[] = [];
  /** socketId → appId */
  readonly sockets = new Map<string, string>();
  /** `${socketId}\0${appId}\0${channel}` → subscription */
  readonly subscriptions = new Map<string, NodeSnapshot['subscriptions'][number]>();

  constructor(options: SimulatedNodeOptions) {
    const cluster = new Cluster({ redisUrl: options.redisUrl, keyPrefix: options.keyPrefix ?? 'test:', nodeTimeoutMs: options.nodeTimeoutMs ?? 10_000 }, { nodeId: options.nodeId });
    cluster.onControl((message, origin) => {
      this.controls.push({ message, origin });
      this.arrivals.push(`control:${message.type}`);
    });
    this.node = new ClusterNode(
      cluster,
      {
        snapshot: () => ({
          sockets: [...this.sockets].map(([socketId, appId]) => ({ appId, socketId })),
          subscriptions: [...this.subscriptions.values()],
        }),
        onTransitions: (t) => this.transitions.push(...t),
        onFrame: (appId, channel, frame, except) => {
          this.frames.push({ appId, channel, frame, except });
          this.arrivals.push(`frame:${frame}`);
        },
        ...(options.heartbeatIntervalMs !== undefined && { heartbeatIntervalMs: options.heartbeatIntervalMs }),
        ...(options.reapIntervalMs !== undefined && { reapIntervalMs: options.reapIntervalMs }),
      },
    );
  }

  get state() {
    return this.node.state;
  }

  async start(): Promise<this> {
    await this.node.start();
    return this;
  }

  async connect(appId: string, socketId: string, max: number | null = null) {
    const res = await this.node.state.connect(appId, socketId, max);
    if (res.accepted) this.sockets.set(socketId, appId);
    return res;
  }

  async join(appId: string, channel: string, socketId: string, member?: ClusterMember, maxMembers = 0) {
    const res = await this.node.state.join(appId, channel, socketId, member, maxMembers);
    this.subscriptions.set(`${socketId}\0${appId}\0${channel}`, member ? { appId, channel, socketId, member } : { appId, channel, socketId });
    this.node.bus.watch(appId, channel);
    return res;
  }

  async leave(appId: string, channel: string, socketId: string, debounceMs = 0) {
    if (this.subscriptions.delete(`${socketId}\0${appId}\0${channel}`)) this.node.bus.unwatch(appId, channel);
    return this.node.state.leave(appId, channel, socketId, debounceMs);
  }
}

/** A test file's private redis-server and the simulated nodes its tests start (clusterTestBed). */
export interface ClusterTestBed {
  /** The file's redis-server (started before the first test). */
  readonly redis: RedisServer;
  /** A node on the file's Redis; stopped after the test that made it. */
  node(options: Omit<SimulatedNodeOptions, 'redisUrl'>): SimulatedNode;
  /** A key prefix no other test of the file uses (tests do not see each other's state). */
  prefix(): string;
}

/**
 * Registers the hooks of a Redis test file: a private redis-server started before all tests and
 * stopped after them, and every node a test made stopped after that test.
 */
export function clusterTestBed(prefixLetter: string): ClusterTestBed {
  const redis = fileRedisServer();
  const nodes: SimulatedNode[] = [];
  let counter = 0;
  afterEach(async () => {
    await Promise.allSettled(nodes.splice(0).map((n) => n.node.stop(false)));
  });
  return {
    get redis(): RedisServer {
      return redis();
    },
    node(options) {
      const node = new SimulatedNode({ ...options, redisUrl: this.redis.url });
      nodes.push(node);
      return node;
    },
    prefix: () => `${prefixLetter}${++counter}:`,
  };
}
