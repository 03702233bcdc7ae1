/**
 * The main thread's counters, as plain numbers bumped on the hot paths (one Map lookup and an
 * increment) and read by the Prometheus collectors only when /metrics is scraped.
 */

/** Per-app counters of the channel side. */
export interface AppCounters {
  /** Events accepted by C1/C2, one per event and channel. */
  eventsTriggered: number;
  /** Channel event frames delivered to sockets (a broadcast to 3 subscribers counts 3). */
  wsMessagesSent: number;
  /** Frames received from clients. */
  wsMessagesReceived: number;
  /** Close code → connections closed with it. */
  readonly disconnects: Map<number, number>;
  /** Rate limit (its config field name) → requests, events or connections it refused. */
  readonly rateLimited: Map<RateLimitName, number>;
}

/** The per-app rate limits, by their `apps[]` field names. */
export type RateLimitName = 'maxHttpRequestsPerSecond' | 'maxEventsPerSecond' | 'maxNewConnectionsPerSecond' | 'maxNewConnectionsPerSecondPerIp';

const perApp = new Map<string, AppCounters>();

/** The counters of one app, created on first use. */
export function appCounters(appId: string): AppCounters {
  let counters = perApp.get(appId);
  if (counters === undefined) {
    counters = { eventsTriggered: 0, wsMessagesSent: 0, wsMessagesReceived: 0, disconnects: new Map(), rateLimited: new Map() };
    perApp.set(appId, counters);
  }
  return counters;
}

export function allAppCounters(): ReadonlyMap<string, AppCounters> {
  return perApp;
}

/** Drops the counters of apps and push instances no longer configured (deleted, or removed by a reload). */
export function forgetTenantsExcept(appIds: ReadonlySet<string>, instanceIds: ReadonlySet<string>): void {
  for (const appId of perApp.keys()) if (!appIds.has(appId)) perApp.delete(appId);
  for (const instanceId of pushPublishes.keys()) if (!instanceIds.has(instanceId)) pushPublishes.delete(instanceId);
}

/** Every rate limit name, for the series exported at 0. */
export const RATE_LIMIT_NAMES: readonly RateLimitName[] = ['maxHttpRequestsPerSecond', 'maxEventsPerSecond', 'maxNewConnectionsPerSecond', 'maxNewConnectionsPerSecondPerIp'];

export function countDisconnect(appId: string, code: number): void {
  const map = appCounters(appId).disconnects;
  map.set(code, (map.get(code) ?? 0) + 1);
}

/** Counts one refusal by a per-app rate limit (a request, or a connection; a refused batch counts once). */
export function countRateLimited(appId: string, limit: RateLimitName): void {
  const map = appCounters(appId).rateLimited;
  map.set(limit, (map.get(limit) ?? 0) + 1);
}

/** Push publishes accepted (P1/P2), per instance. */
export const pushPublishes = new Map<string, number>();

export function countPushPublish(instanceId: string): void {
  pushPublishes.set(instanceId, (pushPublishes.get(instanceId) ?? 0) + 1);
}
