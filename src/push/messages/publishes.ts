/**
 * Main ↔ shard messages of push publish (type-only), including what the statistics endpoint
 * (reporting area) reads through `publish.stats`. What a shard stores has its own types, in
 * push/shard/publishes/lmdb-publish-store.ts, converted at the store's boundary.
 */
import type { Platform } from '../platform.js';

/**
 * Which index a publish fans out over: P1 (interests), P2 (users), or named devices (the
 * dashboard's test notification: each shard reads its own records of the ids, so only the
 * owning shard finds and sends to a device).
 */
export type PublishKind = 'interests' | 'users' | 'devices';

/**
 * One accepted publish, as `publish.start` hands it to every shard (each stores it as a
 * StoredPublishJob, immutable). `targets` is the interest or user list as the request gave it
 * (the scan sorts and de-duplicates it).
 */
export interface PublishJob {
  /** `pubid-<uuid>`. */
  publishId: string;
  instanceId: string;
  kind: PublishKind;
  /** 1–100 interest names, 1–1000 user ids, or device ids (`devices`). */
  targets: string[];
  /** The request's `apns` / `fcm` / `web` objects; a platform without one is not sent to. */
  payloads: Partial<Record<Platform, Record<string, unknown>>>;
  /** Per-publish webhook (STARTED, FINISHED), when the request gave one. */
  webhookUrl?: string;
  /** When the main thread accepted the request, ms since the epoch. */
  acceptedAt: number;
}

/** Lifecycle of one shard's part of a publish. */
export type PublishState = 'queued' | 'sending' | 'finished';

/**
 * Counts of one gateway for one shard's part. Every addressed device ends in exactly one of
 * `sent` or `failed`, so `recipients = sent + failed` once the part is finished.
 */
export interface GatewayCounts {
  /** Devices of this platform the publish was addressed to (the publish has a payload for it). */
  recipients: number;
  /** Accepted by the gateway (APNs 200, FCM 200, web push 201/202). */
  sent: number;
  /** Not accepted: dead token, refused, or still failing after the retries. */
  failed: number;
  /** Of `failed`, devices whose token the gateway called dead: they were deleted. */
  removed: number;
  /**
   * Of `failed`, how many per reason (`UNREGISTERED`, `BadDeviceToken`, `oauth: ...`,
   * `no credentials for fcm`); at most MAX_ERROR_REASONS reasons, the rest under `other`.
   * Absent when nothing failed (and in records written before it existed).
   */
  errors?: Record<string, number>;
}

/**
 * Per-user outcome on one shard (user publishes only): the target users with at least one
 * addressed device here, and those with at least one device the gateway accepted, each a bit
 * set over the de-duplicated, sorted targets (userIndexOf in push/publish-results.ts: bit i is
 * user i), so a part costs a bit per target, not the ids again. Merged over shards, a target
 * user is "delivered to gateway" when any shard delivered, "gateway failed" when some shard
 * had devices but none delivered, and "no devices" otherwise. Records written before bits
 * hold lists of user ids here; readers convert them (userBitsOf).
 */
export interface UserOutcomes {
  withDevices: Uint8Array;
  deliveredToGateway: Uint8Array;
}

/**
 * The progress of a publish, of one shard's part (PublishShardStats) or of the whole publish
 * merged over them (MergedPublishStats, push/publish-results.ts).
 *
 * - Counts are exact: a device counts once even when a crash made it be sent twice (counts
 *   are committed together with the scan checkpoint they belong to).
 * - `state`: `queued` (stored, not started), `sending`, `finished`.
 * - Times are ms since the epoch; `startedAt`/`finishedAt` are null until they happen.
 */
export interface PublishProgress {
  publishId: string;
  instanceId: string;
  kind: PublishKind;
  state: PublishState;
  acceptedAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** Devices addressed, over every gateway. */
  recipients: number;
  /** Per platform; all three are always present (zeros when not addressed). */
  gateways: Record<Platform, GatewayCounts>;
}

/**
 * One shard's part of one publish, as `publish.stats` answers it (built from the stored
 * ProgressRecord, push/shard/publishes/lmdb-publish-store.ts, by statsOf).
 */
export interface PublishShardStats extends PublishProgress {
  shard: number;
  /** Last change of this record. */
  updatedAt: number;
  /**
   * User publishes only: this part's outcome, and the requested users on the one part that
   * keeps them (the publish's coordinator): the ids are stored once per publish.
   */
  users?: { targets?: string[] } & UserOutcomes;
}

/** Notifications (addressed devices) one shard has counted for an instance in one UTC month. */
export interface PublishUsage {
  /** `YYYY-MM`, UTC. */
  month: string;
  notifications: number;
}

export interface PublishShardApi {
  /**
   * Sent to every shard when a publish is accepted: each shard stores the job durably (and,
   * on the coordinator shard, records it and then queues the STARTED webhook), answers, then
   * fans out over its own devices in the background. Idempotent per publishId.
   */
  'publish.start': { req: { job: PublishJob }; res: { stored: true } };
  /**
   * Sent by the main thread to every shard when `publish.start` failed on some shard: the
   * request answers 500 without a publishId, so the publish must not go out from the shards
   * that stored it. Stops this shard's run of it (sends in flight finish), marks it cancelled
   * (finished, reported, finalized: never resumed, no FINISHED webhook) and forgets the job. A
   * shard that has not stored it yet (its start still queued) will not run it.
   * `cancelled`: this shard had stored the publish.
   */
  'publish.cancel': { req: { publishId: string }; res: { cancelled: boolean } };
  /**
   * The parts of a publish this shard answers for, empty when it has no record of it (unknown,
   * expired, or another instance's): on one node its own part; in a cluster (PostgreSQL) the
   * publish's home shard (shardForKey of the id) answers every partition and the others none.
   * `partCount`: how many parts the publish has (shards, or partitions). The statistics
   * endpoint broadcasts and merges the parts with mergePublishStats (src/push/publish-results.ts).
   */
  'publish.stats': { req: { instanceId: string; publishId: string }; res: { parts: PublishShardStats[]; partCount: number } };
  /**
   * Notifications counted on this shard for the instance in the current UTC month, including
   * sends already made by publishes still running. The main thread sums the shards for the 402.
   * In a cluster (PostgreSQL) the instance's home shard answers the cluster's count, the others
   * what their running parts sent since their last checkpoint.
   */
  'publish.usage': { req: { instanceId: string }; res: PublishUsage };
}
