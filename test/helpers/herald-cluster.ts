/**
 * Several real Herald processes (built dist/src/cli.js) forming one cluster over a private
 * redis-server: each node has its own port and data dir, all share the apps config, the Redis
 * URL and a key prefix no other test uses. Tests kill a node with SIGKILL, and kill Redis and
 * start it again on the same port (an outage).
 */
import { afterEach, onTestFailed } from 'vitest';
import { fileRedisServer } from './file-redis.js';
import { HeraldProcess } from './herald-process.js';
import type PusherServer from 'pusher';
import type { ChannelRecord } from './channel-clients.js';
import { RedisServer } from './redis-server.js';
import { until } from './wait.js';

export interface HeraldClusterOptions {
  /** Nodes to start (2 or 3); default 2. */
  nodes?: number;
  /** The apps every node serves. */
  apps: Record<string, unknown>[];
  /** Other config fields every node gets (webhookDelivery, ...). */
  config?: Record<string, unknown>;
  /** cluster.nodeTimeoutMs; default 2000 (heartbeat every third, reaper every half of it). */
  nodeTimeoutMs?: number;
  /** Shards per node; default 1 (nodes share two cores with the rest of the suite). */
  shards?: number;
  /** The `push` instances of each node, by index; default none. They need `postgresUrl`; then any node serves any instance (give every node the same list, as replicas run). */
  push?: Record<string, unknown>[][];
  /** cluster.postgresUrl of every node (the shared push store); default none. */
  postgresUrl?: string;
  /** Other `cluster` fields of every node (publishLeaseMs, publishPartitions, ...). */
  cluster?: Record<string, unknown>;
  /** Config fields of one node only, by index, over the shared ones (a config that differs). */
  perNode?: (Record<string, unknown> | undefined)[];
  /** Extra environment variables of every node (NODE_EXTRA_CA_CERTS, ...). */
  env?: Record<string, string>;
}

/** Node ids (config `cluster.nodeId`): node-a, node-b, node-c. */
export const NODE_IDS = ['node-a', 'node-b', 'node-c'] as const;

/**
 * HERALD_CLUSTER_TESTS_ONE_PROCESS=1: every "node" is the same process, with no `cluster`
 * block. Checks the tests' own expectations against single-node behaviour (what a cluster must
 * reproduce); tests of Redis or of a node's failure skip themselves then.
 */
export const ONE_PROCESS = process.env.HERALD_CLUSTER_TESTS_ONE_PROCESS === '1';


export class HeraldCluster {
  readonly nodes: HeraldProcess[];

  constructor(
    readonly redis: RedisServer,
    readonly keyPrefix: string,
    readonly options: HeraldClusterOptions,
  ) {
    const count = options.nodes ?? 2;
    if (count < 1 || count > NODE_IDS.length) throw new Error(`1 to ${NODE_IDS.length} nodes, not ${count}`);
    if (ONE_PROCESS) {
      const { cluster: _none, ...single } = this.nodeConfig(NODE_IDS[0]);
      const only = new HeraldProcess({ config: single, shards: options.shards ?? 1, ...(options.env && { env: options.env }) });
      this.nodes = Array.from({ length: count }, () => only);
    } else {
      this.nodes = NODE_IDS.slice(0, count).map((nodeId) => new HeraldProcess({ config: this.nodeConfig(nodeId), shards: options.shards ?? 1, ...(options.env && { env: options.env }) }));
    }
  }

  /** The config file of one node: the shared parts plus its cluster block. */
  nodeConfig(nodeId: string): Record<string, unknown> {
    return {
      ...this.options.config,
      apps: this.options.apps,
      push: this.options.push?.[NODE_IDS.indexOf(nodeId as (typeof NODE_IDS)[number])] ?? [],
      cluster: {
        redisUrl: this.redis.url,
        keyPrefix: this.keyPrefix,
        nodeTimeoutMs: this.nodeTimeoutMs,
        nodeId,
        ...(this.options.postgresUrl !== undefined && { postgresUrl: this.options.postgresUrl }),
        ...this.options.cluster,
      },
      ...this.options.perNode?.[NODE_IDS.indexOf(nodeId as (typeof NODE_IDS)[number])],
    };
  }

  get nodeTimeoutMs(): number {
    return this.options.nodeTimeoutMs ?? 2000;
  }

  get a(): HeraldProcess {
    return this.nodes[0]!;
  }

  get b(): HeraldProcess {
    return this.nodes[1]!;
  }

  get c(): HeraldProcess {
    const node = this.nodes[2];
    if (!node) throw new Error('this cluster has no third node');
    return node;
  }

  /** Starts every node (in parallel); each has joined the cluster once it listens. */
  async start(): Promise<this> {
    await Promise.all([...new Set(this.nodes)].map((n) => n.start()));
    return this;
  }

  /** kill -9 of one node: no deregistration, the others must reap it. */
  async killNode(node: HeraldProcess): Promise<void> {
    await node.kill9();
  }

  /** An outage: redis-server killed with SIGKILL (its data is gone: no persistence). */
  async killRedis(): Promise<void> {
    await this.redis.kill();
  }

  /** Starts redis-server again on the same port, empty. */
  async restartRedis(): Promise<void> {
    await this.redis.start();
  }

  /** The log (stdout) and stderr of every node, labelled (printed when a test fails). */
  logs(): string {
    return this.nodes
      .map((n, i) => `--- ${NODE_IDS[i]} (port ${n.port}) stdout:\n${n.stdout.slice(-6000)}\n--- ${NODE_IDS[i]} stderr:\n${n.stderr.slice(-4000)}`)
      .join('\n');
  }

  /** Kills every node and removes their data dirs. */
  async dispose(): Promise<void> {
    await Promise.allSettled([...new Set(this.nodes)].map((n) => n.dispose()));
  }
}

/** A test file's private redis-server and the clusters its tests start (heraldClusterBed). */
export interface HeraldClusterBed {
  /** The file's redis-server (started before the first test). */
  readonly redis: RedisServer;
  /** Starts a cluster with a key prefix of its own; disposed of after the test that started it. */
  start(options: HeraldClusterOptions): Promise<HeraldCluster>;
  /** The same, nodes not started (the test starts them, `node.start()`). */
  create(options: HeraldClusterOptions): HeraldCluster;
}

/**
 * Registers the hooks of a cluster test file: a private redis-server (free port, never 6379)
 * started before all tests and stopped after them; every cluster a test started is disposed of
 * after that test, and its nodes' stderr printed when the test failed. `name` starts the key
 * prefixes, each test's being unique.
 */
export function heraldClusterBed(name: string): HeraldClusterBed {
  const redis = fileRedisServer();
  const clusters: HeraldCluster[] = [];
  let counter = 0;
  afterEach(async () => {
    await Promise.allSettled(clusters.splice(0).map((c) => c.dispose()));
  });
  return {
    get redis(): RedisServer {
      return redis();
    },
    start(options) {
      return this.create(options).start();
    },
    create(options) {
      const cluster = new HeraldCluster(this.redis, `${name}-${++counter}-${Math.random().toString(36).slice(2, 8)}:`, options);
      clusters.push(cluster);
      try {
        onTestFailed(() => {
          process.stderr.write(`${cluster.logs()}\n`);
        });
      } catch {
        // started outside a test (a hook): no failure report
      }
      return cluster;
    },
  };
}

/**
 * Webhook events with redeliveries left out. Delivery is at least once (a request whose answer
 * came too late, say to a node stalled meanwhile, is sent again with the same event ids), so
 * "once per cluster" means once per distinct event id.
 */
export function distinctEvents<T extends Record<string, unknown>>(events: T[]): T[] {
  const seen = new Set<unknown>();
  return events.filter((e) => {
    if (seen.has(e.id)) return false;
    seen.add(e.id);
    return true;
  });
}

/** A webhook event as `name:channel[:user_id]`, for comparing what a receiver got. */
export function eventLabel(e: Record<string, unknown>): string {
  return `${String(e.name)}:${String(e.channel)}${e.user_id !== undefined ? `:${String(e.user_id)}` : ''}`;
}

/**
 * After a Redis outage or failover: triggers `event` on `channel` through `sdk` (503s and all)
 * until `to`, a subscriber on another node, has received one, giving each attempt 100 ms to
 * arrive before the next; fails after 20 s.
 */
export async function deliveryResumes(sdk: PusherServer, channel: string, to: ChannelRecord, event: string): Promise<void> {
  const arrived = () => to.data(event).length > 0;
  let attempts = 0;
  await until(async () => {
    if (arrived()) return true;
    await sdk.trigger(channel, event, ++attempts).catch(() => undefined);
    return until(arrived, `attempt ${attempts}`, 100).catch(() => false);
  }, () => `delivery of ${event} on ${channel} to resume (${attempts} attempts)`, 20_000);
}
