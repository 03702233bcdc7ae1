/** Main-thread client of the webhooks area: delivery counters, summed over the shards. */
import type { ShardRequester } from '../shards/requester.js';
import type { WebhookShardApi, WebhookStats } from './messages.js';

/** Every shard's webhook counters and their sum. */
export interface WebhookStatsReport {
  total: Omit<WebhookStats, 'shard'>;
  shards: WebhookStats[];
}

/** Sums every numeric field of the shards' webhook stats except the shard index. */
export function sumWebhookStats(perShard: readonly WebhookStats[]): Omit<WebhookStats, 'shard'> {
  const total = { sent: 0, requests: 0, failedAttempts: 0, deadLettered: 0, suppressed: 0, pending: 0, held: 0, inFlight: 0, receivers: 0, deadLetterStored: 0 };
  for (const s of perShard) {
    for (const k of Object.keys(total) as (keyof typeof total)[]) total[k] += s[k];
  }
  return total;
}

/** Of a drain's time, what a shard keeps for its answer to reach the main thread, ms. */
const DRAIN_ANSWER_MS = 200;

export class WebhooksClient {
  constructor(private readonly shards: ShardRequester<WebhookShardApi>) {}

  /** Every shard's counters (each must answer within `timeoutMs`) and their sum. */
  async stats(timeoutMs: number): Promise<WebhookStatsReport> {
    const shards = await this.shards.broadcast({ type: 'webhooks.stats' }, timeoutMs);
    return { total: sumWebhookStats(shards), shards };
  }

  /**
   * Gives every shard's outbox up to `waitMs` to make a first attempt at each event due now
   * (webhooks.drain); resolves with how many had none, over all shards. Rejects when a shard
   * does not answer within `waitMs` (a stuck shard must not hold up the shutdown).
   */
  async drain(waitMs: number): Promise<number> {
    const shards = await this.shards.broadcast({ type: 'webhooks.drain', waitMs: Math.max(0, waitMs - DRAIN_ANSWER_MS) }, waitMs);
    return shards.reduce((sum, s) => sum + s.left, 0);
  }
}
