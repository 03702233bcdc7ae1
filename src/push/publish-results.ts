/**
 * Pure helpers over the per-shard publish records (no storage, no I/O): empty counts, the
 * merge of every shard's part into one view (statistics endpoint, FINISHED webhook) and the
 * per-user outcome of a user publish (`v1.PublishToUsersAttempt`). Safe to import from the
 * main thread and from shards.
 */
import { PLATFORMS, type Platform } from './platform.js';
import type { GatewayCounts, PublishKind, PublishShardStats, PublishState } from './messages/publishes.js';

/** Zero counts for every platform. */
export function emptyGatewayCounts(): Record<Platform, GatewayCounts> {
  return {
    apns: { recipients: 0, sent: 0, failed: 0, removed: 0 },
    fcm: { recipients: 0, sent: 0, failed: 0, removed: 0 },
    web: { recipients: 0, sent: 0, failed: 0, removed: 0 },
  };
}

/** Distinct failure reasons kept per gateway in a publish's counts; further ones count under `other`. */
export const MAX_ERROR_REASONS = 20;

/**
 * A failure reason as a stable key for counting: durations that vary from one send to the next
 * ("asked again in 27 s", "Retry-After 120 s") become "N s", and it is cut at 200 characters.
 */
export function failureReasonKey(reason: string): string {
  return reason.replace(/\b\d+(?:\.\d+)? s\b/g, 'N s').slice(0, 200);
}

/** Adds `n` failures with `reason` (already a key) to the counts' `errors` (bounded by MAX_ERROR_REASONS). */
export function addErrorReason(counts: GatewayCounts, reason: string, n = 1): void {
  const errors = (counts.errors ??= {});
  const key = reason in errors || Object.keys(errors).length < MAX_ERROR_REASONS ? reason : 'other';
  errors[key] = (errors[key] ?? 0) + n;
}

/** Adds `b` into `a` (both per platform). */
export function addGatewayCounts(a: Record<Platform, GatewayCounts>, b: Readonly<Record<Platform, GatewayCounts>>): void {
  for (const platform of PLATFORMS) {
    a[platform].recipients += b[platform].recipients;
    a[platform].sent += b[platform].sent;
    a[platform].failed += b[platform].failed;
    a[platform].removed += b[platform].removed;
    const errors = b[platform].errors;
    if (errors) for (const reason in errors) addErrorReason(a[platform], reason, errors[reason]!);
  }
}

/** The three user lists of `v1.PublishToUsersAttempt`, each sorted, together covering the (de-duplicated) targets. */
export interface UserAttemptOutcome {
  users_delivered_to_gateway: string[];
  users_no_devices: string[];
  users_gateway_failed: string[];
}

/**
 * Classifies each target user from every shard's part: delivered when any shard's gateway
 * accepted one of the user's devices; gateway failed when the user had addressed devices but
 * none was accepted; no devices when no shard addressed any device of the user (including
 * devices only on platforms the publish has no payload for).
 */
export function userAttemptOutcome(
  targets: readonly string[],
  parts: readonly { withDevices: readonly string[]; deliveredToGateway: readonly string[] }[],
): UserAttemptOutcome {
  const delivered = new Set<string>();
  const withDevices = new Set<string>();
  for (const part of parts) {
    for (const user of part.deliveredToGateway) delivered.add(user);
    for (const user of part.withDevices) withDevices.add(user);
  }
  const outcome: UserAttemptOutcome = { users_delivered_to_gateway: [], users_no_devices: [], users_gateway_failed: [] };
  for (const user of [...new Set(targets)].sort()) {
    if (delivered.has(user)) outcome.users_delivered_to_gateway.push(user);
    else if (withDevices.has(user)) outcome.users_gateway_failed.push(user);
    else outcome.users_no_devices.push(user);
  }
  return outcome;
}

/** One publish over every shard that has a record of it. */
export interface MergedPublishStats {
  publishId: string;
  instanceId: string;
  kind: PublishKind;
  /** `finished` when every shard finished, `queued` when none started, else `sending`. */
  state: PublishState;
  acceptedAt: number;
  /** Earliest shard start, or null. */
  startedAt: number | null;
  /** Latest shard finish once all finished, else null. */
  finishedAt: number | null;
  recipients: number;
  gateways: Record<Platform, GatewayCounts>;
  /** User publishes only. */
  users?: UserAttemptOutcome;
  /** Shards that had a record (normally every shard). */
  shards: number;
}

/**
 * Merges the `publish.stats` answers of every shard (nulls skipped); null when no shard knows
 * the publish. `shardCount` is the total number of shards: a missing part keeps the state
 * from being `finished`.
 */
export function mergePublishStats(parts: readonly (PublishShardStats | null)[], shardCount: number): MergedPublishStats | null {
  const present = parts.filter((p): p is PublishShardStats => p !== null);
  const first = present[0];
  if (!first) return null;
  const gateways = emptyGatewayCounts();
  let recipients = 0;
  let startedAt: number | null = null;
  let finishedAt: number | null = null;
  for (const part of present) {
    addGatewayCounts(gateways, part.gateways);
    recipients += part.recipients;
    if (part.startedAt !== null) startedAt = startedAt === null ? part.startedAt : Math.min(startedAt, part.startedAt);
    if (part.finishedAt !== null) finishedAt = finishedAt === null ? part.finishedAt : Math.max(finishedAt, part.finishedAt);
  }
  const allFinished = present.length >= shardCount && present.every((p) => p.state === 'finished');
  const noneStarted = present.every((p) => p.state === 'queued');
  const merged: MergedPublishStats = {
    publishId: first.publishId,
    instanceId: first.instanceId,
    kind: first.kind,
    state: allFinished ? 'finished' : noneStarted ? 'queued' : 'sending',
    acceptedAt: first.acceptedAt,
    startedAt,
    finishedAt: allFinished ? finishedAt : null,
    recipients,
    gateways,
    shards: present.length,
  };
  if (first.kind === 'users') {
    const userParts = present.map((p) => p.users ?? { targets: [], withDevices: [], deliveredToGateway: [] });
    merged.users = userAttemptOutcome(first.users?.targets ?? [], userParts);
  }
  return merged;
}

/**
 * The `results` object of the per-publish webhook: counts per platform the publish had a
 * payload for (`{recipients, sent, failed, removed}`).
 */
export function webhookResults(
  platforms: readonly Platform[],
  gateways: Readonly<Record<Platform, GatewayCounts>>,
): Partial<Record<Platform, GatewayCounts>> {
  const results: Partial<Record<Platform, GatewayCounts>> = {};
  for (const platform of PLATFORMS) {
    if (platforms.includes(platform)) {
      const { recipients, sent, failed, removed } = gateways[platform];
      results[platform] = { recipients, sent, failed, removed };
    }
  }
  return results;
}
