/**
 * What a reload (SIGHUP) may change live: apps, push instances (credentials, limits, webhooks),
 * the log level and the TLS certificate files. Every other setting is fixed at start-up; a
 * reloaded file that changes one is reported as needing a restart and the running value kept.
 */
import type { HeraldConfig } from './schema.js';

/** Top-level settings a reload applies at once. */
export const LIVE_SETTINGS = ['apps', 'push', 'logLevel', 'tls'] as const;

export interface ReloadPlan {
  /** The config to run with from now on: the new live settings, the running restart-only ones. */
  effective: Readonly<HeraldConfig>;
  /** Restart-only settings whose value in the file differs from the running one. */
  restartNeeded: string[];
  /** Live settings that changed. */
  changed: string[];
}

export function planReload(running: Readonly<HeraldConfig>, next: Readonly<HeraldConfig>): ReloadPlan {
  const restartNeeded: string[] = [];
  const changed: string[] = [];
  const keys = new Set([...Object.keys(running), ...Object.keys(next)]) as Set<keyof HeraldConfig>;
  for (const key of keys) {
    const same = JSON.stringify(running[key] ?? null) === JSON.stringify(next[key] ?? null);
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
  let push = next.push;
  if (running.cluster && !running.cluster.postgresUrl && running.push.length === 0 && next.push.length > 0) {
    changed.splice(changed.indexOf('push'), 1);
    restartNeeded.push('push');
    push = running.push;
  }
  const effective: HeraldConfig = { ...running, apps: next.apps, push, logLevel: next.logLevel, tls };
  return { effective: Object.freeze(effective), restartNeeded: restartNeeded.sort(), changed: changed.sort() };
}
