/**
 * GET /metrics in the Prometheus text format (prom-client): this node's figures, summed over
 * its shards. The main thread's counters are plain numbers (node-counters.ts) turned into
 * series when scraped; shard figures are asked for at scrape time (`webhooks.stats`,
 * `core.metrics`), so counting costs the hot paths nothing beyond an increment.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { CoreShardApi } from '../shards/messages.js';
import type { ShardRequester } from '../shards/requester.js';
import type { WebhooksClient } from '../webhooks/client.js';
import type { NodeCountersSnapshot } from './counters-snapshot.js';
import { registerHttpMetrics } from './http-metrics.js';
import { liveTenants, processCounters, registerNodeMetrics, type NodeMetricsSources } from './node-metrics.js';
import { registerShardFigureMetrics, type ShardFigures } from './shard-figure-metrics.js';

/** The shard pool's own load figures (ShardPool has them). */
export interface ShardLoad {
  readonly shardCount: number;
  /** Requests sent to the shard and not settled yet. */
  inFlightCount(shard: number): number;
  /** Worker deaths (and replacements) since start, over every shard. */
  readonly restarts: number;
}

/** Where the node's series come from (server.ts builds it); the node's own counters as in NodeMetricsSources. */
export interface MetricsSources extends NodeMetricsSources {
  /** The shards' core requests (`core.metrics`). */
  core: ShardRequester<CoreShardApi>;
  /** Webhook delivery counters, summed over the shards. */
  webhooks: WebhooksClient;
  load: ShardLoad;
  /** Cluster mode only: this node's view of the cluster, read at scrape time. */
  cluster?: () => ClusterFigures;
  /** Cluster mode only: live nodes registered in the cluster (null: Redis did not answer). */
  clusterNodes?: () => Promise<number | null>;
  /**
   * With front-end threads: their counters (counters-snapshot.ts), asked for once per scrape
   * and added to this thread's own. Resolves within the scrape's time, leaving out a thread that
   * does not answer. Absent: this thread's counters are the node's.
   */
  gather?: () => Promise<NodeCountersSnapshot[]>;
}

/** What a cluster node reports about itself (the Redis adapter). */
export interface ClusterFigures {
  /** Connected to Redis and registered: triggers and channel reads are served. */
  readonly available: boolean;
  /** Frames that could not be relayed to the other nodes (Redis unavailable). */
  readonly relayFailures: number;
  /** Channels this node receives from the other nodes (it has subscribers on them). */
  readonly watchedChannels: number;
}

/** How long a scrape waits for the shards (ms). */
const SHARD_TIMEOUT_MS = 2000;

/**
 * The node's Prometheus registry: the series of each source registered by its own module
 * (http-metrics.ts, node-metrics.ts, shard-figure-metrics.ts, the shard pool's and the
 * cluster's below), in the order the exposition lists them.
 */
export class HeraldMetrics {
  readonly registry = new Registry();
  private scrape: Promise<ShardFigures | null> | undefined;
  private counters: Promise<NodeCountersSnapshot> | undefined;

  constructor(private readonly sources: MetricsSources) {
    const registry = this.registry;
    collectDefaultMetrics({ register: registry });
    const counters = (): Promise<NodeCountersSnapshot> => this.nodeCounters();
    registerHttpMetrics(registry, async () => (await counters()).http);
    registerNodeMetrics(registry, sources, counters);
    registerShardFigureMetrics(registry, () => this.shardFigures(), () => liveTenants(sources).instanceIds);
    registerShardLoadMetrics(registry, sources.load);
    if (sources.cluster) registerClusterMetrics(registry, sources.cluster, sources.clusterNodes);
  }

  /** The exposition text. */
  async render(): Promise<string> {
    try {
      return await this.registry.metrics();
    } finally {
      this.scrape = undefined;
      this.counters = undefined;
    }
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  /** The node's counters, this thread's plus the front-end threads', gathered once per scrape. */
  private nodeCounters(): Promise<NodeCountersSnapshot> {
    this.counters ??= processCounters(this.sources, this.sources.gather);
    return this.counters;
  }

  /** One shard round trip per scrape, shared by every collector that needs it. */
  private shardFigures(): Promise<ShardFigures | null> {
    this.scrape ??= Promise.all([this.sources.webhooks.stats(SHARD_TIMEOUT_MS), this.sources.core.broadcast({ type: 'core.metrics' }, SHARD_TIMEOUT_MS)]).then(
      ([webhooks, metrics]) => ({ webhooks: webhooks.total, metrics }),
      () => null,
    );
    return this.scrape;
  }
}

/** The shard pool's series: requests waiting per shard, worker restarts. */
function registerShardLoadMetrics(registry: Registry, load: ShardLoad): void {
  new Gauge({
    name: 'herald_shard_queue_depth',
    help: 'Requests sent to a shard and not answered yet',
    labelNames: ['shard'],
    registers: [registry],
    collect() {
      for (let i = 0; i < load.shardCount; i++) this.set({ shard: String(i) }, load.inFlightCount(i));
    },
  });
  new Counter({
    name: 'herald_shard_restarts_total',
    help: 'Shard workers that died and were replaced',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(load.restarts);
    },
  });
}

/** Cluster mode's series: this node's view of the cluster. */
function registerClusterMetrics(registry: Registry, cluster: () => ClusterFigures, clusterNodes: MetricsSources['clusterNodes']): void {
  new Gauge({
    name: 'herald_cluster_available',
    help: '1 while this node reaches Redis and is registered in its cluster, 0 during an outage (HTTP API answers 503)',
    registers: [registry],
    collect() {
      this.set(cluster().available ? 1 : 0);
    },
  });
  new Counter({
    name: 'herald_cluster_relay_failures_total',
    help: 'Frames that could not be relayed to the other nodes because Redis was unavailable',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(cluster().relayFailures);
    },
  });
  if (clusterNodes) {
    new Gauge({
      name: 'herald_cluster_nodes',
      help: 'Live nodes registered in the cluster, as this node reads them from Redis (0 while Redis does not answer)',
      registers: [registry],
      async collect() {
        this.set((await clusterNodes().catch(() => null)) ?? 0);
      },
    });
  }
  new Gauge({
    name: 'herald_cluster_watched_channels',
    help: 'Channels this node receives from the other nodes over Redis pub/sub (it has subscribers on them)',
    registers: [registry],
    collect() {
      this.set(cluster().watchedChannels);
    },
  });
}
