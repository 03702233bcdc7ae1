/**
 * Counting for the per-app rate limits (`maxHttpRequestsPerSecond`, `maxEventsPerSecond`,
 * `maxNewConnectionsPerSecond`, `maxNewConnectionsPerSecondPerIp`). A counter is asked to take
 * `cost` units of a limit named by `key` within the current one-second window; one node counts
 * in memory (local-rate-counter.ts), a cluster in Redis so the limit holds across every node
 * (the Redis channel adapter's `rateCounter`).
 */

/**
 * Fixed one-second windows: the units taken for a key within one second (the counter's clock)
 * may not pass its limit. A refusal takes nothing.
 */
export interface RateCounter {
  /**
   * Takes `cost` units of `key` if the window still has them: answers 0, or the milliseconds
   * until the window ends when the units would pass `limit` (nothing taken). May answer through
   * a promise (cluster), which rejects with CLUSTER_UNAVAILABLE when it cannot count.
   */
  take(key: string, cost: number, limit: number): number | Promise<number>;
}
