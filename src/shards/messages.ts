/**
 * Messages between the main thread and the shard workers: type-only tagged unions, shared
 * by both sides, encoded with msgpackr. Each area declares its own request/response pairs
 * in its own module; this file joins them. A request `{type: K, ...ShardApi[K]['req']}`
 * answers `ShardApi[K]['res']`.
 */
import type { ChannelShardApi } from '../channels/shard-api.js';
import type { PushShardApi } from '../push/shard-api.js';
import type { WebhookShardApi } from '../webhooks/shard-api.js';

 
export interface CoreShardApi {
  /** Liveness and identity; used at start-up and by /health. */
  'core.ping': { req: {}; res: { shardIndex: number; pid: number; uptimeMs: number } };
  /** Flush pending writes and close LMDB; the shard answers nothing else afterwards. */
  'core.close': { req: {}; res: { closed: true } };
}

export interface ShardApi extends CoreShardApi, ChannelShardApi, PushShardApi, WebhookShardApi {}

export type ShardRequestType = keyof ShardApi;
export type ShardRequestOf<K extends ShardRequestType> = { type: K } & ShardApi[K]['req'];
export type ShardResponseOf<K extends ShardRequestType> = ShardApi[K]['res'];
export type ShardRequest = { [K in ShardRequestType]: ShardRequestOf<K> }[ShardRequestType];

/** What a shard sends back for every request: a value or an expected error from the catalogue. */
export type ShardReply =
  | { ok: true; value: unknown }
  | { ok: false; code: string; message: string };

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
