/**
 * Shard side of push publish: stores accepted publishes, runs this shard's part of each in the
 * background (PublishRun), resumes unfinished parts at start-up, cancels a publish the main
 * thread could not store everywhere, answers per-part statistics and monthly usage, and
 * coordinates completion webhooks with the other shards (PublishCoordinator). close() stops
 * the runs at a checkpoint and closes the gateway clients.
 *
 * A publish, top-down:
 *   1. push/http/publishes/routes.ts    main thread: checks, rate limit, quota (PublishesClient.usage)
 *   2. push/clients/publishes.ts        main thread: `publish.start` on every shard (cancel on failure)
 *   3. this file                        shard: stores the job, launches a PublishRun, resumes after a restart
 *   4. publish-run.ts                   scans the shard's index (devices/device-scan.ts), sends through
 *                                       gateway-registry.ts → push/gateways/, checkpoints its position
 *   5. coordinator.ts                   collects every shard's finished part, queues FINISHED and
 *                                       v1.PublishToUsersAttempt in the webhook outbox (src/webhooks/)
 */
import { isCurrentNamespace } from '../deps.js';
import { HeraldError } from '../../../errors.js';
import { describeError, log } from '../../../log.js';
import type { ShardArea } from '../../../shards/context.js';
import type { PushAreaDeps } from '../deps.js';
import { broadcastChannelBus, PublishCoordinator } from './coordinator.js';
import { GatewayRegistry } from './gateway-registry.js';
import { initialProgress, packedBytes, statsOf, storedJob, usageMonth, type ShardReport } from './publish-store.js';
import { setPublishRecordBytes } from '../../../shards/shard-counters.js';
import { userIndexOf } from '../../publish-results.js';
import { PublishRun, reportOf, stopRuns, type PublishRunDeps } from './publish-run.js';
import { SendLimiter } from './send-limiter.js';
import type { PublishJob, PublishShardApi } from '../../messages/publishes.js';

const DAY_MS = 86_400_000;
/** First retention sweep after start, then every SWEEP_EVERY_MS. */
const FIRST_SWEEP_MS = 60_000;
const SWEEP_EVERY_MS = 3_600_000;
/** Cancelled publish ids remembered in memory, so a start still queued behind its cancel does not run. */
const CANCELLED_REMEMBERED = 1024;

/** Builds the publish area of one shard and resumes its unfinished publishes. */
export function createPublishArea(deps: PushAreaDeps): ShardArea<PublishShardApi> {
  const { ctx, webhooks, publishes } = deps;
  const delivery = ctx.config.pushDelivery;
  const gateways = new GatewayRegistry(ctx.config.push, delivery, ctx.config.outbound.allowPrivateAddresses, (namespace) => isCurrentNamespace(deps, namespace));
  const limiter = new SendLimiter(delivery.concurrency);
  const coordinator = new PublishCoordinator({
    shardIndex: ctx.shardIndex,
    shardCount: ctx.shardCount,
    publishes,
    webhooks,
    // Named after the data dir: two servers in one process must not hear each other.
    bus: broadcastChannelBus(`herald-publish:${ctx.dataDir}`),
  });
  // Bytes of finished publishes' records kept here, against this shard's share of retentionBytes.
  const retentionOf = (config: typeof ctx.config): number => Math.max(1, Math.floor(config.pushDelivery.retentionBytes / ctx.shardCount));
  let retention = retentionOf(ctx.config);
  let retained = publishes.retainedBytes();
  let trimming = false;
  setPublishRecordBytes(retained);
  const trim = (): void => {
    if (trimming || retained <= retention) return;
    trimming = true;
    // Down to 90% of the bound, so one trim frees room for many publishes.
    publishes
      .dropOldest(retained - Math.floor(retention * 0.9))
      .then(({ publishes: deleted, bytes }) => {
        retained = Math.max(0, retained - bytes);
        setPublishRecordBytes(retained);
        if (deleted > 0) log.info('oldest publish records deleted (retentionBytes)', { shard: ctx.shardIndex, publishes: deleted, bytes });
        trimming = false;
        // Still over (a limit per call, or records still coordinating): go on, unless nothing could go.
        if (deleted > 0) trim();
      })
      .catch((err: unknown) => {
        trimming = false;
        log.error('publish retention trim failed', { error: String(err) });
      });
  };
  const onRetained = (bytes: number): void => {
    retained += bytes;
    setPublishRecordBytes(retained);
    trim();
  };
  const runDeps: PublishRunDeps = {
    shardIndex: ctx.shardIndex,
    devices: deps.store,
    publishes,
    gateways,
    limiter,
    checkpointEvery: delivery.checkpointEvery,
    windowSize: Math.max(64, delivery.concurrency * 4),
    onRetained,
  };
  // Bytes of unfinished publishes per instance on this shard (their stored jobs), against maxPendingBytesPerInstance.
  let maxPending = delivery.maxPendingBytesPerInstance;
  const pending = new Map<string, number>();
  const pendingBytesOf = new Map<string, number>();
  const addPending = (job: PublishJob): void => {
    const bytes = packedBytes(storedJob(job));
    pendingBytesOf.set(job.publishId, bytes);
    pending.set(job.instanceId, (pending.get(job.instanceId) ?? 0) + bytes);
  };
  const removePending = (job: PublishJob): void => {
    const bytes = pendingBytesOf.get(job.publishId);
    if (bytes === undefined) return;
    pendingBytesOf.delete(job.publishId);
    const left = (pending.get(job.instanceId) ?? 0) - bytes;
    if (left > 0) pending.set(job.instanceId, left);
    else pending.delete(job.instanceId);
  };
  const runs = new Map<string, { run: PublishRun; done: Promise<void> }>();
  /** Publishes whose start is being stored, so a cancel can wait for it. */
  const starting = new Map<string, Promise<boolean>>();
  /** Recently cancelled publish ids, oldest first. */
  const cancelled = new Set<string>();
  let closing = false;

  const launch = (job: PublishJob, record = initialProgress(job)): void => {
    const run = new PublishRun(job, record, runDeps);
    if (!pendingBytesOf.has(job.publishId)) addPending(job);
    const done = run.run().then(
      (outcome) => {
        runs.delete(job.publishId);
        if (outcome === 'finished') {
          removePending(job);
          coordinator.partFinished(run.report());
        }
      },
      (err: unknown) => {
        runs.delete(job.publishId);
        removePending(job);
        log.error('publish run failed', { shard: ctx.shardIndex, publishId: job.publishId, error: describeError(err) });
      },
    );
    runs.set(job.publishId, { run, done });
  };

  // A deleted instance's publishes running here stop before its namespace is retired.
  deps.onRetire?.(async (namespace) => {
    const active = [...runs.values()].filter(({ run }) => run.job.instanceId === namespace);
    for (const { run } of active) run.stop();
    await Promise.all(active.map((a) => a.done));
  });

  // Resume what a stop or crash interrupted.
  const unreported: ShardReport[] = [];
  let resumed = 0;
  for (const publishId of publishes.openPublishIds()) {
    const progress = publishes.progress(publishId);
    if (!progress) continue;
    if (progress.state === 'finished') {
      if (!progress.reported) unreported.push(reportOf(progress, ctx.shardIndex));
      continue;
    }
    const job = publishes.job(publishId);
    if (!job) {
      log.error('unfinished publish without its job record', { shard: ctx.shardIndex, publishId });
      continue;
    }
    // A deleted instance's: its records are being purged.
    if (!isCurrentNamespace(deps, job.instanceId)) continue;
    launch(job, progress);
    resumed++;
  }
  if (resumed > 0) log.info('publishes resumed', { shard: ctx.shardIndex, publishes: resumed });
  coordinator.resume(unreported);

  const sweep = (): void => {
    publishes
      .sweep(Date.now() - delivery.retentionDays * DAY_MS)
      .then(({ publishes: deleted, bytes }) => {
        retained = Math.max(0, retained - bytes);
        setPublishRecordBytes(retained);
        if (deleted > 0) log.info('expired publish records deleted', { shard: ctx.shardIndex, publishes: deleted });
      })
      .catch((err: unknown) => log.error('publish retention sweep failed', { error: String(err) }));
  };
  let sweepTimer: NodeJS.Timeout = setTimeout(function tick() {
    sweep();
    sweepTimer = setTimeout(tick, SWEEP_EVERY_MS).unref();
  }, FIRST_SWEEP_MS).unref();

  return {
    handlers: {
      'publish.start': async ({ job }) => {
        if (closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is shutting down');
        // Cancelled already: the main thread answered 500 and waits for nothing from here.
        if (cancelled.has(job.publishId)) return { stored: true };
        if (publishes.progress(job.publishId)) return { stored: true };
        const jobBytes = packedBytes(storedJob(job));
        const queued = pending.get(job.instanceId) ?? 0;
        // One publish alone is never refused, however large: the bound is on what waits beside it.
        if (queued > 0 && queued + jobBytes > maxPending) {
          throw new HeraldError('PUBLISH_BACKLOG_FULL', `The instance has ${queued} bytes of publishes waiting to be sent on a shard, over pushDelivery.maxPendingBytesPerInstance (${maxPending}); retry in a second`);
        }
        addPending(job);
        const coordinates = coordinator.coordinates(job.publishId);
        const creating = publishes.create(job, initialProgress(job), coordinates);
        starting.set(job.publishId, creating);
        let created: boolean;
        try {
          created = await creating;
        } catch (err) {
          removePending(job);
          throw err;
        } finally {
          starting.delete(job.publishId);
        }
        if (!created) removePending(job);
        // STARTED only for a publish that is stored (a failed store answers 500 and sends nothing).
        if (created && coordinates) coordinator.started(job);
        // Answer first; the fan-out starts on the next turn. A publish stored while closing waits for the restart.
        if (created) setImmediate(() => !closing && !cancelled.has(job.publishId) && launch(job));
        return { stored: true };
      },
      'publish.cancel': async ({ publishId }) => {
        cancelled.add(publishId);
        if (cancelled.size > CANCELLED_REMEMBERED) cancelled.delete(cancelled.values().next().value!);
        await starting.get(publishId)?.catch(() => undefined);
        const active = runs.get(publishId);
        if (active) {
          active.run.stop();
          await active.done;
        }
        coordinator.forget(publishId);
        const job = publishes.job(publishId);
        if (job) removePending(job);
        const stored = await publishes.cancel(publishId);
        if (stored) log.warn('publish cancelled: not every shard stored it', { shard: ctx.shardIndex, publishId });
        return { cancelled: stored };
      },
      'publish.stats': ({ instanceId, publishId }) => {
        const partCount = ctx.shardCount;
        const running = runs.get(publishId)?.run;
        if (running) {
          if (running.job.instanceId !== instanceId) return { parts: [], partCount };
          const coordinates = running.job.kind === 'users' && coordinator.coordinates(publishId);
          return { parts: [running.stats(coordinates ? userIndexOf(running.job.targets) : undefined)], partCount };
        }
        const progress = publishes.progress(publishId);
        if (!progress || progress.instanceId !== instanceId) return { parts: [], partCount };
        return { parts: [statsOf(progress, ctx.shardIndex, progress.kind === 'users' ? publishes.targets(publishId) : undefined)], partCount };
      },
      'publish.usage': ({ instanceId }) => {
        const month = usageMonth(Date.now());
        let notifications = publishes.usageNow(instanceId, month);
        for (const { run } of runs.values()) {
          if (run.job.instanceId === instanceId) notifications += run.unpersistedNotifications();
        }
        return { month, notifications };
      },
    },
    reload: (config) => {
      gateways.reload(config.push);
      retention = retentionOf(config);
      maxPending = config.pushDelivery.maxPendingBytesPerInstance;
      trim();
    },
    close: async () => {
      closing = true;
      clearTimeout(sweepTimer);
      await stopRuns([...runs.values()], delivery.shutdownGraceMs, limiter, gateways);
      await coordinator.close();
      await publishes.flushed();
    },
  };
}
