/**
 * Durable publish state of one shard, in one named database `push/publish` of the shard's
 * LMDB environment (keys are string tuples encoded by ../../keys.ts, values msgpack):
 *
 *   ('job', publishId)                 → StoredPublishJob the accepted request; dropped once this
 *                                                           shard needs it no more (part reported and,
 *                                                           on the coordinator, webhooks queued)
 *   ('progress', publishId)            → ProgressRecord   this shard's part: counts and times, the scan
 *                                                           checkpoint and `reported` (statsOf: the message)
 *   ('open', publishId)                → true             part not finished, or finished and not yet
 *                                                           acknowledged by the coordinator
 *   ('coord', publishId)               → CoordinatorRecord (coordinator shard only) the parts reported
 *   ('coord-open', publishId)          → true             coordinator: FINISHED not yet queued
 *   ('targets', publishId)             → Uint8Array       coordinator, user publishes: the target ids,
 *                                                           de-duplicated and sorted (userIndexOf), msgpack
 *                                                           deflated: the one copy kept after the job goes
 *   ('done', finishedAt13, publishId)  → number           retention index (zero-padded ms) → the bytes
 *                                                           of the publish's records counted against
 *                                                           `retentionBytes` (`true` in earlier versions)
 *   ('usage', instanceId, 'YYYY-MM')   → number           notifications counted this UTC month
 *
 * Kept small on purpose: the user ids of a user publish are stored once per publish (the job
 * while it runs, then the coordinator's `targets`); per-user outcomes are bit sets over them.
 *
 * Every write method runs one child transaction and resolves when it is committed and synced
 * (see src/shards/storage.ts): a progress record and the usage it adds change together.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { Database, RootDatabase } from 'lmdb';
import { pack, unpack } from 'msgpackr';
import { decodeKey, encodeKey, prefixRange } from '../../keys.js';
import type { PublishJob, PublishShardStats } from '../../messages/publishes.js';
import { userBitsOf, userIndexOf } from '../../publish-results.js';
import {
  jobOf, statsOf, storedJob,
  type CoordinatorRecord, type ProgressRecord, type PublishRecordStore, type ShardReport, type StoredPublishJob, type UsageDelta,
} from '../../store/publish-record-store.js';

/** A stored progress record as this version reads it: user outcomes as bits (earlier versions stored id lists). */
function progressOf(stored: ProgressRecord | undefined): ProgressRecord | undefined {
  const users = stored?.users;
  if (!stored || !users || (users.withDevices instanceof Uint8Array && users.deliveredToGateway instanceof Uint8Array)) return stored;
  const index = userIndexOf(users.targets ?? []);
  return {
    ...stored,
    users: {
      ...users,
      withDevices: userBitsOf(users.withDevices as Uint8Array | string[], index),
      deliveredToGateway: userBitsOf(users.deliveredToGateway as Uint8Array | string[], index),
    },
  };
}

function doneTime(ms: number): string {
  return String(Math.max(0, Math.floor(ms))).padStart(13, '0');
}

/** The database's name (also declared to the reshard, publish-layout.ts). */
export const PUBLISH_DATABASE = 'push/publish';

/** The publish records of one shard; every write resolves once durable. */
export class LmdbPublishStore implements PublishRecordStore {
  readonly kind = 'lmdb';
  private readonly root: RootDatabase;
  private readonly db: Database<unknown, Uint8Array>;
  /** Told the bytes of finished publishes' records removeInstance deleted (PublishRetention). */
  private retainedRemoved: (bytes: number) => void = () => {};

  constructor(root: RootDatabase) {
    this.root = root;
    this.db = root.openDB<unknown, Uint8Array>(PUBLISH_DATABASE, { keyEncoding: 'binary', encoding: 'msgpack' });
  }

  job(publishId: string): PublishJob | undefined {
    const stored = this.db.get(encodeKey(['job', publishId])) as StoredPublishJob | undefined;
    return stored && jobOf(stored);
  }

  progress(publishId: string): ProgressRecord | undefined {
    return progressOf(this.db.get(encodeKey(['progress', publishId])) as ProgressRecord | undefined);
  }

  /** The target ids of a user publish this shard coordinates (sorted, de-duplicated); undefined elsewhere. */
  targets(publishId: string): string[] | undefined {
    const packed = this.db.get(encodeKey(['targets', publishId])) as Uint8Array | undefined;
    return packed && (unpack(inflateRawSync(packed)) as string[]);
  }

  /**
   * Bytes the records of finished publishes hold on this shard (progress, coordinator record,
   * targets), as counted into the retention index when each was finished. Reads the whole
   * index: call once at start-up, then keep the count (retainedBytesChanged).
   */
  retainedBytes(): number {
    let total = 0;
    for (const { key, value } of this.db.getRange(prefixRange(['done']))) {
      total += typeof value === 'number' ? value : this.recordBytes(decodeKey(key)[2]!);
    }
    return total;
  }

  /** `listener` is told the bytes of finished publishes' records that removeInstance deletes. */
  onRetainedRemoved(listener: (bytes: number) => void): void {
    this.retainedRemoved = listener;
  }

  coordinator(publishId: string): CoordinatorRecord | undefined {
    return this.db.get(encodeKey(['coord', publishId])) as CoordinatorRecord | undefined;
  }

  /** This shard's part of the publish, when it is the instance's. */
  statsParts(instanceId: string, publishId: string, shard = 0): Promise<PublishShardStats[]> {
    const progress = this.progress(publishId);
    if (!progress || progress.instanceId !== instanceId) return Promise.resolve([]);
    return Promise.resolve([statsOf(progress, shard, progress.kind === 'users' ? this.targets(publishId) : undefined)]);
  }

  instanceOf(publishId: string): Promise<string | undefined> {
    return Promise.resolve(this.progress(publishId)?.instanceId);
  }

  /** Ids of parts not finished or not yet reported, for resuming at start-up. */
  openPublishIds(): string[] {
    return Array.from(this.db.getKeys(prefixRange(['open'])), (key) => decodeKey(key)[1]!);
  }

  /** Ids of publishes this shard coordinates whose FINISHED is not queued yet. */
  openCoordinatorIds(): string[] {
    return Array.from(this.db.getKeys(prefixRange(['coord-open'])), (key) => decodeKey(key)[1]!);
  }

  /** Notifications of the instance in `month` on this shard. */
  usage(instanceId: string, month: string): Promise<number> {
    return Promise.resolve(this.usageNow(instanceId, month));
  }

  /** usage(), synchronously (LMDB reads are). */
  usageNow(instanceId: string, month: string): number {
    return (this.db.get(encodeKey(['usage', instanceId, month])) as number | undefined) ?? 0;
  }

  /**
   * Stores a new publish: job, initial progress and open marker, plus the coordinator's record
   * when this shard coordinates it (keeping parts already reported). False, and nothing written,
   * when the publish is already known here.
   */
  create(job: PublishJob, progress: ProgressRecord, coordinates: boolean): Promise<boolean> {
    const id = job.publishId;
    return this.root.childTransaction(() => {
      if (this.db.doesExist(encodeKey(['progress', id]))) return false;
      this.db.putSync(encodeKey(['job', id]), storedJob(job));
      this.db.putSync(encodeKey(['progress', id]), progress);
      this.db.putSync(encodeKey(['open', id]), true);
      if (coordinates) {
        const existing = this.coordinator(id);
        this.db.putSync(encodeKey(['coord', id]), existing ?? { parts: {}, finalized: false });
        this.db.putSync(encodeKey(['coord-open', id]), true);
        if (job.kind === 'users') this.db.putSync(encodeKey(['targets', id]), deflateRawSync(pack(userIndexOf(job.targets))));
      }
      return true;
    });
  }

  /**
   * A checkpoint: the progress record and the usage it adds, in one transaction. Resolves to
   * the bytes a finished part adds to the retained records (0 while it runs).
   */
  saveProgress(progress: ProgressRecord, usage?: UsageDelta): Promise<number> {
    return this.root.childTransaction(() => {
      this.db.putSync(encodeKey(['progress', progress.publishId]), progress);
      if (usage && usage.notifications !== 0) this.addUsage(usage);
      if (progress.state === 'finished' && progress.finishedAt !== null) return this.markDone(progress.publishId, progress.finishedAt);
      return 0;
    });
  }

  /** The coordinator acknowledged this shard's part: close it, and drop the job if no role needs it. */
  markReported(publishId: string): Promise<void> {
    return this.root.childTransaction(() => {
      const progress = this.progress(publishId);
      if (!progress) return;
      if (!progress.reported) this.db.putSync(encodeKey(['progress', publishId]), { ...progress, reported: true });
      this.db.removeSync(encodeKey(['open', publishId]));
      this.dropJobIfUnneeded(publishId);
    });
  }

  /** Coordinator: records one shard's finished part (idempotent) and answers the record. */
  saveReport(report: ShardReport): Promise<CoordinatorRecord> {
    const id = report.publishId;
    return this.root.childTransaction(() => {
      const record = this.coordinator(id) ?? { parts: {}, finalized: false };
      const updated: CoordinatorRecord = { ...record, parts: { ...record.parts, [report.shard]: report } };
      this.db.putSync(encodeKey(['coord', id]), updated);
      if (!record.finalized) this.db.putSync(encodeKey(['coord-open', id]), true);
      return updated;
    });
  }

  /** Coordinator: the closing webhooks are queued (call in the same turn as queuing them). */
  markFinalized(publishId: string): Promise<void> {
    return this.root.childTransaction(() => {
      const record = this.coordinator(publishId);
      if (record) this.db.putSync(encodeKey(['coord', publishId]), { ...record, finalized: true });
      this.db.removeSync(encodeKey(['coord-open', publishId]));
      this.dropJobIfUnneeded(publishId);
    });
  }

  /**
   * Cancels this shard's part of a publish (`publish.cancel`): its record becomes finished,
   * reported and cancelled, the coordinator's record (if this shard has one) finalized without
   * webhooks, the job is dropped and the retention index takes it like any finished publish.
   * Call once its run has stopped (the run's last checkpoint would overwrite the record).
   * False when this shard has no record of the publish.
   */
  cancel(publishId: string, nowMs: number = Date.now()): Promise<boolean> {
    return this.root.childTransaction(() => {
      const progress = this.progress(publishId);
      if (!progress) return false;
      if (progress.state === 'finished' && progress.finishedAt !== null) this.db.removeSync(encodeKey(['done', doneTime(progress.finishedAt), publishId]));
      const finishedAt = progress.finishedAt ?? nowMs;
      this.db.putSync(encodeKey(['progress', publishId]), {
        ...progress, state: 'finished', finishedAt, updatedAt: nowMs, reported: true, cancelled: true,
      } satisfies ProgressRecord);
      this.db.removeSync(encodeKey(['open', publishId]));
      const coordinator = this.coordinator(publishId);
      if (coordinator) this.db.putSync(encodeKey(['coord', publishId]), { ...coordinator, finalized: true });
      this.db.removeSync(encodeKey(['coord-open', publishId]));
      this.dropJobIfUnneeded(publishId);
      this.markDone(publishId, finishedAt);
      return true;
    });
  }

  /**
   * Deletes every record of publishes finished before `cutoffMs` (at most `limit` per call, so
   * one transaction stays small); resolves to how many were deleted and the bytes freed.
   */
  sweep(cutoffMs: number, limit = 1000): Promise<{ publishes: number; bytes: number }> {
    const range = prefixRange(['done']);
    const end = encodeKey(['done', doneTime(cutoffMs)]);
    return this.deleteDone(Array.from(this.db.getRange({ start: range.start, end, limit })));
  }

  /**
   * Deletes the oldest finished publishes until at least `bytes` are freed (at most `limit` per
   * call), skipping those whose FINISHED webhook is not queued yet (coordinator still waiting
   * for parts): they go once it is. Resolves to how many were deleted and the bytes freed.
   */
  dropOldest(bytes: number, limit = 1000): Promise<{ publishes: number; bytes: number }> {
    const chosen: { key: Uint8Array; value: unknown }[] = [];
    let freed = 0;
    for (const entry of this.db.getRange(prefixRange(['done']))) {
      if (freed >= bytes || chosen.length >= limit) break;
      const id = decodeKey(entry.key)[2]!;
      if (this.db.doesExist(encodeKey(['coord-open', id])) || this.db.doesExist(encodeKey(['open', id]))) continue;
      chosen.push(entry);
      freed += typeof entry.value === 'number' ? entry.value : this.recordBytes(id);
    }
    return this.deleteDone(chosen);
  }

  /**
   * Deletes the records of at most `limit` publishes of `instanceId` (a retired namespace), with
   * their retention entries, and its usage counts; resolves to how many records went (0: none
   * left). The bytes the finished ones counted go to the onRetainedRemoved listener.
   */
  removeInstance(instanceId: string, limit: number): Promise<number> {
    const ids: { id: string; finishedAt: number | null }[] = [];
    for (const { key, value } of this.db.getRange(prefixRange(['progress']))) {
      if (ids.length >= limit) break;
      const progress = value as ProgressRecord;
      if (progress.instanceId === instanceId) ids.push({ id: decodeKey(key)[1]!, finishedAt: progress.state === 'finished' ? progress.finishedAt : null });
    }
    const usage = Array.from(this.db.getKeys({ ...prefixRange(['usage', instanceId]), limit }));
    if (ids.length === 0 && usage.length === 0) return Promise.resolve(0);
    let freed = 0;
    return this.root
      .childTransaction(() => {
        for (const { id, finishedAt } of ids) {
          const done = finishedAt === null ? null : encodeKey(['done', doneTime(finishedAt), id]);
          // Counted only while still in the retention index (a trim may have taken it meanwhile).
          const counted = done && this.db.get(done);
          if (counted !== undefined && counted !== null) freed += typeof counted === 'number' ? counted : this.recordBytes(id);
          for (const kind of ['job', 'progress', 'open', 'coord', 'coord-open', 'targets']) this.db.removeSync(encodeKey([kind, id]));
          if (done) this.db.removeSync(done);
        }
        for (const key of usage) this.db.removeSync(key);
        return ids.length + usage.length;
      })
      .then((removed) => {
        if (freed > 0) this.retainedRemoved(freed);
        return removed;
      });
  }

  /** Resolves once every write issued so far is on disk. */
  async flushed(): Promise<void> {
    await this.root.flushed;
  }

  private deleteDone(entries: readonly { key: Uint8Array; value: unknown }[]): Promise<{ publishes: number; bytes: number }> {
    if (entries.length === 0) return Promise.resolve({ publishes: 0, bytes: 0 });
    return this.root.childTransaction(() => {
      let bytes = 0;
      for (const { key, value } of entries) {
        const id = decodeKey(key)[2]!;
        bytes += typeof value === 'number' ? value : this.recordBytes(id);
        for (const kind of ['job', 'progress', 'open', 'coord', 'coord-open', 'targets']) this.db.removeSync(encodeKey([kind, id]));
        this.db.removeSync(key);
      }
      return { publishes: entries.length, bytes };
    });
  }

  /** Inside a transaction: enters a finished part in the retention index with its bytes; answers them. */
  private markDone(publishId: string, finishedAt: number): number {
    const bytes = this.recordBytes(publishId);
    this.db.putSync(encodeKey(['done', doneTime(finishedAt), publishId]), bytes);
    return bytes;
  }

  /** Bytes of a publish's records kept after it finished (values and keys). */
  private recordBytes(publishId: string): number {
    let total = 0;
    for (const kind of ['progress', 'coord', 'targets']) {
      const key = encodeKey([kind, publishId]);
      const value = this.db.getBinary(key);
      if (value) total += value.length + key.length;
    }
    return total;
  }

  private addUsage({ instanceId, month, notifications }: UsageDelta): void {
    const key = encodeKey(['usage', instanceId, month]);
    this.db.putSync(key, ((this.db.get(key) as number | undefined) ?? 0) + notifications);
  }

  /** Inside a transaction: the job body goes once this shard's part is reported and no coordination is pending. */
  private dropJobIfUnneeded(publishId: string): void {
    if (this.db.doesExist(encodeKey(['open', publishId]))) return;
    if (this.db.doesExist(encodeKey(['coord-open', publishId]))) return;
    this.db.removeSync(encodeKey(['job', publishId]));
  }
}
