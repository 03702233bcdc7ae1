/**
 * The default node-wide WebSocket limit (`maxConnections`), derived from the process' open-file
 * limit so that connections can never take the descriptors LMDB, the shards and outbound HTTP
 * (gateways, webhooks) need. uSockets' accept loop spins on EMFILE, so the limit must be
 * reached well before the descriptors run out.
 */
import { readFileSync } from 'node:fs';

/** The soft RLIMIT_NOFILE of this process, or null when unknown or unlimited (Linux: /proc). */
export function openFileLimit(procLimits = '/proc/self/limits'): number | null {
  let text: string;
  try {
    text = readFileSync(procLimits, 'utf8');
  } catch {
    return null;
  }
  const m = /^Max open files\s+(\S+)/m.exec(text);
  if (!m || m[1] === 'unlimited') return null;
  const n = Number(m[1]);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

export interface FdBudget {
  shards: number;
  /** pushDelivery.concurrency: gateway sends in flight per shard. */
  pushConcurrency: number;
  /** webhookDelivery.concurrencyPerUrl. */
  webhookConcurrencyPerUrl: number;
}

/**
 * Descriptors kept for everything but client connections: the process itself (stdio, epoll,
 * worker pipes), per shard its LMDB files and thread, its gateway sends in flight and its
 * webhook requests (a handful of receivers assumed).
 */
export function fdHeadroom(budget: FdBudget): number {
  return 128 + budget.shards * (32 + budget.pushConcurrency + 8 * budget.webhookConcurrencyPerUrl);
}

/**
 * `limit − headroom`, but never less than half the limit (a small limit still serves some
 * clients); null (no node-wide limit) when the open-file limit is unknown or unlimited.
 */
export function defaultMaxConnections(budget: FdBudget, limit = openFileLimit()): number | null {
  if (limit === null) return null;
  return Math.max(Math.floor(limit / 2), limit - fdHeadroom(budget));
}
