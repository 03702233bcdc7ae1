/**
 * Main-thread client of publishes: every shard stores each publish and fans out over its own
 * devices, so a publish starts on all shards, and what the API answers about one (usage,
 * statistics) is the merge of every shard's part.
 */
import { log } from '../../log.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { PublishJob, PublishShardApi } from '../messages/publishes.js';
import { mergePublishStats, type MergedPublishStats } from '../publish-results.js';

/** An instance's notifications of the current UTC month, over every shard. */
export interface NotificationUsage {
  /** `YYYY-MM` (UTC). */
  month: string;
  notifications: number;
}

export class PublishesClient {
  constructor(private readonly shards: ShardRequester<PublishShardApi>) {}

  /**
   * Stores the publish on every shard; resolves once all have it durably. If any shard fails
   * (crash, timeout), sends `publish.cancel` to every shard (those that stored it stop and drop
   * it; one whose start is still queued will not run it) and then rejects with that failure.
   */
  async start(job: PublishJob): Promise<void> {
    const shards = Array.from({ length: this.shards.shardCount }, (_, shard) => shard);
    const started = await Promise.allSettled(shards.map((shard) => this.shards.request(shard, { type: 'publish.start', job })));
    const failure = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
    if (!failure) return;
    const cancels = await Promise.allSettled(shards.map((shard) => this.shards.request(shard, { type: 'publish.cancel', publishId: job.publishId })));
    cancels.forEach((result, shard) => {
      // A shard that did not store the publish cannot send it; one that did and missed the cancel would.
      if (result.status === 'rejected' && started[shard]!.status === 'fulfilled') {
        log.error('publish stored on a shard that could not be told to cancel it: it may be sent although the request failed', {
          publishId: job.publishId, shard, error: String(result.reason),
        });
      }
    });
    throw failure.reason;
  }

  /** Notifications sent this month by the instance, summed over the shards (each answering within `timeoutMs` when given). */
  async usage(instanceId: string, timeoutMs?: number): Promise<NotificationUsage> {
    const answers = await this.shards.broadcast({ type: 'publish.usage', instanceId }, timeoutMs);
    // Shards agree on the month except across a month boundary: count the latest month only.
    const month = answers.reduce((latest, a) => (a.month > latest ? a.month : latest), '');
    const notifications = answers.reduce((sum, a) => sum + (a.month === month ? a.notifications : 0), 0);
    return { month, notifications };
  }

  /** One publish merged over every shard that has a record of it; null when none does. */
  async stats(instanceId: string, publishId: string): Promise<MergedPublishStats | null> {
    const answers = await this.shards.broadcast({ type: 'publish.stats', instanceId, publishId });
    return mergePublishStats(
      answers.flatMap((a) => a.parts),
      Math.max(0, ...answers.map((a) => a.partCount)),
    );
  }
}
