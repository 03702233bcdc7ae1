/**
 * The partitions of cluster publishes one shard runs (cluster-handlers.ts): it claims at most
 * RUNNING_PER_SHARD at a time from PostgreSQL, so the partitions of a large publish spread over
 * the nodes; runs each as a PublishRun over the partition's devices, resuming a taken-over one
 * from its last checkpoint; and renews their leases between checkpoints.
 */
import { describeError, log, RateLimitedLog } from '../../../log.js';
import type { PostgresPublishStore } from '../../store/postgres/postgres-publish-store.js';
import { initialPartRecord } from '../../store/postgres/postgres-publish-store.js';
import { PublishRun, type PublishRunDeps } from './publish-run.js';
import type { PublishRuns } from './publish-runs.js';

/** Partitions one shard runs at once: few, so the partitions of a large publish spread over the nodes. */
const RUNNING_PER_SHARD = 2;

const failureLog = new RateLimitedLog('warn', 10_000);

export interface PartitionClaimsDeps {
  store: PostgresPublishStore;
  runs: PublishRuns;
  /** How each claimed partition runs (its checkpoints go to `store`). */
  runDeps: Omit<PublishRunDeps, 'publishes' | 'onRetained'>;
  /** Called when a partition this shard ran is finished: the publish may be complete. */
  partitionFinished: (publishId: string) => Promise<void>;
}

export class PartitionClaims {
  private readonly deps: PartitionClaimsDeps;
  private claiming: Promise<void> | undefined;
  private again = false;
  private closing = false;

  constructor(deps: PartitionClaimsDeps) {
    this.deps = deps;
  }

  /** Claims partitions while this shard has room; one claimer at a time, a wake during it claims again after. */
  wake(): void {
    if (this.closing) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = (async () => {
      do {
        this.again = false;
        while (!this.closing && this.deps.runs.size < RUNNING_PER_SHARD && (await this.launch())) {
          // claimed one; try for another
        }
      } while (this.again && !this.closing);
    })()
      .catch((err: unknown) => failureLog.write('claim', 'could not claim publish partitions from PostgreSQL', { shard: this.deps.runDeps.shardIndex, error: String(err) }))
      .finally(() => {
        this.claiming = undefined;
      });
  }

  /** Renews the leases of the partitions running here; a run whose lease passed to another node stops, storing nothing more. */
  renew(): void {
    const { store, runs } = this.deps;
    const held = runs.all().map((run) => ({ publishId: run.job.publishId, partition: run.partition! }));
    store
      .renew(held)
      .then((lost) => {
        for (const { publishId, partition } of lost) runs.get(publishId, partition)?.loseLease();
      })
      .catch((err: unknown) => failureLog.write('renew', 'could not renew publish partition leases', { shard: this.deps.runDeps.shardIndex, error: String(err) }));
  }

  /** Claims no more; resolves once a claim under way has ended. */
  async close(): Promise<void> {
    this.closing = true;
    await this.claiming;
  }

  /** Claims one partition and starts its run; false when none is free. */
  private async launch(): Promise<boolean> {
    const { store, runs, runDeps } = this.deps;
    const claimed = await store.claim();
    if (!claimed) return false;
    const { job, partition, partitions, takenOver } = claimed;
    const record = claimed.progress ?? initialPartRecord(job, partition);
    const run = new PublishRun(job, { ...record, partition }, { ...runDeps, publishes: store }, {
      partition: { index: partition, count: partitions },
      // What the previous owner may have sent past its last stored checkpoint: a checkpoint's
      // worth being written, the next one pending, and its window.
      possibleResends: takenOver ? 2 * runDeps.checkpointEvery + runDeps.windowSize : 0,
    });
    if (takenOver) log.info('publish partition taken over from a node whose lease expired', { shard: runDeps.shardIndex, publishId: job.publishId, partition });
    runs.start(
      run,
      async (outcome) => {
        if (outcome === 'finished') await this.deps.partitionFinished(job.publishId);
        this.wake();
      },
      (err) => log.error('publish partition run failed', { shard: runDeps.shardIndex, publishId: job.publishId, partition, error: describeError(err) }),
    );
    return true;
  }
}
