/**
 * What a reload (SIGHUP) may change live: apps, push instances (credentials, limits, webhooks),
 * the log level and the TLS certificate files. Every other setting is fixed at start-up; a
 * reloaded file that changes one is reported as needing a restart and the running value kept.
 */
import type { AppConfig, HeraldConfig, PushInstanceConfig } from './schema.js';

/** Top-level settings a reload applies at once. */
export const LIVE_SETTINGS = ['apps', 'push', 'logLevel', 'tls'] as const;

export interface ReloadPlan {
  /** The config to run with from now on: the new live settings, the running restart-only ones. */
  effective: Readonly<HeraldConfig>;
  /** Restart-only settings whose value in the file differs from the running one. */
  restartNeeded: string[];
  /** Live settings that changed. */
  changed: string[];
  /**
   * The apps and push instances that differ from the running ones (added or changed entries,
   * removed ids). Every other entry of `effective` is the running object itself, so a reload
   * that changes one app applies that app only.
   */
  tenants: { apps: AppConfig[]; removedApps: string[]; push: PushInstanceConfig[]; removedPush: string[] };
}

export function planReload(running: Readonly<HeraldConfig>, next: Readonly<HeraldConfig>): ReloadPlan {
  const restartNeeded: string[] = [];
  const changed: string[] = [];
  const apps = keepUnchanged(running.apps, next.apps, (a) => a.id);
  const nextPush = keepUnchanged(running.push, next.push, (p) => p.instanceId);
  const keys = new Set([...Object.keys(running), ...Object.keys(next)]) as Set<keyof HeraldConfig>;
  for (const key of keys) {
    // Apps and push instances compared entry by entry (thousands of apps: no whole-list JSON).
    const listed = key === 'apps' ? apps : key === 'push' ? nextPush : undefined;
    const same = listed ? listed.changed.length === 0 && listed.removed.length === 0 : JSON.stringify(running[key] ?? null) === JSON.stringify(next[key] ?? null);
    if (same) continue;
    if ((LIVE_SETTINGS as readonly string[]).includes(key)) changed.push(key);
    else restartNeeded.push(key);
  }
  // TLS on or off changes what the port speaks: that needs a restart. Other TLS changes
  // (files, passphrase) are applied, and the files are re-read on every reload anyway.
  let tls = next.tls;
  if ((running.tls === null) !== (next.tls === null)) {
    changed.splice(changed.indexOf('tls'), 1);
    restartNeeded.push('tls');
    tls = running.tls;
  }
  // A cluster serves push only from its shared PostgreSQL: push instances appearing in a
  // cluster without one are not taken live (the restart then refuses, naming the setting).
  let pushes = nextPush;
  if (running.cluster && !running.cluster.postgresUrl && running.push.length === 0 && next.push.length > 0) {
    changed.splice(changed.indexOf('push'), 1);
    restartNeeded.push('push');
    pushes = { list: running.push as PushInstanceConfig[], changed: [], removed: [] };
  }
  const effective: HeraldConfig = { ...running, apps: apps.list, push: pushes.list, logLevel: next.logLevel, tls };
  return {
    effective: Object.freeze(effective),
    restartNeeded: restartNeeded.sort(),
    changed: changed.sort(),
    tenants: { apps: apps.changed, removedApps: apps.removed, push: pushes.changed, removedPush: pushes.removed },
  };
}

/**
 * `next` with each entry equal to the running one of its id replaced by the running object,
 * and which entries differ: changed or added ones, and the ids no longer there.
 */
function keepUnchanged<T>(running: readonly T[], next: readonly T[], idOf: (entry: T) => string): { list: T[]; changed: T[]; removed: string[] } {
  const before = new Map(running.map((entry) => [idOf(entry), entry]));
  const changed: T[] = [];
  const list = next.map((entry) => {
    const id = idOf(entry);
    const old = before.get(id);
    before.delete(id);
    if (old !== undefined && sameEntry(old, entry)) return old;
    changed.push(entry);
    return entry;
  });
  return { list, changed, removed: [...before.keys()] };
}

/** Whether two entries have the same fields: plain values compared directly, nested ones (webhooks, credentials) as JSON. */
function sameEntry(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  if (keys.length !== Object.keys(right).length) return false;
  for (const key of keys) {
    const x = left[key];
    const y = right[key];
    if (x === y) continue;
    if (typeof x !== 'object' || typeof y !== 'object' || x === null || y === null || JSON.stringify(x) !== JSON.stringify(y)) return false;
  }
  return true;
}
