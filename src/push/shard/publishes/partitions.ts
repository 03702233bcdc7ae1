/**
 * Shard side of push publish in a cluster with `cluster.postgresUrl`: publishes live in
 * PostgreSQL (postgres-publish-store.ts), split into `cluster.publishPartitions` partitions by
 * device id hash, and every shard of every node sends whichever partitions it claims.
 *
 * - `publish.start` reaches every shard of the accepting node; the publish's home shard
 *   (shardForKey of its id) stores it with its partitions (refusing past
 *   `maxPendingBytesPerInstance` of the instance's unfinished publishes, cluster-wide), queues
 *   STARTED and notifies every node (PostgreSQL NOTIFY); the other shards answer at once.
 * - Each shard claims at most RUNNING_PER_SHARD partitions at a time, on a notification and on
 *   a 1 s poll, so a large publish spreads over every node; a claimed partition runs as a
 *   PublishRun over the partition's devices (every device of it, through a device store over
 *   the whole cluster, `devices`, not the shard's own scope), checkpointing into its row (which renews its
 *   lease; a timer renews it between checkpoints).
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
import { instanceOfNamespace } from '../../store/namespaces.js';
import { isCurrentNamespace } from '../deps.js';
import { HeraldError } from '../../../errors.js';
import { describeError, log, RateLimitedLog } from '../../../log.js';
import type { ShardArea } from '../../../shards/context.js';
import { shardForKey } from '../../../shards/hash.js';
import type { PushAreaDeps } from '../deps.js';
import type { PushDeviceStore } from '../../store/device-store.js';
import { GatewayRegistry } from './gateway-registry.js';
import { PublishRun, stopRuns } from './publish-run.js';
import { SendLimiter } from './send-limiter.js';
import { PLATFORMS, type Platform } from '../../platform.js';
import { addGatewayCounts, emptyGatewayCounts, userAttemptOutcome, webhookResults } from '../../publish-results.js';
import { packedBytes, storedJob, usageMonth } from '../../store/publish-record-store.js';
import { initialPartRecord, type CompletedPublish, type PostgresPublishStore } from '../../store/postgres/postgres-publish-store.js';
import type { PublishJob, PublishShardApi } from '../../messages/publishes.js';

/** Partitions one shard runs at once: few, so the partitions of a large publish spread over the nodes. */
const RUNNING_PER_SHARD = 2;
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

function platformsOf(job: PublishJob): Platform[] {
  return PLATFORMS.filter((platform) => job.payloads[platform] !== undefined);
}

/** Builds the publish area of one shard of a cluster node over the cluster's PostgreSQL. */
export function createClusterPublishArea(deps: PushAreaDeps, store: PostgresPublishStore, devices: PushDeviceStore): ShardArea<PublishShardApi> {
  const { ctx, webhooks } = deps;
  const delivery = ctx.config.pushDelivery;
  const cluster = ctx.config.cluster!;
  const gateways = new GatewayRegistry(ctx.config.push, delivery, ctx.config.outbound.allowPrivateAddresses, (namespace) => isCurrentNamespace(deps, namespace));
  const limiter = new SendLimiter(delivery.concurrency);
  const windowSize = Math.max(64, delivery.concurrency * 4);
  const runs = new Map<string, { run: PublishRun; publishId: string; partition: number; done: Promise<void> }>();
  const home = (key: string): boolean => shardForKey(key, ctx.shardCount) === ctx.shardIndex;
  /** Publishes whose start failed here (their home shard): their store holds nothing of them (PostgresPublishStore.create). */
  const failedStarts = new Set<string>();
  let closing = false;
  let claiming: Promise<void> | undefined;
  let again = false;

  const queueClosing = ({ job, parts }: CompletedPublish): void => {
    const gatewayCounts = emptyGatewayCounts();
    for (const part of parts) addGatewayCounts(gatewayCounts, part.gateways);
    if (job.webhookUrl) {
      webhooks.pushEvent({
        instanceId: instanceOfNamespace(job.instanceId),
        kind: 'publish.FINISHED',
        url: job.webhookUrl,
        payload: { publishId: job.publishId, status: 'FINISHED', results: webhookResults(platformsOf(job), gatewayCounts) },
      });
    }
    if (job.kind === 'users') {
      const outcome = userAttemptOutcome(job.targets, parts.map((p) => p.users ?? {}));
      webhooks.pushEvent({
        instanceId: instanceOfNamespace(job.instanceId),
        kind: 'v1.PublishToUsersAttempt',
        payload: { instance_id: instanceOfNamespace(job.instanceId), publish_id: job.publishId, ...outcome },
      });
    }
  };

  const complete = (publishId: string): Promise<void> =>
    store.complete(publishId, queueClosing).then(
      () => undefined,
      (err: unknown) => failureLog.write('complete', 'could not finish a publish in PostgreSQL (retried by the poll)', { publishId, error: String(err) }),
    );

  const launch = async (): Promise<boolean> => {
    const claimed = await store.claim();
    if (!claimed) return false;
    const { job, partition, partitions, takenOver } = claimed;
    const record = claimed.progress ?? initialPartRecord(job, partition);
    const run = new PublishRun(job, { ...record, partition }, {
      shardIndex: ctx.shardIndex,
      devices,
      publishes: store,
      gateways,
      limiter,
      checkpointEvery: delivery.checkpointEvery,
      windowSize,
    }, {
      partition: { index: partition, count: partitions },
      // What the previous owner may have sent past its last stored checkpoint: a checkpoint's
      // worth being written, the next one pending, and its window.
      possibleResends: takenOver ? 2 * delivery.checkpointEvery + windowSize : 0,
    });
    if (takenOver) log.info('publish partition taken over from a node whose lease expired', { shard: ctx.shardIndex, publishId: job.publishId, partition });
    const key = `${job.publishId}\0${partition}`;
    const done = run.run().then(
      async (outcome) => {
        runs.delete(key);
        if (outcome === 'finished') await complete(job.publishId);
        wake();
      },
      (err: unknown) => {
        runs.delete(key);
        log.error('publish partition run failed', { shard: ctx.shardIndex, publishId: job.publishId, partition, error: describeError(err) });
      },
    );
    runs.set(key, { run, publishId: job.publishId, partition, done });
    return true;
  };

  // A deleted instance's partitions running here stop (their rows are then purged).
  deps.onRetire?.(async (namespace) => {
    const active = [...runs.values()].filter(({ run }) => run.job.instanceId === namespace);
    for (const { run } of active) run.stop();
    await Promise.all(active.map((a) => a.done));
  });

  /** Claims partitions while this shard has room; one claimer at a time, a wake during it claims again after. */
  function wake(): void {
    if (closing) return;
    if (claiming) {
      again = true;
      return;
    }
    claiming = (async () => {
      do {
        again = false;
        while (!closing && runs.size < RUNNING_PER_SHARD && (await launch())) {
          // claimed one; try for another
        }
      } while (again && !closing);
    })()
      .catch((err: unknown) => failureLog.write('claim', 'could not claim publish partitions from PostgreSQL', { shard: ctx.shardIndex, error: String(err) }))
      .finally(() => {
        claiming = undefined;
      });
  }

  const renew = (): void => {
    const held = [...runs.values()].map(({ publishId, partition }) => ({ publishId, partition }));
    store
      .renew(held)
      .then((lost) => {
        for (const { publishId, partition } of lost) runs.get(`${publishId}\0${partition}`)?.run.loseLease();
      })
      .catch((err: unknown) => failureLog.write('renew', 'could not renew publish partition leases', { shard: ctx.shardIndex, error: String(err) }));
  };

  const finishOrphans = (): void => {
    store
      .unfinalized()
      .then(async (ids) => {
        for (const id of ids) await complete(id);
      })
      .catch((err: unknown) => failureLog.write('orphans', 'could not look for finished publishes in PostgreSQL', { shard: ctx.shardIndex, error: String(err) }));
  };

  const cancelLater = (publishId: string, attempt: number): void => {
    if (closing) return;
    const timer = setTimeout(() => {
      store.cancel(publishId).then(
        (cancelled) => {
          if (cancelled) log.warn('publish cancelled: its start had failed', { shard: ctx.shardIndex, publishId });
        },
        () => {
          if (attempt + 1 < LATE_CANCEL_ATTEMPTS) cancelLater(publishId, attempt + 1);
          else log.error('publish whose start failed could not be cancelled: it may be sent although the request failed', { shard: ctx.shardIndex, publishId });
        },
      );
    }, attempt === 0 ? 0 : LATE_CANCEL_EVERY_MS);
    timer.unref();
  };

  const sweep = (): void => {
    store
      .sweep(Date.now() - ctx.config.pushDelivery.retentionDays * DAY_MS)
      .then(({ publishes }) => {
        if (publishes > 0) log.info('expired publish records deleted', { shard: ctx.shardIndex, publishes });
      })
      .catch((err: unknown) => failureLog.write('sweep', 'publish retention sweep failed', { error: String(err) }));
  };

  const startListening = (): void => {
    store.listen(wake).catch((err: unknown) => failureLog.write('listen', 'could not LISTEN for publishes (polling only)', { shard: ctx.shardIndex, error: String(err) }));
  };
  const timers = [
    setInterval(() => {
      startListening();
      wake();
    }, POLL_MS),
    setInterval(renew, Math.max(250, Math.floor(cluster.publishLeaseMs / 3))),
    setInterval(finishOrphans, ORPHAN_CHECK_MS),
    setInterval(sweep, SWEEP_EVERY_MS),
  ];
  for (const timer of timers) timer.unref();
  store
    .ready()
    .then(() => {
      startListening();
      wake();
    })
    .catch((err: unknown) => failureLog.write('ready', 'publish store not ready (retried)', { shard: ctx.shardIndex, error: String(err) }));

  /** Notifications this shard's running partitions sent since their last checkpoint (of the instance). */
  const unpersisted = (instanceId: string): number => {
    let n = 0;
    for (const { run } of runs.values()) if (run.job.instanceId === instanceId) n += run.unpersistedNotifications();
    return n;
  };

  return {
    handlers: {
      'publish.start': async ({ job }) => {
        if (closing) throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is shutting down');
        if (!home(job.publishId)) return { stored: true };
        let created: boolean;
        try {
          await store.ready();
          const jobBytes = packedBytes(storedJob(job));
          const queued = await store.pendingBytes(job.instanceId);
          const maxPending = ctx.config.pushDelivery.maxPendingBytesPerInstance;
          if (queued > 0 && queued + jobBytes > maxPending) {
            throw new HeraldError('PUBLISH_BACKLOG_FULL', `The instance has ${queued} bytes of publishes waiting to be sent, over pushDelivery.maxPendingBytesPerInstance (${maxPending}); retry in a second`);
          }
          created = await store.create(job, cluster.publishPartitions);
        } catch (err) {
          failedStarts.add(job.publishId);
          if (failedStarts.size > FAILED_STARTS_REMEMBERED) failedStarts.delete(failedStarts.values().next().value!);
          throw err;
        }
        if (created && job.webhookUrl) {
          webhooks.pushEvent({
            instanceId: instanceOfNamespace(job.instanceId),
            kind: 'publish.STARTED',
            url: job.webhookUrl,
            payload: { publishId: job.publishId, status: 'STARTED', results: webhookResults(platformsOf(job), emptyGatewayCounts()) },
          });
        }
        wake();
        return { stored: true };
      },
      'publish.cancel': async ({ publishId }) => {
        for (const entry of runs.values()) if (entry.publishId === publishId) entry.run.stop();
        if (!home(publishId)) return { cancelled: false };
        if (failedStarts.delete(publishId)) {
          // Its start failed here, so nothing was stored: answered at once, not after a store
          // that may be stalled. The cancel still goes to the store once it answers, for a
          // COMMIT that succeeded although its answer never came.
          cancelLater(publishId, 0);
          return { cancelled: false };
        }
        const cancelled = await store.cancel(publishId);
        if (cancelled) log.warn('publish cancelled: it could not be stored on every shard', { shard: ctx.shardIndex, publishId });
        return { cancelled };
      },
      'publish.stats': async ({ instanceId, publishId }) => {
        if (!home(publishId)) return { parts: [], partCount: 0 };
        const parts = await store.statsParts(instanceId, publishId);
        return { parts, partCount: parts.length };
      },
      'publish.usage': async ({ instanceId }) => {
        const month = usageMonth(Date.now());
        const stored = home(instanceId) ? await store.usage(instanceId, month) : 0;
        return { month, notifications: stored + unpersisted(instanceId) };
      },
    },
    reload: (config) => gateways.reload(config.push),
    close: async () => {
      closing = true;
      for (const timer of timers) clearInterval(timer);
      await claiming;
      await stopRuns([...runs.values()], delivery.shutdownGraceMs, limiter, gateways);
      await store.release().catch(() => undefined);
      await store.close();
    },
  };
}
