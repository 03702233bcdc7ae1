/**
 * GET /metrics in the Prometheus text format (prom-client): this node's figures, summed over
 * its shards. The main thread's counters are plain numbers (node-counters.ts) turned into
 * series when scraped; shard figures are asked for at scrape time (`webhooks.stats`,
 * `core.metrics`), so counting costs the hot paths nothing beyond an increment.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { CoreShardApi } from '../shards/messages.js';
import type { ShardRequester } from '../shards/requester.js';
import type { WebhooksClient, WebhookStatsReport } from '../webhooks/client.js';
import type { ShardMetrics } from '../shards/shard-metrics.js';
import { allAppCounters, pushPublishes } from './node-counters.js';
import { registerHttpMetrics } from './http-metrics.js';

/** The shard pool's own load figures (ShardPool has them). */
export interface ShardLoad {
  readonly shardCount: number;
  /** Requests sent to the shard and not settled yet. */
  inFlightCount(shard: number): number;
  /** Worker deaths (and replacements) since start, over every shard. */
  readonly restarts: number;
}

export interface MetricsSources {
  /** The shards' core requests (`core.metrics`). */
  core: ShardRequester<CoreShardApi>;
  /** Webhook delivery counters, summed over the shards. */
  webhooks: WebhooksClient;
  load: ShardLoad;
  /** Open WebSocket connections per app id. */
  connections(): ReadonlyMap<string, number>;
  /** Cluster mode only: this node's view of the cluster, read at scrape time. */
  cluster?: () => ClusterFigures;
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

/** What one scrape asked of the shards; null when a shard did not answer in time. */
interface ShardFigures {
  webhooks: WebhookStatsReport['total'];
  metrics: ShardMetrics[];
}

/** How long a scrape waits for the shards (ms). */
const SHARD_TIMEOUT_MS = 2000;

export class HeraldMetrics {
  readonly registry = new Registry();
  private scrape: Promise<ShardFigures | null> | undefined;

  constructor(private readonly sources: MetricsSources) {
    const registry = this.registry;
    collectDefaultMetrics({ register: registry });
    registerHttpMetrics(registry);
    new Gauge({
      name: 'herald_connections',
      help: 'Open WebSocket connections',
      labelNames: ['app_id'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [appId, n] of sources.connections()) this.set({ app_id: appId }, n);
      },
    });
    const perApp = (name: string, help: string, pick: 'eventsTriggered' | 'wsMessagesSent' | 'wsMessagesReceived'): void => {
      new Counter({
        name,
        help,
        labelNames: ['app_id'],
        registers: [registry],
        collect() {
          this.reset();
          for (const [appId, c] of allAppCounters()) if (c[pick] > 0) this.inc({ app_id: appId }, c[pick]);
        },
      });
    };
    perApp('herald_events_triggered_total', 'Events accepted by the channel HTTP API, one per event and channel', 'eventsTriggered');
    perApp('herald_ws_messages_sent_total', 'Channel event frames delivered to sockets (a broadcast to 3 subscribers counts 3)', 'wsMessagesSent');
    perApp('herald_ws_messages_received_total', 'WebSocket frames received from clients', 'wsMessagesReceived');
    new Counter({
      name: 'herald_ws_disconnects_total',
      help: 'WebSocket connections closed, by close code',
      labelNames: ['app_id', 'code'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [appId, c] of allAppCounters()) {
          for (const [code, n] of c.disconnects) this.inc({ app_id: appId, code: String(code) }, n);
        }
      },
    });
    new Counter({
      name: 'herald_push_publishes_total',
      help: 'Push publishes accepted (publish API), per instance',
      labelNames: ['instance_id'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [instanceId, n] of pushPublishes) this.inc({ instance_id: instanceId }, n);
      },
    });
    const figures = (): Promise<ShardFigures | null> => this.shardFigures();
    new Counter({
      name: 'herald_push_notifications_total',
      help: 'Push notifications handled by the gateways, by result (sent, failed, removed) and failure reason',
      labelNames: ['instance_id', 'gateway', 'result', 'reason'],
      registers: [registry],
      async collect() {
        this.reset();
        const f = await figures();
        if (!f) return;
        for (const shard of f.metrics) {
          for (const n of shard.notifications) {
            this.inc({ instance_id: n.instanceId, gateway: n.gateway, result: n.result, reason: n.reason }, n.count);
          }
        }
      },
    });
    new Counter({
      name: 'herald_webhook_requests_total',
      help: 'Webhook requests made, by result (ok: answered 2xx; failed: non-2xx, timeout or network error)',
      labelNames: ['result'],
      registers: [registry],
      async collect() {
        this.reset();
        const f = await figures();
        if (!f) return;
        this.inc({ result: 'ok' }, f.webhooks.requests);
        this.inc({ result: 'failed' }, f.webhooks.failedAttempts);
      },
    });
    new Gauge({
      name: 'herald_webhook_pending',
      help: 'Webhook events waiting to be delivered',
      registers: [registry],
      async collect() {
        const f = await figures();
        this.set(f ? f.webhooks.pending : 0);
      },
    });
    new Gauge({
      name: 'herald_shard_queue_depth',
      help: 'Requests sent to a shard and not answered yet',
      labelNames: ['shard'],
      registers: [registry],
      collect() {
        for (let i = 0; i < sources.load.shardCount; i++) this.set({ shard: String(i) }, sources.load.inFlightCount(i));
      },
    });
    new Counter({
      name: 'herald_shard_restarts_total',
      help: 'Shard workers that died and were replaced',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(sources.load.restarts);
      },
    });
    const cluster = sources.cluster;
    if (cluster) {
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
      new Gauge({
        name: 'herald_cluster_watched_channels',
        help: 'Channels this node receives from the other nodes over Redis pub/sub (it has subscribers on them)',
        registers: [registry],
        collect() {
          this.set(cluster().watchedChannels);
        },
      });
    }
  }

  /** The exposition text. */
  async render(): Promise<string> {
    try {
      return await this.registry.metrics();
    } finally {
      this.scrape = undefined;
    }
  }

  get contentType(): string {
    return this.registry.contentType;
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
