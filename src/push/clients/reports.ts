/**
 * Main-thread client of delivery reports: a report is recorded on the shard that owns its
 * device; a publish's counts are summed over every shard.
 */
import { deviceShardFor } from '../../shards/hash.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { DeliveryReport, ReportCounts, ReportOutcome, ReportShardApi } from '../messages/reports.js';

export class ReportsClient {
  constructor(private readonly shards: ShardRequester<ReportShardApi>) {}

  /** Records a delivery report on its device's shard. */
  async record(report: DeliveryReport): Promise<ReportOutcome> {
    const { outcome } = await this.shards.request(deviceShardFor(report.deviceId, this.shards.shardCount), { type: 'report.record', report });
    return outcome;
  }

  /** Delivered and opened reports of a publish, summed over the shards. */
  async counts(instanceId: string, publishId: string): Promise<Pick<ReportCounts, 'delivered' | 'opened'>> {
    const counts = await this.shards.broadcast({ type: 'report.counts', instanceId, publishId });
    let delivered = 0;
    let opened = 0;
    for (const c of counts) {
      delivered += c.delivered;
      opened += c.opened;
    }
    return { delivered, opened };
  }
}
