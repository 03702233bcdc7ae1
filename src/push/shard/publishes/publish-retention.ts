/**
 * How long one node's shard keeps the records of finished publishes (LMDB): at most its share
 * of `pushDelivery.retentionBytes` (the oldest go first, down to 90% of it), and none older
 * than `pushDelivery.retentionDays` (swept an hour apart). The bytes kept are reported in
 * herald_push_publish_record_bytes.
 */
import { log } from '../../../log.js';
import type { HeraldConfig } from '../../../config/schema.js';
import { setPublishRecordBytes } from '../../../shards/shard-counters.js';
import type { LmdbPublishStore } from './lmdb-publish-store.js';

const DAY_MS = 86_400_000;
/** First retention sweep after start, then every SWEEP_EVERY_MS. */
const FIRST_SWEEP_MS = 60_000;
const SWEEP_EVERY_MS = 3_600_000;

export class PublishRetention {
  /** This shard's share of retentionBytes. */
  private bound: number;
  /** Bytes of finished publishes' records kept on this shard. */
  private retained: number;
  private trimming = false;
  private sweepTimer: NodeJS.Timeout;
  /** retentionDays as at start-up (a reload does not change it). */
  private readonly retentionDays: number;

  /** Reads the bytes kept (the whole retention index: once, at start-up) and starts the sweeps. */
  constructor(
    private readonly publishes: LmdbPublishStore,
    private readonly shard: { shardIndex: number; shardCount: number },
    config: Readonly<HeraldConfig>,
  ) {
    this.bound = this.boundOf(config);
    this.retentionDays = config.pushDelivery.retentionDays;
    this.retained = publishes.retainedBytes();
    setPublishRecordBytes(this.retained);
    // A deleted push instance's records, purged in the background, no longer count.
    publishes.onRetainedRemoved((bytes) => {
      this.retained = Math.max(0, this.retained - bytes);
      setPublishRecordBytes(this.retained);
    });
    const tick = (): void => {
      this.sweep();
      this.sweepTimer = setTimeout(tick, SWEEP_EVERY_MS).unref();
    };
    this.sweepTimer = setTimeout(tick, FIRST_SWEEP_MS).unref();
  }

  /** A part finished and its records now count `bytes` against the bound: trims when over it. */
  added(bytes: number): void {
    this.retained += bytes;
    setPublishRecordBytes(this.retained);
    this.trim();
  }

  /** Settings changed: the new bound applies at once. */
  reload(config: Readonly<HeraldConfig>): void {
    this.bound = this.boundOf(config);
    this.trim();
  }

  /** Stops the sweeps (a trim under way finishes on its own). */
  close(): void {
    clearTimeout(this.sweepTimer);
  }

  private boundOf(config: Readonly<HeraldConfig>): number {
    return Math.max(1, Math.floor(config.pushDelivery.retentionBytes / this.shard.shardCount));
  }

  /** Over the bound: deletes the oldest records, down to 90% of it, so one trim frees room for many publishes. */
  private trim(): void {
    if (this.trimming || this.retained <= this.bound) return;
    this.trimming = true;
    this.publishes
      .dropOldest(this.retained - Math.floor(this.bound * 0.9))
      .then(({ publishes: deleted, bytes }) => {
        this.retained = Math.max(0, this.retained - bytes);
        setPublishRecordBytes(this.retained);
        if (deleted > 0) log.info('oldest publish records deleted (retentionBytes)', { shard: this.shard.shardIndex, publishes: deleted, bytes });
        this.trimming = false;
        // Still over (a limit per call, or records still coordinating): go on, unless nothing could go.
        if (deleted > 0) this.trim();
      })
      .catch((err: unknown) => {
        this.trimming = false;
        log.error('publish retention trim failed', { error: String(err) });
      });
  }

  /** Deletes the records of publishes finished more than retentionDays ago. */
  private sweep(): void {
    this.publishes
      .sweep(Date.now() - this.retentionDays * DAY_MS)
      .then(({ publishes: deleted, bytes }) => {
        this.retained = Math.max(0, this.retained - bytes);
        setPublishRecordBytes(this.retained);
        if (deleted > 0) log.info('expired publish records deleted', { shard: this.shard.shardIndex, publishes: deleted });
      })
      .catch((err: unknown) => log.error('publish retention sweep failed', { error: String(err) }));
  }
}
