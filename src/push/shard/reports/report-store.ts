/**
 * Durable delivery and open reports of one shard (worker side). A report lives on the shard of
 * its device, so recording it never leaves that shard; a publish's counts are the sum over
 * shards.
 *
 * Key layout (string tuples encoded by ../../keys.ts; every key starts with the instance id):
 *
 *   push/reports        (instanceId, publishId, kind, deviceId) → StoredReport   one per (publish, device, kind)
 *   push/report-counts  (instanceId, publishId)                 → ReportCounts   this shard's totals
 *
 * The first report of a (publish, device, kind) writes its record and bumps the count in one
 * child transaction; a later one finds the record and changes nothing. Writes resolve after
 * the synced commit (src/shards/storage.ts), so an awaited record() is durable.
 *
 * Retention: the owner removes a publish's reports (removePublish) once the publish itself is
 * gone from the shard (see shard-handlers.ts), so per-device records do not outlive it.
 */
import type { Database, RootDatabase } from 'lmdb';
import { decodeKey, encodeKey, prefixRange } from '../../keys.js';
import type { DeliveryReport, ReportCounts, ReportKind } from '../../messages/reports.js';

/** The stored detail of one report; id parts live in the key. Optional fields are omitted. */
interface StoredReport {
  /** When the SDK says it happened, Unix seconds. */
  timestampSecs: number;
  /** When this shard recorded it, ms since the Unix epoch. */
  receivedAtMs: number;
  userId?: string;
  appInBackground?: boolean;
  hasDisplayableContent?: boolean;
  hasData?: boolean;
}

/** Report records removed per child transaction while pruning, so one publish never holds the shard long. */
const PRUNE_BATCH = 5_000;

function storedReport(report: DeliveryReport, nowMs: number): StoredReport {
  const stored: StoredReport = { timestampSecs: report.timestampSecs, receivedAtMs: nowMs };
  if (report.userId !== undefined) stored.userId = report.userId;
  if (report.kind === 'delivery') {
    if (report.appInBackground !== undefined) stored.appInBackground = report.appInBackground;
    if (report.hasDisplayableContent !== undefined) stored.hasDisplayableContent = report.hasDisplayableContent;
    if (report.hasData !== undefined) stored.hasData = report.hasData;
  }
  return stored;
}

/** The databases' names (also declared to the reshard, report-layout.ts). */
export const REPORTS_DATABASE = 'push/reports';
export const REPORT_COUNTS_DATABASE = 'push/report-counts';

const COUNT_FIELD: Record<ReportKind, keyof ReportCounts> = { delivery: 'delivered', open: 'opened' };

export class ReportStore {
  private readonly root: RootDatabase;
  private readonly reports: Database<StoredReport, Uint8Array>;
  private readonly counts: Database<ReportCounts, Uint8Array>;

  /** Opens (creating when missing) the report databases; must not run inside a transaction. */
  constructor(root: RootDatabase) {
    this.root = root;
    this.reports = root.openDB<StoredReport, Uint8Array>(REPORTS_DATABASE, { keyEncoding: 'binary', encoding: 'msgpack' });
    this.counts = root.openDB<ReportCounts, Uint8Array>(REPORT_COUNTS_DATABASE, { keyEncoding: 'binary', encoding: 'msgpack' });
  }

  /**
   * Records the report when it is the first of its (publish, device, kind) and counts it;
   * `duplicate` changes nothing. Resolves after the synced commit.
   */
  record(report: DeliveryReport, nowMs = Date.now()): Promise<'recorded' | 'duplicate'> {
    const key = encodeKey([report.instanceId, report.publishId, report.kind, report.deviceId]);
    const countsKey = encodeKey([report.instanceId, report.publishId]);
    // A duplicate (SDK retries are common) is answered from a read, without a synced commit.
    // Records are never removed while their publish lives, so a record seen here stays.
    if (this.reports.doesExist(key)) return Promise.resolve('duplicate');
    return this.root.childTransaction((): 'recorded' | 'duplicate' => {
      if (this.reports.doesExist(key)) return 'duplicate';
      this.reports.putSync(key, storedReport(report, nowMs));
      const current = this.counts.get(countsKey) ?? { delivered: 0, opened: 0 };
      const field = COUNT_FIELD[report.kind];
      this.counts.putSync(countsKey, { ...current, [field]: current[field] + 1 });
      return 'recorded';
    });
  }

  /** This shard's counts for a publish; zeros when it has none. */
  countsFor(instanceId: string, publishId: string): ReportCounts {
    const record = this.counts.get(encodeKey([instanceId, publishId]));
    return { delivered: record?.delivered ?? 0, opened: record?.opened ?? 0 };
  }

  /** Whether a report of this (publish, device, kind) is recorded. */
  has(instanceId: string, publishId: string, kind: ReportKind, deviceId: string): boolean {
    return this.reports.doesExist(encodeKey([instanceId, publishId, kind, deviceId]));
  }

  /** Publishes with counts on this shard, in key order (for pruning). */
  *publishes(): Generator<{ instanceId: string; publishId: string }, void, undefined> {
    for (const key of this.counts.getKeys({})) {
      const [instanceId, publishId] = decodeKey(key) as [string, string];
      yield { instanceId, publishId };
    }
  }

  /**
   * Removes every report and the counts of one publish, PRUNE_BATCH records per transaction so
   * a large publish never holds the shard long. Stops early (between batches) once `shouldStop`
   * answers true; resolves to whether the publish is gone.
   */
  async removePublish(instanceId: string, publishId: string, shouldStop: () => boolean = () => false): Promise<boolean> {
    const range = prefixRange([instanceId, publishId]);
    const countsKey = encodeKey([instanceId, publishId]);
    for (;;) {
      const done = await this.root.childTransaction((): boolean => {
        const keys = Array.from(this.reports.getKeys({ ...range, limit: PRUNE_BATCH }));
        for (const key of keys) this.reports.removeSync(key);
        if (keys.length < PRUNE_BATCH) {
          this.counts.removeSync(countsKey);
          return true;
        }
        return false;
      });
      if (done) return true;
      if (shouldStop()) return false;
    }
  }
}
