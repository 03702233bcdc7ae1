/**
 * This node's own figures, counted by the threads that serve the sockets and requests
 * (node-counters.ts, summed over the threads at scrape: counters-snapshot.ts), the socket
 * registry and the build: connections, channel traffic and refusals per app, publishes
 * accepted per push instance, the front-end threads, and herald_build_info. Each configured
 * app and instance has its series from the start, at 0; those of tenants no longer configured
 * are dropped at the next scrape.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { AppConfig } from '../config/schema.js';
import { snapshotNodeCounters, sumNodeCounters, type NodeCountersSnapshot } from './counters-snapshot.js';
import { forgetTenantsExcept, RATE_LIMIT_NAMES, type RateLimitName } from './node-counters.js';

/** What the node's own series read. */
export interface NodeMetricsSources {
  /** Open WebSocket connections per app id. */
  connections(): ReadonlyMap<string, number>;
  /**
   * The configured apps and push instances (after a reload and admin API changes too): their
   * series exist from the start, at 0, and those of the ones gone are dropped.
   */
  configured(): { apps: Iterable<Pick<AppConfig, 'id' | RateLimitName>>; instanceIds: Iterable<string> };
  /** What `herald_build_info` says: Herald's version and the uWebSockets.js build that loaded (uws-native.ts). */
  build: { version: string; uws: string };
  /**
   * Open WebSocket connections per front-end thread, by thread index; its length is
   * `herald_front_end_threads`. Absent: one thread holding every connection of `connections()`.
   */
  threadConnections?: () => number[];
}

/** The configured tenants of one scrape, as sets; the counters of tenants no longer configured are dropped. */
export function liveTenants(sources: NodeMetricsSources): { apps: Pick<AppConfig, 'id' | RateLimitName>[]; appIds: Set<string>; instanceIds: Set<string> } {
  const { apps, instanceIds } = sources.configured();
  const list = [...apps];
  const live = { apps: list, appIds: new Set(list.map((a) => a.id)), instanceIds: new Set(instanceIds) };
  forgetTenantsExcept(live.appIds, live.instanceIds);
  return live;
}

/** This thread's own counters, of the configured tenants only: what the series read when no other thread counts. */
export function ownCounters(sources: NodeMetricsSources): NodeCountersSnapshot {
  return sumNodeCounters([snapshotNodeCounters()], liveTenants(sources));
}

/**
 * The process's counters: this thread's plus those `gather` brings from the front-end threads
 * (this thread's alone when there is no gather or it fails), of the configured tenants only.
 */
export async function processCounters(sources: NodeMetricsSources, gather?: () => Promise<NodeCountersSnapshot[]>): Promise<NodeCountersSnapshot> {
  if (gather === undefined) return ownCounters(sources);
  const others = await gather().catch(() => []);
  return sumNodeCounters([snapshotNodeCounters(), ...others], liveTenants(sources));
}

/**
 * Registers the node's own series in `registry`. The counters are read from `counters` at each
 * scrape (default: this thread's own); it must leave out tenants no longer configured.
 */
export function registerNodeMetrics(registry: Registry, sources: NodeMetricsSources, counters: () => Promise<NodeCountersSnapshot> = () => Promise.resolve(ownCounters(sources))): void {
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
  const threadConnections = sources.threadConnections ?? ((): number[] => [[...sources.connections().values()].reduce((a, b) => a + b, 0)]);
  new Gauge({
    name: 'herald_front_end_threads',
    help: 'Front-end threads serving the port (WebSocket and HTTP)',
    registers: [registry],
    collect() {
      this.set(threadConnections().length);
    },
  });
  new Gauge({
    name: 'herald_front_end_connections',
    help: 'Open WebSocket connections per front-end thread',
    labelNames: ['thread'],
    registers: [registry],
    collect() {
      this.reset();
      threadConnections().forEach((n, thread) => this.set({ thread: String(thread) }, n));
    },
  });
  const perApp = (name: string, help: string, pick: 'eventsTriggered' | 'wsMessagesSent' | 'wsMessagesReceived'): void => {
    new Counter({
      name,
      help,
      labelNames: ['app_id'],
      registers: [registry],
      async collect() {
        const { apps } = await counters();
        this.reset();
        for (const appId of liveTenants(sources).appIds) this.inc({ app_id: appId }, 0);
        for (const c of apps) if (c[pick] > 0) this.inc({ app_id: c.appId }, c[pick]);
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
    async collect() {
      const { apps } = await counters();
      this.reset();
      // At 0 for each limit an app has, so that rate() and alerts see the series before the first refusal.
      for (const app of liveTenants(sources).apps) {
        for (const limit of RATE_LIMIT_NAMES) if (app[limit] !== null) this.inc({ app_id: app.id, limit }, 0);
      }
      for (const c of apps) {
        for (const [limit, n] of c.rateLimited) this.inc({ app_id: c.appId, limit }, n);
      }
    },
  });
  new Counter({
    name: 'herald_ws_disconnects_total',
    help: 'WebSocket connections closed, by close code',
    labelNames: ['app_id', 'code'],
    registers: [registry],
    async collect() {
      const { apps } = await counters();
      this.reset();
      for (const c of apps) {
        for (const [code, n] of c.disconnects) this.inc({ app_id: c.appId, code: String(code) }, n);
      }
    },
  });
  new Counter({
    name: 'herald_push_publishes_total',
    help: 'Push publishes accepted (publish API), per instance',
    labelNames: ['instance_id'],
    registers: [registry],
    async collect() {
      const { pushPublishes } = await counters();
      this.reset();
      for (const instanceId of liveTenants(sources).instanceIds) this.inc({ instance_id: instanceId }, 0);
      for (const [instanceId, n] of pushPublishes) this.inc({ instance_id: instanceId }, n);
    },
  });
}
