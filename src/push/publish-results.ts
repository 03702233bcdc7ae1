/**
 * Pure helpers over the per-shard publish records (no storage, no I/O): empty counts, the
 * merge of every shard's part into one view (statistics endpoint, FINISHED webhook) and the
 * per-user outcome of a user publish (`v1.PublishToUsersAttempt`). Safe to import from the
 * main thread and from shards.
 */
import { PLATFORMS, type Platform } from './platform.js';
import type { GatewayCounts, PublishProgress, PublishShardStats, UserOutcomes } from './messages/publishes.js';

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

/**
 * The target users of a user publish in the order its per-user outcomes are indexed by: the
 * request's user ids de-duplicated and sorted. Outcomes are bit sets over this list
 * (UserOutcomes), so a part's record holds one bit per target, not the ids again.
 */
export function userIndexOf(targets: readonly string[]): string[] {
  return [...new Set(targets)].sort();
}

/** An empty bit set over `n` users. */
export function emptyUserBits(n: number): Uint8Array {
  return new Uint8Array(Math.ceil(n / 8));
}

/** Sets bit `i`. */
export function setUserBit(bits: Uint8Array, i: number): void {
  bits[i >> 3]! |= 1 << (i & 7);
}

/** Whether bit `i` is set (false past the end). */
export function hasUserBit(bits: Uint8Array, i: number): boolean {
  return ((bits[i >> 3] ?? 0) & (1 << (i & 7))) !== 0;
}

/** `a | b`, as long as the longer. */
export function orUserBits(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.max(a.length, b.length));
  out.set(a);
  for (let i = 0; i < b.length; i++) out[i]! |= b[i]!;
  return out;
}

/**
 * A user outcome as bits over `index` (userIndexOf of the targets): bits as they are, or a
 * list of user ids (records written before outcomes were stored as bits) converted.
 */
export function userBitsOf(value: Uint8Array | readonly string[] | undefined, index: readonly string[]): Uint8Array {
  if (value === undefined) return emptyUserBits(index.length);
  if (value instanceof Uint8Array) return value;
  const positions = new Map(index.map((user, i) => [user, i]));
  const bits = emptyUserBits(index.length);
  for (const user of value) {
    const i = positions.get(user);
    if (i !== undefined) setUserBit(bits, i);
  }
  return bits;
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
export function userAttemptOutcome(targets: readonly string[], parts: readonly Partial<UserOutcomes>[]): UserAttemptOutcome {
  const index = userIndexOf(targets);
  let delivered = emptyUserBits(index.length);
  let withDevices = emptyUserBits(index.length);
  for (const part of parts) {
    delivered = orUserBits(delivered, userBitsOf(part.deliveredToGateway, index));
    withDevices = orUserBits(withDevices, userBitsOf(part.withDevices, index));
  }
  const outcome: UserAttemptOutcome = { users_delivered_to_gateway: [], users_no_devices: [], users_gateway_failed: [] };
  index.forEach((user, i) => {
    if (hasUserBit(delivered, i)) outcome.users_delivered_to_gateway.push(user);
    else if (hasUserBit(withDevices, i)) outcome.users_gateway_failed.push(user);
    else outcome.users_no_devices.push(user);
  });
  return outcome;
}

/**
 * One publish over every shard that has a record of it: `state` is `finished` when every shard
 * finished, `queued` when none started, else `sending`; `startedAt` the earliest shard start,
 * `finishedAt` the latest shard finish once all finished; counts summed.
 */
export interface MergedPublishStats extends PublishProgress {
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
    // The targets travel with one part only (the coordinator's): the others carry bits.
    const targets = present.find((p) => p.users?.targets !== undefined)?.users?.targets ?? [];
    merged.users = userAttemptOutcome(targets, present.map((p) => p.users ?? {}));
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
