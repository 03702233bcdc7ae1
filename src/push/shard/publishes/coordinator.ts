/**
 * Completion of a publish across shards. Every shard fans out its own devices; one shard per
 * publish, `shardForKey(publishId, shardCount)`, is its coordinator: it queues the STARTED
 * webhook once the publish is stored, collects every shard's finished part, and once all are in
 * queues FINISHED (per-gateway counts over all shards) and, for user publishes,
 * `v1.PublishToUsersAttempt`. Shards talk over a BroadcastChannel between worker threads,
 * without the main thread.
 *
 * Restart safety (at-least-once, no loss):
 * - a shard keeps its finished part "unreported" (LMDB) until the coordinator acknowledges it,
 *   and re-posts unacknowledged reports with backoff, and at start-up;
 * - the coordinator stores each report before acknowledging it, and stores "finalized" in the
 *   same turn as queuing the webhooks (the outbox's write is issued first, and LMDB commits
 *   writes in order), so a crash either leaves it un-finalized (webhooks queued again on
 *   start) or finalized with the webhooks stored;
 * - a coordinator that starts asks every shard to re-post what it has not had acknowledged.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { log } from '../../../log.js';
import { logWriteFailure } from '../../../shards/disk-full.js';
import { shardForKey } from '../../../shards/hash.js';
import type { WebhookEmitter } from '../../../webhooks/emitter.js';
import type { LmdbPublishStore } from './lmdb-publish-store.js';
import type { CoordinatorRecord, ShardReport } from '../../store/publish-record-store.js';
import { queueClosing, queueStarted } from './publish-webhooks.js';
import type { PublishJob } from '../../messages/publishes.js';

/** What shards say to each other about publishes. */
export type PublishBusMessage =
  | { type: 'finished'; report: ShardReport }
  | { type: 'ack'; publishId: string; shard: number }
  | { type: 'resend' };

/** A channel every shard of one server posts to and hears from (not its own posts). */
export interface PublishBus {
  post(message: PublishBusMessage): void;
  onMessage(handler: (message: PublishBusMessage) => void): void;
  close(): void;
}

/** The bus over node's BroadcastChannel; `name` should be unique per server (several may share a process). */
export function broadcastChannelBus(name: string): PublishBus {
  const channel = new BroadcastChannel(name);
  channel.unref();
  return {
    post: (message) => channel.postMessage(message),
    onMessage: (handler) => {
      channel.onmessage = (event: unknown) => handler((event as { data: PublishBusMessage }).data);
    },
    close: () => channel.close(),
  };
}

/** First re-post delay of an unacknowledged report (ms); doubles up to RESEND_MAX_MS. */
const RESEND_FIRST_MS = 500;
const RESEND_MAX_MS = 60_000;

export interface PublishCoordinatorDeps {
  shardIndex: number;
  shardCount: number;
  publishes: LmdbPublishStore;
  webhooks: WebhookEmitter;
  bus: PublishBus;
}

/** Both roles of one shard: reporting its finished parts, and coordinating the publishes it owns. */
export class PublishCoordinator {
  private readonly deps: PublishCoordinatorDeps;
  /** Reports of this shard not yet acknowledged, with when to post them again. */
  private readonly unacked = new Map<string, { report: ShardReport; nextAt: number; delayMs: number }>();
  private timer: NodeJS.Timeout | undefined;
  /** Coordinator work runs one at a time, so two reports cannot both finalize. */
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(deps: PublishCoordinatorDeps) {
    this.deps = deps;
    deps.bus.onMessage((message) => this.onMessage(message));
  }

  /** True when this shard coordinates the publish. */
  coordinates(publishId: string): boolean {
    return shardForKey(publishId, this.deps.shardCount) === this.deps.shardIndex;
  }

  /** Coordinator, once the job is stored: queue STARTED. */
  started(job: PublishJob): void {
    queueStarted(this.deps.webhooks, job);
  }

  /** This shard's part is finished and stored: tell the coordinator until it acknowledges. */
  partFinished(report: ShardReport): void {
    if (this.closed) return;
    if (this.coordinates(report.publishId)) {
      this.enqueue(() => this.receive(report));
      return;
    }
    this.unacked.set(report.publishId, { report, nextAt: Date.now() + RESEND_FIRST_MS, delayMs: RESEND_FIRST_MS });
    this.deps.bus.post({ type: 'finished', report });
    this.timer ??= setInterval(() => this.resendDue(false), RESEND_FIRST_MS).unref();
  }

  /** The publish was cancelled: stop re-posting this shard's report of it. */
  forget(publishId: string): void {
    this.unacked.delete(publishId);
  }

  /**
   * Start-up: report parts finished before the restart but never acknowledged, finalize what
   * this shard coordinates and already has complete, and ask the others to re-post.
   */
  resume(unreported: readonly ShardReport[]): void {
    for (const report of unreported) this.partFinished(report);
    for (const publishId of this.deps.publishes.openCoordinatorIds()) {
      this.enqueue(async () => {
        const record = this.deps.publishes.coordinator(publishId);
        if (record) await this.maybeFinalize(publishId, record);
      });
    }
    this.deps.bus.post({ type: 'resend' });
  }

  /** Stops posting; resolves when queued coordinator work is done. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    this.timer = undefined;
    await this.queue;
    this.deps.bus.close();
  }

  private onMessage(message: PublishBusMessage): void {
    if (this.closed) return;
    switch (message.type) {
      case 'finished':
        if (this.coordinates(message.report.publishId)) this.enqueue(() => this.receive(message.report));
        break;
      case 'ack':
        if (message.shard === this.deps.shardIndex && this.unacked.delete(message.publishId)) {
          this.deps.publishes.markReported(message.publishId).catch((err: unknown) => logWriteFailure(err, 'could not store a publish report ack'));
        }
        break;
      case 'resend':
        this.resendDue(true);
        break;
    }
  }

  private resendDue(all: boolean): void {
    const now = Date.now();
    for (const entry of this.unacked.values()) {
      if (!all && entry.nextAt > now) continue;
      entry.delayMs = Math.min(RESEND_MAX_MS, entry.delayMs * 2);
      entry.nextAt = now + entry.delayMs;
      this.deps.bus.post({ type: 'finished', report: entry.report });
    }
    if (this.unacked.size === 0) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private enqueue(work: () => Promise<void>): void {
    this.queue = this.queue.then(work).catch((err: unknown) => logWriteFailure(err, 'publish coordination failed'));
  }

  /** Coordinator: store a shard's report, acknowledge it, finalize when every shard has reported. */
  private async receive(report: ShardReport): Promise<void> {
    const record = await this.deps.publishes.saveReport(report);
    if (report.shard === this.deps.shardIndex) await this.deps.publishes.markReported(report.publishId);
    else if (!this.closed) this.deps.bus.post({ type: 'ack', publishId: report.publishId, shard: report.shard });
    await this.maybeFinalize(report.publishId, record);
  }

  private async maybeFinalize(publishId: string, record: CoordinatorRecord): Promise<void> {
    if (record.finalized) return;
    const parts: ShardReport[] = [];
    for (let shard = 0; shard < this.deps.shardCount; shard++) {
      const part = record.parts[shard];
      if (!part) return;
      parts.push(part);
    }
    const job = this.deps.publishes.job(publishId);
    if (!job) {
      // Only when this shard never stored the publish (its publish.start failed): nothing to say.
      log.warn('publish complete on every shard but unknown to its coordinator', { publishId });
      await this.deps.publishes.markFinalized(publishId);
      return;
    }
    queueClosing(this.deps.webhooks, job, parts);
    // Same turn as queuing the webhooks: their outbox writes commit no later than this one.
    await this.deps.publishes.markFinalized(publishId);
  }
}
