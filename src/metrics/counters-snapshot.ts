/**
 * A thread's counters as plain data: every module-level figure the /metrics collectors read
 * (node-counters.ts, http-metrics.ts). A front-end thread posts its snapshot to main when
 * scraped, and main sums it with its own, so that each series stays one figure for the
 * whole process.
 */
import { snapshotHttpCounters, sumHttpCounters, type HttpCountersSnapshot } from './http-metrics.js';
import { allAppCounters, pushPublishes, type RateLimitName } from './node-counters.js';

/** One app's counters (node-counters.ts AppCounters), maps as [key, count] lists. */
export interface AppCountersSnapshot {
  readonly appId: string;
  readonly eventsTriggered: number;
  readonly wsMessagesSent: number;
  readonly wsMessagesReceived: number;
  /** [close code, connections closed with it]. */
  readonly disconnects: readonly (readonly [number, number])[];
  /** [rate limit, refusals]. */
  readonly rateLimited: readonly (readonly [RateLimitName, number])[];
}

export interface NodeCountersSnapshot {
  readonly apps: readonly AppCountersSnapshot[];
  /** [push instance id, publishes accepted]. */
  readonly pushPublishes: readonly (readonly [string, number])[];
  readonly http: HttpCountersSnapshot;
}

/** This thread's counters now (copies: later increments do not change it). */
export function snapshotNodeCounters(): NodeCountersSnapshot {
  const apps: AppCountersSnapshot[] = [];
  for (const [appId, c] of allAppCounters()) {
    apps.push({
      appId,
      eventsTriggered: c.eventsTriggered,
      wsMessagesSent: c.wsMessagesSent,
      wsMessagesReceived: c.wsMessagesReceived,
      disconnects: [...c.disconnects],
      rateLimited: [...c.rateLimited],
    });
  }
  return { apps, pushPublishes: [...pushPublishes], http: snapshotHttpCounters() };
}

/** Several threads' counters as one, each figure summed; apps and instances the filter refuses (no longer configured) are left out. */
export function sumNodeCounters(snapshots: readonly NodeCountersSnapshot[], live?: { appIds: ReadonlySet<string>; instanceIds: ReadonlySet<string> }): NodeCountersSnapshot {
  const apps = new Map<string, { eventsTriggered: number; wsMessagesSent: number; wsMessagesReceived: number; disconnects: Map<number, number>; rateLimited: Map<RateLimitName, number> }>();
  const publishes = new Map<string, number>();
  for (const snapshot of snapshots) {
    for (const app of snapshot.apps) {
      if (live && !live.appIds.has(app.appId)) continue;
      let sum = apps.get(app.appId);
      if (sum === undefined) {
        sum = { eventsTriggered: 0, wsMessagesSent: 0, wsMessagesReceived: 0, disconnects: new Map(), rateLimited: new Map() };
        apps.set(app.appId, sum);
      }
      sum.eventsTriggered += app.eventsTriggered;
      sum.wsMessagesSent += app.wsMessagesSent;
      sum.wsMessagesReceived += app.wsMessagesReceived;
      for (const [code, n] of app.disconnects) sum.disconnects.set(code, (sum.disconnects.get(code) ?? 0) + n);
      for (const [limit, n] of app.rateLimited) sum.rateLimited.set(limit, (sum.rateLimited.get(limit) ?? 0) + n);
    }
    for (const [instanceId, n] of snapshot.pushPublishes) {
      if (live && !live.instanceIds.has(instanceId)) continue;
      publishes.set(instanceId, (publishes.get(instanceId) ?? 0) + n);
    }
  }
  return {
    apps: [...apps].map(([appId, c]) => ({ appId, ...c, disconnects: [...c.disconnects], rateLimited: [...c.rateLimited] })),
    pushPublishes: [...publishes],
    http: sumHttpCounters(snapshots.map((s) => s.http)),
  };
}
