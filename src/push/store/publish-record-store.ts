/**
 * Publish records as both stores keep them (the shard's LMDB, push/shard/publishes/lmdb-publish-store.ts;
 * the cluster's PostgreSQL, postgres/postgres-publish-store.ts): the record types, and
 * PublishRecordStore, what the fan-out, statistics, usage and reporting need of either.
 *
 * A publish is split into parts, each fanning out over its own devices: on one node a part per
 * shard (the shard's devices), in a cluster `cluster.publishPartitions` partitions (the devices
 * whose hash falls in partition i of P) that any node's shard claims with an expiring lease
 * (PartitionLeases, PostgreSQL only). A part's progress record holds its counts and its scan
 * checkpoint; they change together with the usage they add, so counts are exact whatever
 * crashes.
 *
 * Guarantees of every implementation (test/unit/push/store/publish-record-store-contract.ts):
 * - every write resolves only once durable (synced LMDB commit, PostgreSQL commit);
 * - a checkpoint and the usage it adds are one atomic write;
 * - reads see every write that resolved before they were issued;
 * - sweep deletes publishes finished before the cutoff with everything recorded of them.
 */
import { pack } from 'msgpackr';
import type { ScanPosition } from './device-store.js';
import { emptyGatewayCounts, emptyUserBits, userIndexOf } from '../publish-results.js';
import type { GatewayCounts, PublishJob, PublishKind, PublishShardStats, PublishState, UserOutcomes } from '../messages/publishes.js';
import type { Platform } from '../platform.js';

/**
 * One shard's part of one publish as stored (`('progress', publishId)`, msgpack): its own
 * shape, not the `publish.stats` message, which is built from it (statsOf), so changing the
 * message never changes what is on disk. Field meanings as in PublishShardStats.
 */
export interface ProgressRecord {
  publishId: string;
  instanceId: string;
  kind: PublishKind;
  state: PublishState;
  acceptedAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  updatedAt: number;
  recipients: number;
  gateways: Record<Platform, GatewayCounts>;
  /**
   * User publishes: this part's outcome as bits over the sorted targets. Records of earlier
   * versions also hold the targets here, and lists of ids: progress() converts them to bits.
   */
  users?: { targets?: string[] } & UserOutcomes;
  /** Last device whose outcome is counted here, in scan order; null before the first. */
  position: ScanPosition | null;
  /** Cluster (PostgreSQL): the partition of the publish this part covers; absent on LMDB (the part is the shard's). */
  partition?: number;
  /** The coordinator acknowledged this shard's finished part. */
  reported: boolean;
  /** Cancelled (`publish.cancel`) before every shard had stored it: stopped, never resumed or reported. */
  cancelled?: true;
}

/**
 * One accepted publish as stored (`('job', publishId)`, msgpack, written once): the store's own
 * type, converted from and to the `publish.start` message's PublishJob at this module's boundary
 * (storedJob, jobOf), so a field added to the message does not reach the disk unless it is
 * added here and to storedJob. Today it has exactly the message's fields; should the message
 * change, this type must keep describing the records already on disk (Herald reads data dirs of
 * earlier versions without a migration).
 */
export type StoredPublishJob = Readonly<Pick<PublishJob, 'publishId' | 'instanceId' | 'kind' | 'targets' | 'payloads' | 'acceptedAt' | 'webhookUrl'>>;

/**
 * The stored form of a job: its fields in the order every version has written them (the order
 * the HTTP route builds the job in), `webhookUrl` last and only when present, so the msgpack
 * bytes stay those of earlier versions.
 */
export function storedJob(job: PublishJob): StoredPublishJob {
  const { publishId, instanceId, kind, targets, payloads, acceptedAt, webhookUrl } = job;
  return webhookUrl === undefined
    ? { publishId, instanceId, kind, targets, payloads, acceptedAt }
    : { publishId, instanceId, kind, targets, payloads, acceptedAt, webhookUrl };
}

/** The job a stored record describes (a copy: the stored record is never changed in place). */
export function jobOf(stored: StoredPublishJob): PublishJob {
  return { ...stored };
}

/** What a shard tells the coordinator when its part is finished. */
export interface ShardReport {
  publishId: string;
  shard: number;
  recipients: number;
  gateways: Record<Platform, GatewayCounts>;
  users?: UserOutcomes;
  startedAt: number | null;
  finishedAt: number;
}

/** What the coordinator shard keeps per publish: every shard's finished part, by shard index. */
export interface CoordinatorRecord {
  parts: Record<number, ShardReport>;
  /** FINISHED (and v1.PublishToUsersAttempt) queued in the webhook outbox. */
  finalized: boolean;
}

/** A count added to an instance's usage of one month. */
export interface UsageDelta {
  instanceId: string;
  month: string;
  notifications: number;
}

/**
 * The `publish.stats` answer for a part (stored or live) of shard `shard`; `targets` (the
 * coordinator's copy of a user publish's ids) travels with it when given.
 */
export function statsOf(record: ProgressRecord, shard: number, targets?: string[]): PublishShardStats {
  const stats: PublishShardStats = {
    shard,
    publishId: record.publishId,
    instanceId: record.instanceId,
    kind: record.kind,
    state: record.state,
    acceptedAt: record.acceptedAt,
    startedAt: record.startedAt,
    finishedAt: record.finishedAt,
    updatedAt: record.updatedAt,
    recipients: record.recipients,
    gateways: record.gateways,
  };
  if (record.users) {
    const ids = targets ?? record.users.targets;
    const { withDevices, deliveredToGateway } = record.users;
    stats.users = ids === undefined ? { withDevices, deliveredToGateway } : { targets: ids, withDevices, deliveredToGateway };
  }
  return stats;
}

/** Encoded bytes of a value as msgpack (what a job costs against `maxPendingBytesPerInstance`). */
export function packedBytes(value: unknown): number {
  return pack(value).length;
}

/** `YYYY-MM` of a time, UTC. */
export function usageMonth(ms: number): string {
  return new Date(ms).toISOString().slice(0, 7);
}


export interface PublishRecordStore {
  /** Which implementation: `lmdb` (a shard's own) or `postgres` (the cluster's). */
  readonly kind: 'lmdb' | 'postgres';
  /**
   * Stores a part's checkpoint (counts, scan position, state) and the usage it adds, in one
   * write. Resolves to the bytes a finished part adds to the retained records (0 while it
   * runs, and always 0 in PostgreSQL, which bounds retention by days). PostgreSQL rejects with
   * LeaseLostError when the part's lease passed to another owner: the checkpoint is not stored.
   */
  saveProgress(progress: ProgressRecord, usage?: UsageDelta): Promise<number>;
  /**
   * The parts of the publish this store answers for, when it is the instance's (LMDB: this
   * shard's one part; PostgreSQL: every partition); empty when unknown.
   */
  statsParts(instanceId: string, publishId: string): Promise<PublishShardStats[]>;
  /** Notifications of the instance in `month` (UTC `YYYY-MM`) this store counted. */
  usage(instanceId: string, month: string): Promise<number>;
  /** The instance of a publish this store knows, undefined otherwise (reports count only for known publishes). */
  instanceOf(publishId: string): Promise<string | undefined>;
  /** Deletes publishes finished before `cutoffMs` (at most `limit`); resolves to how many and the bytes freed. */
  sweep(cutoffMs: number, limit?: number): Promise<{ publishes: number; bytes: number }>;
}

/** A checkpoint refused because another owner holds the part's lease now (it resumes from the last stored checkpoint). */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
}

/** The initial progress record of a newly accepted publish. */
export function initialProgress(job: PublishJob): ProgressRecord {
  const record: ProgressRecord = {
    publishId: job.publishId,
    instanceId: job.instanceId,
    kind: job.kind,
    state: 'queued',
    acceptedAt: job.acceptedAt,
    startedAt: null,
    finishedAt: null,
    updatedAt: job.acceptedAt,
    recipients: 0,
    gateways: emptyGatewayCounts(),
    position: null,
    reported: false,
  };
  if (job.kind === 'users') {
    const users = userIndexOf(job.targets).length;
    record.users = { withDevices: emptyUserBits(users), deliveredToGateway: emptyUserBits(users) };
  }
  return record;
}
