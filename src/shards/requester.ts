/**
 * What a main-thread area client needs from the shards (type-only): requests typed by the
 * area's own slice of the shard API. ShardPool implements it; area clients take it instead of
 * the pool, so they see their own requests only.
 */
import type { ShardRequestOf, ShardRequestType, ShardResponseOf } from './messages.js';

/** Called with the shard index when a shard's worker was replaced (its memory is gone). */
export type ShardRestartListener = (shard: number) => void;

export interface ShardRequester<Api> {
  readonly shardCount: number;
  /** Sends one request to a shard and resolves with its answer. Throws HeraldError. */
  request<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>, timeoutMs?: number): Promise<ShardResponseOf<Api, K>>;
  /** Fire-and-forget: failures are logged, never thrown. */
  send<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>): void;
  /** The same request to every shard, in parallel; answers in shard order. */
  broadcast<K extends ShardRequestType<Api>>(message: ShardRequestOf<Api, K>, timeoutMs?: number): Promise<ShardResponseOf<Api, K>[]>;
  /** Registers a listener told when a shard's worker died and was replaced (see ShardPool). */
  onShardRestart(listener: ShardRestartListener): void;
}
