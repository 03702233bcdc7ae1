/**
 * A shard worker's counters (worker side only): plain numbers bumped where things happen and
 * sent to the main thread by `core.metrics` when /metrics is scraped.
 */
import type { ShardMetrics } from './shard-metrics.js';

/** Distinct failure reasons kept as metric labels per shard; further ones count as `other`. */
const MAX_REASONS = 50;
const notifications = new Map<string, number>();
const reasons = new Set<string>();

/**
 * Counts one push notification outcome. `reason` (failed and removed only) becomes a label
 * while fewer than MAX_REASONS distinct ones were seen, else `other`.
 */
export function countNotification(instanceId: string, gateway: string, result: 'sent' | 'failed' | 'removed', reason: string | undefined): void {
  let label = '';
  if (result !== 'sent' && reason !== undefined) {
    label = boundedReason(reason);
  }
  const key = `${instanceId}\t${gateway}\t${result}\t${label}`;
  notifications.set(key, (notifications.get(key) ?? 0) + 1);
}

/** A reason as a bounded label value (or `other` once too many distinct ones were seen). */
export function boundedReason(reason: string): string {
  const short = reason.length > 120 ? reason.slice(0, 120) : reason;
  if (reasons.has(short)) return short;
  if (reasons.size >= MAX_REASONS) return 'other';
  reasons.add(short);
  return short;
}

/** Outbound connections refused (net/outbound-guard.ts), by client and reason. */
const outboundRefusals = new Map<string, number>();

/** Counts one connection refused because its address is not public; `client` is `web_push` or `webhook`. */
export function countOutboundRefusal(client: 'web_push' | 'webhook', reason: string): void {
  const key = `${client}\t${reason}`;
  outboundRefusals.set(key, (outboundRefusals.get(key) ?? 0) + 1);
}

/** Bytes of finished publishes' records this shard keeps (against its share of retentionBytes). */
let publishRecordBytes = 0;
/** Sends made again because the lease of their partition passed to another node before they were checkpointed. */
let publishResends = 0;

export function setPublishRecordBytes(bytes: number): void {
  publishRecordBytes = bytes;
}

export function countPublishResends(n: number): void {
  publishResends += n;
}

/** Namespaces of deleted push instances whose records this shard has still to purge. */
let pushPurgesPending = 0;

export function setPushPurgesPending(n: number): void {
  pushPurgesPending = n;
}

export function shardMetrics(): ShardMetrics {
  const out: ShardMetrics['notifications'] = [];
  for (const [key, count] of notifications) {
    const [instanceId, gateway, result, reason] = key.split('\t') as [string, string, string, string];
    out.push({ instanceId, gateway, result, reason, count });
  }
  const refusals: ShardMetrics['outboundRefusals'] = [];
  for (const [key, count] of outboundRefusals) {
    const [client, reason] = key.split('\t') as [string, string];
    refusals.push({ client, reason, count });
  }
  return { notifications: out, outboundRefusals: refusals, publishRecordBytes, publishResends, pushPurgesPending };
}
