/**
 * The Redis keys of a cluster's shared webhook outbox (shared-outbox.ts), under the cluster's
 * `keyPrefix` (docs/scaling.md lists every key). The channel adapter's Lua scripts write the
 * held and released channel webhooks to the same keys (channels/adapter/redis/scripts.ts), so
 * both must change together.
 */
export class SharedOutboxKeys {
  constructor(readonly prefix: string) {}

  /**
   * STREAM of the cluster's webhook outbox (field `m`: one JSON message, shared-outbox.ts),
   * read by every node's shards through the consumer group `delivery`; an entry is deleted once
   * delivered or dead-lettered.
   */
  webhookOutbox(): string {
    return `${this.prefix}webhooks`;
  }

  /** STREAM of dead-lettered webhooks (capped to about MAX_DEAD_LETTERS). */
  webhookDeadLetters(): string {
    return `${this.prefix}webhooks:dead`;
  }

  /**
   * ZSET of webhooks held by the page-reload debounce, by due time (Redis time, ms): member
   * `c|<cid>|<token>` (channel_vacated) or `m|<cid>|<token>|<userId>` (member_removed). Any node
   * releases due ones into webhookOutbox unless a join cancelled their hold.
   */
  webhookHeld(): string {
    return `${this.prefix}webhooks:held`;
  }
}
