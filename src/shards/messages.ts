/**
 * Messages between the main thread and the shard workers: type-only tagged unions, shared
 * by both sides, encoded with msgpackr. Each area declares its own request/response pairs
 * in its own module; this file joins them. A request `{type: K, ...ShardApi[K]['req']}`
 * answers `ShardApi[K]['res']`.
 */
import type { ChannelShardApi } from '../channels/shard-api.js';
import type { PushShardApi } from '../push/shard-api.js';
import type { WebhookShardApi } from '../webhooks/shard-api.js';
import type { ShardMetrics } from '../metrics/shard-metrics.js';
import type { HeraldConfig } from '../config/schema.js';

export interface CoreShardApi {
  /** Liveness and identity; used at start-up and by /health. */
  'core.ping': { req: {}; res: { shardIndex: number; pid: number; uptimeMs: number } };
  /** This shard's counters for GET /metrics (since the worker started). */
  'core.metrics': { req: {}; res: ShardMetrics };
  /** A reloaded config (SIGHUP): apps, push instances and their limits and credentials. */
  'core.reload': { req: { config: HeraldConfig }; res: { reloaded: true } };
  /** Flush pending writes and close LMDB; the shard answers nothing else afterwards. */
  'core.close': { req: {}; res: { closed: true } };
  /**
   * Test hook, honoured only when the worker sees HERALD_TEST_HOOKS=1 (ROUTE_NOT_FOUND
   * otherwise): the worker blocks its thread for `holdMs` (requests sent meanwhile pile up
   * on it), then exits abruptly, as a crashed worker would. It never answers.
   */
  'core.crash': { req: { holdMs?: number }; res: never };
  /**
   * Test hook, honoured only with HERALD_TEST_HOOKS=1 like core.crash: the worker blocks its
   * thread for `holdMs` (at most 10 000; requests sent meanwhile wait), then answers and goes on.
   */
  'core.hold': { req: { holdMs: number }; res: { heldMs: number } };
}

export interface ShardApi extends CoreShardApi, ChannelShardApi, PushShardApi, WebhookShardApi {}

export type ShardRequestType = keyof ShardApi;
export type ShardRequestOf<K extends ShardRequestType> = { type: K } & ShardApi[K]['req'];
export type ShardResponseOf<K extends ShardRequestType> = ShardApi[K]['res'];
export type ShardRequest = { [K in ShardRequestType]: ShardRequestOf<K> }[ShardRequestType];

/**
 * A request as the main thread sends it: the request plus `id` (for logs) and `deadline`,
 * epoch ms after which the main thread no longer waits for the answer. A shard that reaches
 * a request past its deadline (it was queued behind a stall) answers SHARD_UNAVAILABLE
 * without running it: the caller has already been told it failed.
 */
export type ShardEnvelope = ShardRequest & { id: number; deadline: number };

/**
 * What a shard sends back for every request: a value or an expected error from the catalogue,
 * and `boot`, the answering worker's thread id (unique per process, growing): a higher one than
 * before means the shard's worker was replaced and its in-memory state is gone.
 */
export type ShardReply = ({ ok: true; value: unknown } | { ok: false; code: string; message: string }) & { boot: number };

/** Passed to every worker at start-up. */
export interface ShardWorkerData {
  shardIndex: number;
  shardCount: number;
  dataDir: string;
  /** The frozen config, as JSON-compatible data. */
  config: unknown;
  /** Per-installation secret (hex) from the data dir, for ids that must be unguessable. */
  installSecret: string;
}
