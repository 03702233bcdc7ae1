/**
 * Shard side of push publish: stores accepted publishes, runs this shard's part of each in the
 * background (PublishRun), resumes unfinished parts at start-up, cancels a publish the main
 * thread could not store everywhere, answers per-part statistics and monthly usage, and
 * coordinates completion webhooks with the other shards (PublishCoordinator). close() stops
 * the runs at a checkpoint and closes the gateway clients.
 *
 * In a cluster with `cluster.postgresUrl` the publish area is cluster-handlers.ts instead.
 *
 * A publish, top-down:
 *   1. push/http/publishes/routes.ts    main thread: checks, rate limit, quota (PublishesClient.usage)
 *   2. push/clients/publishes.ts        main thread: `publish.start` on every shard (cancel on failure)
 *   3. this file                        shard: stores the job, launches a PublishRun, resumes after a restart
 *                                       (pending-bytes.ts bounds what waits, publish-retention.ts what is kept)
 *   4. publish-run.ts                   scans the shard's index (devices/device-scan.ts), sends through
 *                                       gateway-registry.ts → push/gateways/, checkpoints its position
 *   5. coordinator.ts                   collects every shard's finished part, queues FINISHED and
 *                                       v1.PublishToUsersAttempt in the webhook outbox (src/webhooks/)
 */
import { HeraldError } from '../../../errors.js';
import { describeError, log } from '../../../log.js';
import type { HeraldConfig } from '../../../config/schema.js';
import type { ShardArea } from '../../../shards/context.js';
import { isCurrentNamespace, type PushAreaDeps } from '../deps.js';
import { broadcastChannelBus, PublishCoordinator } from './coordinator.js';
import type { LmdbPublishStore } from './lmdb-publish-store.js';
import { PendingBytes } from './pending-bytes.js';
import { PublishRetention } from './publish-retention.js';
import { PublishRun, reportOf, type PublishRunDeps } from './publish-run.js';
import { PublishRuns } from './publish-runs.js';
import { RecentIds } from './recent-ids.js';
import { publishShardArea, type PublishArea } from './publish-area.js';
import { userIndexOf } from '../../publish-results.js';
import { initialProgress, statsOf, usageMonth, type ProgressRecord, type ShardReport } from '../../store/publish-record-store.js';
import type { PublishJob, PublishShardApi, PublishShardStats } from '../../messages/publishes.js';

/** Cancelled publish ids remembered in memory, so a start still queued behind its cancel does not run. */
const CANCELLED_REMEMBERED = 1024;

/** Builds the publish area of one shard over its LMDB publish records and resumes its unfinished publishes. */
export function createPublishArea(deps: PushAreaDeps, publishes: LmdbPublishStore): ShardArea<PublishShardApi> {
  const area = new NodePublishArea(deps, publishes);
  return publishShardArea(area);
}

/** One shard's publishes on one node: its part of each, run here, coordinated with the other shards. */
class NodePublishArea implements PublishArea {
  private readonly deps: PushAreaDeps;
  private readonly publishes: LmdbPublishStore;
  private readonly runs: PublishRuns;
  private readonly coordinator: PublishCoordinator;
  private readonly retention: PublishRetention;
  private readonly pending: PendingBytes;
  private readonly runDeps: PublishRunDeps;
  /** pushDelivery.shutdownGraceMs as at start-up. */
  private readonly shutdownGraceMs: number;
  /** Publishes whose start is being stored, so a cancel can wait for it. */
  private readonly starting = new Map<string, Promise<boolean>>();
  /** Recently cancelled publish ids. */
  private readonly cancelled = new RecentIds(CANCELLED_REMEMBERED);
  private closing = false;

  constructor(deps: PushAreaDeps, publishes: LmdbPublishStore) {
    const { ctx, webhooks } = deps;
    const delivery = ctx.config.pushDelivery;
    this.deps = deps;
    this.publishes = publishes;
    this.runs = new PublishRuns(deps);
    this.coordinator = new PublishCoordinator({
      shardIndex: ctx.shardIndex,
      shardCount: ctx.shardCount,
      publishes,
      webhooks,
      // Named after the data dir: two servers in one process must not hear each other.
      bus: broadcastChannelBus(`herald-publish:${ctx.dataDir}`),
    });
    this.retention = new PublishRetention(publishes, ctx, ctx.config);
    this.pending = new PendingBytes(delivery.maxPendingBytesPerInstance);
    this.shutdownGraceMs = delivery.shutdownGraceMs;
    this.runDeps = {
      shardIndex: ctx.shardIndex,
      devices: deps.store,
      publishes,
      gateways: this.runs.gateways,
      limiter: this.runs.limiter,
      checkpointEvery: delivery.checkpointEvery,
      windowSize: Math.max(64, delivery.concurrency * 4),
      onRetained: (bytes) => this.retention.added(bytes),
    };
    this.resume();
  }

  /** `publish.start`: stores the publish (refused past the pending bound), answers, then runs this shard's part. */
  async start(job: PublishJob): Promise<{ stored: true }> {
    if (this.closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is shutting down');
    // Cancelled already: the main thread answered 500 and waits for nothing from here.
    if (this.cancelled.has(job.publishId)) return { stored: true };
    if (this.publishes.progress(job.publishId)) return { stored: true };
    this.pending.admit(job);
    const coordinates = this.coordinator.coordinates(job.publishId);
    const creating = this.publishes.create(job, initialProgress(job), coordinates);
    this.starting.set(job.publishId, creating);
    let created: boolean;
    try {
      created = await creating;
    } catch (err) {
      this.pending.release(job);
      throw err;
    } finally {
      this.starting.delete(job.publishId);
    }
    if (!created) this.pending.release(job);
    // STARTED only for a publish that is stored (a failed store answers 500 and sends nothing).
    if (created && coordinates) this.coordinator.started(job);
    // Answer first; the fan-out starts on the next turn. A publish stored while closing waits for the restart.
    if (created) setImmediate(() => !this.closing && !this.cancelled.has(job.publishId) && this.launch(job));
    return { stored: true };
  }

  /** `publish.cancel`: stops this shard's part once its start is stored, and marks it cancelled. */
  async cancel(publishId: string): Promise<{ cancelled: boolean }> {
    this.cancelled.add(publishId);
    await this.starting.get(publishId)?.catch(() => undefined);
    await this.runs.stopAndWait((run) => run.job.publishId === publishId);
    this.coordinator.forget(publishId);
    const job = this.publishes.job(publishId);
    if (job) this.pending.release(job);
    const stored = await this.publishes.cancel(publishId);
    if (stored) log.warn('publish cancelled: not every shard stored it', { shard: this.deps.ctx.shardIndex, publishId });
    return { cancelled: stored };
  }

  /** `publish.stats`: this shard's part, live while it runs, else as stored. */
  stats(instanceId: string, publishId: string): { parts: PublishShardStats[]; partCount: number } {
    const { shardIndex, shardCount: partCount } = this.deps.ctx;
    const running = this.runs.get(publishId);
    if (running) {
      if (running.job.instanceId !== instanceId) return { parts: [], partCount };
      const coordinates = running.job.kind === 'users' && this.coordinator.coordinates(publishId);
      return { parts: [running.stats(coordinates ? userIndexOf(running.job.targets) : undefined)], partCount };
    }
    const progress = this.publishes.progress(publishId);
    if (!progress || progress.instanceId !== instanceId) return { parts: [], partCount };
    return { parts: [statsOf(progress, shardIndex, progress.kind === 'users' ? this.publishes.targets(publishId) : undefined)], partCount };
  }

  /** `publish.usage`: this month's notifications of the instance on this shard, those not yet checkpointed included. */
  usage(instanceId: string): { month: string; notifications: number } {
    const month = usageMonth(Date.now());
    return { month, notifications: this.publishes.usageNow(instanceId, month) + this.runs.unpersistedNotifications(instanceId) };
  }

  reload(config: Readonly<HeraldConfig>): void {
    this.runs.reload(config.push);
    this.pending.reload(config.pushDelivery.maxPendingBytesPerInstance);
    this.retention.reload(config);
  }

  /** Stops the runs at a checkpoint, then the coordinator; resolves once every write is on disk. */
  async close(): Promise<void> {
    this.closing = true;
    this.retention.close();
    await this.runs.close(this.shutdownGraceMs);
    await this.coordinator.close();
    await this.publishes.flushed();
  }

  /** Runs this shard's part of `job`, from `record` (a resumed one's stored progress). */
  private launch(job: PublishJob, record: ProgressRecord = initialProgress(job)): void {
    const run = new PublishRun(job, record, this.runDeps);
    this.pending.track(job);
    this.runs.start(
      run,
      (outcome) => {
        if (outcome !== 'finished') return;
        this.pending.release(job);
        this.coordinator.partFinished(run.report());
      },
      (err) => {
        this.pending.release(job);
        log.error('publish run failed', { shard: this.deps.ctx.shardIndex, publishId: job.publishId, error: describeError(err) });
      },
    );
  }

  /** Resumes what a stop or crash interrupted; finished parts not yet acknowledged go to the coordinator again. */
  private resume(): void {
    const { shardIndex } = this.deps.ctx;
    const unreported: ShardReport[] = [];
    let resumed = 0;
    for (const publishId of this.publishes.openPublishIds()) {
      const progress = this.publishes.progress(publishId);
      if (!progress) continue;
      if (progress.state === 'finished') {
        if (!progress.reported) unreported.push(reportOf(progress, shardIndex));
        continue;
      }
      const job = this.publishes.job(publishId);
      if (!job) {
        log.error('unfinished publish without its job record', { shard: shardIndex, publishId });
        continue;
      }
      // A deleted instance's: its records are being purged.
      if (!isCurrentNamespace(this.deps, job.instanceId)) continue;
      this.launch(job, progress);
      resumed++;
    }
    if (resumed > 0) log.info('publishes resumed', { shard: shardIndex, publishes: resumed });
    this.coordinator.resume(unreported);
  }
}
