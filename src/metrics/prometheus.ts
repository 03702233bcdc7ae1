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
import type { AppConfig } from '../config/schema.js';
import { allAppCounters, forgetTenantsExcept, pushPublishes, RATE_LIMIT_NAMES, type RateLimitName } from './node-counters.js';
import { registerHttpMetrics } from './http-metrics.js';
import { NON_PUBLIC_REASONS } from '../net/outbound-guard.js';

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
  /**
   * The configured apps and push instances (after a reload and admin API changes too): their
   * series exist from the start, at 0, and those of the ones gone are dropped.
   */
  configured(): { apps: Iterable<Pick<AppConfig, 'id' | RateLimitName>>; instanceIds: Iterable<string> };
  /** What `herald_build_info` says: Herald's version and the uWebSockets.js build that loaded (uws-native.ts). */
  build: { version: string; uws: string };
  /** Cluster mode only: this node's view of the cluster, read at scrape time. */
  cluster?: () => ClusterFigures;
  /** Cluster mode only: live nodes registered in the cluster (null: Redis did not answer). */
  clusterNodes?: () => Promise<number | null>;
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

/** Push gateways, each exported at 0 per configured instance before its first notification. */
const GATEWAYS = ['apns', 'fcm', 'web'] as const;

/** The configured tenants of one scrape, as sets; the counters of tenants no longer configured are dropped. */
function liveTenants(sources: MetricsSources): { apps: Pick<AppConfig, 'id' | RateLimitName>[]; appIds: Set<string>; instanceIds: Set<string> } {
  const { apps, instanceIds } = sources.configured();
  const list = [...apps];
  const live = { apps: list, appIds: new Set(list.map((a) => a.id)), instanceIds: new Set(instanceIds) };
  forgetTenantsExcept(live.appIds, live.instanceIds);
  return live;
}

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
        const { appIds } = liveTenants(sources);
        for (const appId of appIds) this.set({ app_id: appId }, 0);
        for (const [appId, n] of sources.connections()) if (appIds.has(appId)) this.set({ app_id: appId }, n);
      },
    });
    new Gauge({
      name: 'herald_build_info',
      help: 'Always 1; the labels say which Herald version runs on which Node.js version with which uWebSockets.js module',
      labelNames: ['version', 'node', 'uws'],
      registers: [registry],
      collect() {
        this.set({ version: sources.build.version, node: process.version, uws: sources.build.uws }, 1);
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
          for (const appId of liveTenants(sources).appIds) this.inc({ app_id: appId }, 0);
          for (const [appId, c] of allAppCounters()) if (c[pick] > 0) this.inc({ app_id: appId }, c[pick]);
        },
      });
    };
    perApp('herald_events_triggered_total', 'Events accepted by the channel HTTP API, one per event and channel', 'eventsTriggered');
    perApp('herald_ws_messages_sent_total', 'Channel event frames delivered to sockets (a broadcast to 3 subscribers counts 3)', 'wsMessagesSent');
    perApp('herald_ws_messages_received_total', 'WebSocket frames received from clients', 'wsMessagesReceived');
    new Counter({
      name: 'herald_rate_limited_total',
      help: 'Requests (a refused batch counts once) and new connections refused by a per-app rate limit, by the limit\'s field name',
      labelNames: ['app_id', 'limit'],
      registers: [registry],
      collect() {
        this.reset();
        // At 0 for each limit an app has, so that rate() and alerts see the series before the first refusal.
        for (const app of liveTenants(sources).apps) {
          for (const limit of RATE_LIMIT_NAMES) if (app[limit] !== null) this.inc({ app_id: app.id, limit }, 0);
        }
        for (const [appId, c] of allAppCounters()) {
          for (const [limit, n] of c.rateLimited) this.inc({ app_id: appId, limit }, n);
        }
      },
    });
    new Counter({
      name: 'herald_ws_disconnects_total',
      help: 'WebSocket connections closed, by close code',
      labelNames: ['app_id', 'code'],
      registers: [registry],
      collect() {
        this.reset();
        liveTenants(sources);
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
        for (const instanceId of liveTenants(sources).instanceIds) this.inc({ instance_id: instanceId }, 0);
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
        // Sent at 0 per configured instance and gateway: a fresh node shows a rate of 0, not "no data".
        const { instanceIds } = liveTenants(sources);
        for (const instanceId of instanceIds) for (const gateway of GATEWAYS) this.inc({ instance_id: instanceId, gateway, result: 'sent', reason: '' }, 0);
        const f = await figures();
        if (!f) return;
        for (const shard of f.metrics) {
          for (const n of shard.notifications) {
            if (instanceIds.has(n.instanceId)) this.inc({ instance_id: n.instanceId, gateway: n.gateway, result: n.result, reason: n.reason }, n.count);
          }
        }
      },
    });
    new Gauge({
      name: 'herald_push_publish_records_bytes',
      help: 'Bytes the records of finished publishes hold on this node (counted against pushDelivery.retentionBytes; the oldest go first past it)',
      registers: [registry],
      async collect() {
        const f = await figures();
        this.set(f ? f.metrics.reduce((sum, m) => sum + (m.publishRecordBytes ?? 0), 0) : 0);
      },
    });
    new Gauge({
      name: 'herald_push_purges_pending',
      help: 'Deleted push instances whose records (devices, interests, users, publishes, reports) are still being removed in the background, summed over the shards that purge them',
      registers: [registry],
      async collect() {
        const f = await figures();
        this.set(f ? f.metrics.reduce((sum, m) => sum + (m.pushPurgesPending ?? 0), 0) : 0);
      },
    });
    new Counter({
      name: 'herald_push_publish_resends_total',
      help: 'Notifications this node sent again because the partition holding them was reclaimed from a node whose lease expired (cluster), before their outcome was checkpointed',
      registers: [registry],
      async collect() {
        this.reset();
        const f = await figures();
        this.inc(f ? f.metrics.reduce((sum, m) => sum + (m.publishResends ?? 0), 0) : 0);
      },
    });
    new Counter({
      name: 'herald_outbound_refusals_total',
      help: 'Connections not made because the address is not public (web push endpoints, per-publish webhookUrls), by client and reason',
      labelNames: ['client', 'reason'],
      registers: [registry],
      async collect() {
        this.reset();
        // Every client and reason at 0, so that rate() and alerts see the series before the first refusal.
        for (const client of ['web_push', 'webhook']) for (const reason of NON_PUBLIC_REASONS) this.inc({ client, reason }, 0);
        const f = await figures();
        if (!f) return;
        for (const shard of f.metrics) {
          for (const r of shard.outboundRefusals) this.inc({ client: r.client, reason: r.reason }, r.count);
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
        this.inc({ result: 'ok' }, f ? f.webhooks.requests : 0);
        this.inc({ result: 'failed' }, f ? f.webhooks.failedAttempts : 0);
      },
    });
    new Counter({
      name: 'herald_webhook_events_delivered_total',
      help: 'Webhook events delivered (their request answered 2xx)',
      registers: [registry],
      async collect() {
        this.reset();
        const f = await figures();
        this.inc(f ? f.webhooks.sent : 0);
      },
    });
    new Counter({
      name: 'herald_webhook_dead_letters_total',
      help: 'Webhook events given up on after their last failed attempt (or whose receiver left the config); kept in the dead letters',
      registers: [registry],
      async collect() {
        this.reset();
        const f = await figures();
        this.inc(f ? f.webhooks.deadLettered : 0);
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
    const storage = (pick: (s: NonNullable<ShardMetrics['storage']>) => number) =>
      async function (this: Gauge | Counter): Promise<void> {
        this.reset();
        const f = await figures();
        f?.metrics.forEach((m, shard) => {
          if (m.storage) this.inc({ shard: String(shard), data_dir: m.storage.dataDir }, pick(m.storage));
        });
      };
    new Gauge({
      name: 'herald_storage_full',
      help: '1 while a shard refuses writes because the disk of its data dir is full (reads and deletes go on), else 0',
      labelNames: ['shard', 'data_dir'],
      registers: [registry],
      collect: storage((s) => (s.full ? 1 : 0)),
    });
    new Counter({
      name: 'herald_storage_full_episodes_total',
      help: 'Times a shard found the disk of its data dir full and began refusing writes',
      labelNames: ['shard', 'data_dir'],
      registers: [registry],
      collect: storage((s) => s.episodes),
    });
    new Counter({
      name: 'herald_storage_writes_refused_total',
      help: 'Writes refused (507 STORAGE_FULL) or background writes that failed because the disk of the data dir was full',
      labelNames: ['shard', 'data_dir'],
      registers: [registry],
      collect: storage((s) => s.refusedWrites),
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
      const clusterNodes = sources.clusterNodes;
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
