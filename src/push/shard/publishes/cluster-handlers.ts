/**
 * Shard side of push publish in a cluster with `cluster.postgresUrl`: publishes live in
 * PostgreSQL (postgres-publish-store.ts), split into `cluster.publishPartitions` partitions by
 * device id hash, and every shard of every node sends whichever partitions it claims.
 *
 * - `publish.start` reaches every shard of the accepting node; the publish's home shard
 *   (shardForKey of its id) stores it with its partitions (refusing past
 *   `maxPendingBytesPerInstance` of the instance's unfinished publishes, cluster-wide), queues
 *   STARTED and notifies every node (PostgreSQL NOTIFY); the other shards answer at once.
 * - Each shard claims at most RUNNING_PER_SHARD partitions at a time (partition-claims.ts), on
 *   a notification and on a 1 s poll, so a large publish spreads over every node; a claimed
 *   partition runs as a PublishRun over the partition's devices (every device of it, through a
 *   device store over the whole cluster, `devices`, not the shard's own scope), checkpointing
 *   into its row (which renews its lease; a timer renews it between checkpoints).
 * - A node that dies stops renewing: once `publishLeaseMs` has passed, another node claims the
 *   partition and resumes it from its last checkpoint. Devices the dead node sent after that
 *   checkpoint are sent again: at least once, the repeats counted (at most) in
 *   herald_push_publish_resends_total.
 * - The shard that finishes the last partition queues FINISHED and v1.PublishToUsersAttempt
 *   (PostgresPublishStore.complete, once per publish); the poll finishes what a node that died
 *   in between left.
 * - Statistics and usage are answered by the publish's (usage: the instance's) home shard from
 *   PostgreSQL, so any node answers for any publish.
 */
import { HeraldError } from '../../../errors.js';
import { log, RateLimitedLog } from '../../../log.js';
import type { HeraldConfig } from '../../../config/schema.js';
import type { ShardArea } from '../../../shards/context.js';
import { shardForKey } from '../../../shards/hash.js';
import type { PushAreaDeps } from '../deps.js';
import type { PushDeviceStore } from '../../store/device-store.js';
import { packedBytes, storedJob, usageMonth } from '../../store/publish-record-store.js';
import type { PostgresPublishStore } from '../../store/postgres/postgres-publish-store.js';
import { PartitionClaims } from './partition-claims.js';
import { PublishRuns } from './publish-runs.js';
import { queueClosing, queueStarted } from './publish-webhooks.js';
import { RecentIds } from './recent-ids.js';
import { publishShardArea, type PublishArea } from './publish-area.js';
import type { PublishJob, PublishShardApi, PublishShardStats } from '../../messages/publishes.js';

/** Claims are tried at least this often (ms), besides the notifications. */
const POLL_MS = 1000;
/** Publishes left unfinalized by a node that died are looked for this often (ms). */
const ORPHAN_CHECK_MS = 5000;
const DAY_MS = 86_400_000;
const SWEEP_EVERY_MS = 3_600_000;

const failureLog = new RateLimitedLog('warn', 10_000);
/** Publish ids whose start failed on their home shard, remembered for their cancel (the latest ones). */
const FAILED_STARTS_REMEMBERED = 1024;
/** A failed start's cancel is retried in the background this often (ms), this many times, until the store answers. */
const LATE_CANCEL_EVERY_MS = 2000;
const LATE_CANCEL_ATTEMPTS = 15;

/** Builds the publish area of one shard of a cluster node over the cluster's PostgreSQL. */
export function createClusterPublishArea(deps: PushAreaDeps, store: PostgresPublishStore, devices: PushDeviceStore): ShardArea<PublishShardApi> {
  const area = new ClusterPublishArea(deps, store, devices);
  return publishShardArea(area);
}

/** One shard's part in a cluster's publishes: those it is home to, and the partitions it claims. */
class ClusterPublishArea implements PublishArea {
  private readonly deps: PushAreaDeps;
  private readonly store: PostgresPublishStore;
  private readonly runs: PublishRuns;
  private readonly claims: PartitionClaims;
  /** Publishes whose start failed here (their home shard): their store holds nothing of them (PostgresPublishStore.create). */
  private readonly failedStarts = new RecentIds(FAILED_STARTS_REMEMBERED);
  private readonly timers: NodeJS.Timeout[];
  /** cluster.publishPartitions and pushDelivery.shutdownGraceMs as at start-up. */
  private readonly partitions: number;
  private readonly shutdownGraceMs: number;
  private closing = false;

  /** Starts listening, polling, renewing leases, finishing orphans and sweeping once the store is ready. */
  constructor(deps: PushAreaDeps, store: PostgresPublishStore, devices: PushDeviceStore) {
    const { ctx } = deps;
    const delivery = ctx.config.pushDelivery;
    this.deps = deps;
    this.store = store;
    this.partitions = ctx.config.cluster!.publishPartitions;
    this.shutdownGraceMs = delivery.shutdownGraceMs;
    this.runs = new PublishRuns(deps);
    this.claims = new PartitionClaims({
      store,
      runs: this.runs,
      runDeps: {
        shardIndex: ctx.shardIndex,
        devices,
        gateways: this.runs.gateways,
        limiter: this.runs.limiter,
        checkpointEvery: delivery.checkpointEvery,
        windowSize: Math.max(64, delivery.concurrency * 4),
      },
      partitionFinished: (publishId) => this.complete(publishId),
    });
    this.timers = [
      setInterval(() => {
        this.startListening();
        this.claims.wake();
      }, POLL_MS),
      setInterval(() => this.claims.renew(), Math.max(250, Math.floor(ctx.config.cluster!.publishLeaseMs / 3))),
      setInterval(() => this.finishOrphans(), ORPHAN_CHECK_MS),
      setInterval(() => this.sweep(), SWEEP_EVERY_MS),
    ];
    for (const timer of this.timers) timer.unref();
    store
      .ready()
      .then(() => {
        this.startListening();
        this.claims.wake();
      })
      .catch((err: unknown) => failureLog.write('ready', 'publish store not ready (retried)', { shard: ctx.shardIndex, error: String(err) }));
  }

  /**
   * `publish.start`: the publish's home shard stores it with its partitions (refused past the
   * instance's pending bound, cluster-wide), queues STARTED and wakes the claimers; the other
   * shards answer at once.
   */
  async start(job: PublishJob): Promise<{ stored: true }> {
    if (this.closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is shutting down');
    if (!this.home(job.publishId)) return { stored: true };
    let created: boolean;
    try {
      await this.store.ready();
      const jobBytes = packedBytes(storedJob(job));
      const queued = await this.store.pendingBytes(job.instanceId);
      const maxPending = this.deps.ctx.config.pushDelivery.maxPendingBytesPerInstance;
      if (queued > 0 && queued + jobBytes > maxPending) {
        throw new HeraldError('PUBLISH_BACKLOG_FULL', `The instance has ${queued} bytes of publishes waiting to be sent, over pushDelivery.maxPendingBytesPerInstance (${maxPending}); retry in a second`);
      }
      created = await this.store.create(job, this.partitions);
    } catch (err) {
      this.failedStarts.add(job.publishId);
      throw err;
    }
    if (created) queueStarted(this.deps.webhooks, job);
    this.claims.wake();
    return { stored: true };
  }

  /** `publish.cancel`: stops this shard's runs of the publish; its home shard cancels it in the store. */
  async cancel(publishId: string): Promise<{ cancelled: boolean }> {
    for (const run of this.runs.all()) if (run.job.publishId === publishId) run.stop();
    if (!this.home(publishId)) return { cancelled: false };
    if (this.failedStarts.delete(publishId)) {
      // Its start failed here, so nothing was stored: answered at once, not after a store
      // that may be stalled. The cancel still goes to the store once it answers, for a
      // COMMIT that succeeded although its answer never came.
      this.cancelLater(publishId, 0);
      return { cancelled: false };
    }
    const cancelled = await this.store.cancel(publishId);
    if (cancelled) log.warn('publish cancelled: it could not be stored on every shard', { shard: this.deps.ctx.shardIndex, publishId });
    return { cancelled };
  }

  /** `publish.stats`: every partition, from the publish's home shard (the others answer none). */
  async stats(instanceId: string, publishId: string): Promise<{ parts: PublishShardStats[]; partCount: number }> {
    if (!this.home(publishId)) return { parts: [], partCount: 0 };
    const parts = await this.store.statsParts(instanceId, publishId);
    return { parts, partCount: parts.length };
  }

  /** `publish.usage`: the stored count from the instance's home shard, plus what this shard's runs have not checkpointed. */
  async usage(instanceId: string): Promise<{ month: string; notifications: number }> {
    const month = usageMonth(Date.now());
    const stored = this.home(instanceId) ? await this.store.usage(instanceId, month) : 0;
    return { month, notifications: stored + this.runs.unpersistedNotifications(instanceId) };
  }

  reload(config: Readonly<HeraldConfig>): void {
    this.runs.reload(config.push);
  }

  /** Stops claiming and the runs (at a checkpoint), gives up this shard's leases and closes the store. */
  async close(): Promise<void> {
    this.closing = true;
    for (const timer of this.timers) clearInterval(timer);
    await this.claims.close();
    await this.runs.close(this.shutdownGraceMs);
    await this.store.release().catch(() => undefined);
    await this.store.close();
  }

  /** Whether this shard is home to `key` (a publish id or an instance id): it answers for it. */
  private home(key: string): boolean {
    return shardForKey(key, this.deps.ctx.shardCount) === this.deps.ctx.shardIndex;
  }

  /** Finishes the publish if every partition is (once per publish, whoever calls): queues its closing webhooks. */
  private complete(publishId: string): Promise<void> {
    return this.store.complete(publishId, ({ job, parts }) => queueClosing(this.deps.webhooks, job, parts)).then(
      () => undefined,
      (err: unknown) => failureLog.write('complete', 'could not finish a publish in PostgreSQL (retried by the poll)', { publishId, error: String(err) }),
    );
  }

  /** Finishes what a node that died between its last partition and the completion left. */
  private finishOrphans(): void {
    this.store
      .unfinalized()
      .then(async (ids) => {
        for (const id of ids) await this.complete(id);
      })
      .catch((err: unknown) => failureLog.write('orphans', 'could not look for finished publishes in PostgreSQL', { shard: this.deps.ctx.shardIndex, error: String(err) }));
  }

  /** Cancels a publish whose start failed once the store answers, retried LATE_CANCEL_ATTEMPTS times. */
  private cancelLater(publishId: string, attempt: number): void {
    if (this.closing) return;
    const { shardIndex } = this.deps.ctx;
    const timer = setTimeout(() => {
      this.store.cancel(publishId).then(
        (cancelled) => {
          if (cancelled) log.warn('publish cancelled: its start had failed', { shard: shardIndex, publishId });
        },
        () => {
          if (attempt + 1 < LATE_CANCEL_ATTEMPTS) this.cancelLater(publishId, attempt + 1);
          else log.error('publish whose start failed could not be cancelled: it may be sent although the request failed', { shard: shardIndex, publishId });
        },
      );
    }, attempt === 0 ? 0 : LATE_CANCEL_EVERY_MS);
    timer.unref();
  }

  /** Deletes the publishes finished more than retentionDays ago. */
  private sweep(): void {
    this.store
      .sweep(Date.now() - this.deps.ctx.config.pushDelivery.retentionDays * DAY_MS)
      .then(({ publishes }) => {
        if (publishes > 0) log.info('expired publish records deleted', { shard: this.deps.ctx.shardIndex, publishes });
      })
      .catch((err: unknown) => failureLog.write('sweep', 'publish retention sweep failed', { error: String(err) }));
  }

  /** LISTENs for new publishes (again after a lost connection); the poll claims without. */
  private startListening(): void {
    this.store
      .listen(() => this.claims.wake())
      .catch((err: unknown) => failureLog.write('listen', 'could not LISTEN for publishes (polling only)', { shard: this.deps.ctx.shardIndex, error: String(err) }));
  }
}
