/**
 * The publish runs under way on one shard, with the gateway clients and the send limiter they
 * share. Both publish areas keep their runs here: one node's (handlers.ts, a run per publish)
 * and a cluster's (cluster-handlers.ts, a run per claimed partition).
 */
import type { PushInstanceConfig } from '../../../config/schema.js';
import { isCurrentNamespace, type PushAreaDeps } from '../deps.js';
import { GatewayRegistry } from './gateway-registry.js';
import { stopRuns, type PublishRun } from './publish-run.js';
import { SendLimiter } from './send-limiter.js';

/** A run's key: its publish id, and in a cluster its partition. */
function keyOf(publishId: string, partition: number | undefined): string {
  return partition === undefined ? publishId : `${publishId}\0${partition}`;
}

export class PublishRuns {
  readonly gateways: GatewayRegistry;
  readonly limiter: SendLimiter;
  private readonly runs = new Map<string, { run: PublishRun; done: Promise<void> }>();

  /** Builds the shard's gateway clients and send limiter; a retired namespace's runs stop before it is retired. */
  constructor(deps: PushAreaDeps) {
    const { ctx } = deps;
    const delivery = ctx.config.pushDelivery;
    this.gateways = new GatewayRegistry(ctx.config.push, delivery, ctx.config.outbound.allowPrivateAddresses, (namespace) => isCurrentNamespace(deps, namespace));
    this.limiter = new SendLimiter(delivery.concurrency);
    // A deleted instance's runs stop before its namespace is retired, so nothing is written to it once purged.
    deps.onRetire?.((namespace) => this.stopAndWait((run) => run.job.instanceId === namespace));
  }

  /** Runs under way. */
  get size(): number {
    return this.runs.size;
  }

  /** Every run under way. */
  all(): PublishRun[] {
    return Array.from(this.runs.values(), ({ run }) => run);
  }

  /** The run of a publish (a cluster: of one partition of it), if one is under way here. */
  get(publishId: string, partition?: number): PublishRun | undefined {
    return this.runs.get(keyOf(publishId, partition))?.run;
  }

  /**
   * Starts `run` and keeps it until it ends; then it is gone from here before `ended` gets its
   * outcome, or `failed` its error (a bug: runs store their failures as outcomes).
   */
  start(run: PublishRun, ended: (outcome: Awaited<ReturnType<PublishRun['run']>>) => unknown, failed: (err: unknown) => void): void {
    const key = keyOf(run.job.publishId, run.partition);
    const done = run.run().then(
      async (outcome) => {
        this.runs.delete(key);
        await ended(outcome);
      },
      (err: unknown) => {
        this.runs.delete(key);
        failed(err);
      },
    );
    this.runs.set(key, { run, done });
  }

  /** Stops the runs `which` picks and resolves once each has stored its checkpoint. */
  async stopAndWait(which: (run: PublishRun) => boolean): Promise<void> {
    const active = [...this.runs.values()].filter(({ run }) => which(run));
    for (const { run } of active) run.stop();
    await Promise.all(active.map((a) => a.done));
  }

  /** Notifications the instance's runs here sent since their last checkpoint (not yet in the stored usage). */
  unpersistedNotifications(instanceId: string): number {
    let n = 0;
    for (const { run } of this.runs.values()) if (run.job.instanceId === instanceId) n += run.unpersistedNotifications();
    return n;
  }

  /** Gateway settings changed (a reload or a tenant change). */
  reload(push: readonly PushInstanceConfig[]): void {
    this.gateways.reload(push);
  }

  /**
   * Shutdown: stops every run, gives their sends `graceMs` to settle, cuts the rest, closes the
   * gateway clients; resolves once every run has stored its checkpoint.
   */
  close(graceMs: number): Promise<void> {
    return stopRuns([...this.runs.values()], graceMs, this.limiter, this.gateways);
  }
}
