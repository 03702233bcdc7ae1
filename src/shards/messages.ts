/**
 * Messages between the main thread and the shard workers: type-only, shared by both sides,
 * encoded with msgpackr. Generic: an area declares its own `{type: {req, res}}` pairs in its
 * `messages.ts`, and the shard entry's API type (src/shard-api.ts) joins them. A request
 * `{type: K, ...Api[K]['req']}` answers `Api[K]['res']`.
 */
import type { MessagePort } from 'node:worker_threads';
import type { ShardMetrics } from './shard-metrics.js';
import type { AppConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';

export interface CoreShardApi {
  /** Liveness and identity; used at start-up and by /health. */
  'core.ping': { req: {}; res: { shardIndex: number; pid: number; uptimeMs: number; serving: boolean } };
  /** This shard's counters for GET /metrics (since the worker started). */
  'core.metrics': { req: {}; res: ShardMetrics };
  /** A reloaded config (SIGHUP): apps, push instances and their limits and credentials. */
  'core.reload': { req: { config: HeraldConfig }; res: { reloaded: true } };
  /**
   * Apps or push instances added, changed or removed at run time (admin API): the shard patches
   * its running config with these entries only and hands it to every area's reload hook.
   */
  'core.tenants': { req: { apps?: AppConfig[]; removedApps?: string[]; push?: PushInstanceConfig[]; removedPush?: string[] }; res: { applied: true } };
  /**
   * A front end's own line to this shard: `port` (transferred beside the envelope, see
   * ShardPortTask) then carries that front end's envelopes, answered as Piscina tasks are, each
   * reply tagged with its envelope's id (ShardPortReply). A second attach of the same front end
   * replaces its port. `awaitRestoreOf` (given when the worker replaces one that died): the front
   * ends whose restore comes first; each one's requests after its `core.restored` are held
   * until every one of them has sent its own.
   */
  'core.attachFrontEnd': { req: { frontEnd: number; port: MessagePort; awaitRestoreOf?: number[] }; res: { attached: true } };
  /** Closes a front end's port (its thread is gone); false if it had none. */
  'core.detachFrontEnd': { req: { frontEnd: number }; res: { detached: boolean } };
  /**
   * Sent on a front end's port right after the requests that restore what it held in the shard
   * (a PortShardRequester sends it itself after its restart listeners); see core.attachFrontEnd.
   */
  'core.restored': { req: {}; res: { restored: true } };
  /** The server accepts clients on every front end (ShardPool.markServing): what waits on ShardContext.onServing runs. */
  'core.serving': { req: {}; res: { serving: true } };
  /** Flush pending writes and close LMDB; the shard answers nothing else afterwards. */
  'core.close': { req: {}; res: { closed: true } };
  /**
   * Test hook, honoured only with test hooks on (HERALD_TEST_HOOKS=1; ROUTE_NOT_FOUND
   * otherwise): the worker blocks its thread for `stallMs` (requests sent meanwhile pile up
   * on it), then exits abruptly, as a crashed worker would. It never answers.
   */
  'core.crash': { req: { stallMs?: number }; res: never };
  /**
   * Test hook, honoured only with test hooks on like core.crash: the worker blocks its
   * thread for `stallMs` (at most 10 000; requests sent meanwhile wait), then answers and goes on.
   */
  'core.stall': { req: { stallMs: number }; res: { stalledMs: number } };
}

/** The request types of a shard API. */
export type ShardRequestType<Api> = keyof Api & string;
/** A request of type K: its tag plus its payload. */
export type ShardRequestOf<Api, K extends ShardRequestType<Api>> = { type: K } & (Api[K] extends { req: infer Q } ? Q : never);
/** What a request of type K answers. */
export type ShardResponseOf<Api, K extends ShardRequestType<Api>> = Api[K] extends { res: infer R } ? R : never;
/** Any request of the API. */
export type ShardRequest<Api> = { [K in ShardRequestType<Api>]: ShardRequestOf<Api, K> }[ShardRequestType<Api>];

/**
 * A request as the main thread sends it: the request, wrapped (never mixed into it), with
 * `id` (for logs) and `deadline`, epoch ms after which the main thread no longer waits for the
 * answer. A shard that reaches a request past its deadline (it was queued behind a stall)
 * answers SHARD_UNAVAILABLE without running it: the caller has already been told it failed.
 */
export interface ShardEnvelope {
  id: number;
  deadline: number;
  request: { type: string };
}

/**
 * What a shard sends back for every request: a value or an expected error from the catalogue,
 * and `boot`, the answering worker's thread id (unique per process, growing): a higher one than
 * before means the shard's worker was replaced and its in-memory state is gone.
 */
export type ShardReply = ({ ok: true; value: unknown } | { ok: false; code: string; message: string }) & { boot: number };

/**
 * A Piscina task that hands the worker a MessagePort: the encoded envelope, plus the port
 * (in the task's transferList; msgpackr cannot carry it), which the worker puts back into the
 * decoded request as its `port`. Every other task is the encoded envelope alone.
 */
export interface ShardPortTask {
  envelope: Uint8Array;
  port: MessagePort;
}

/** A reply on a front end's port: many requests share it, so each reply names its envelope's id. */
export type ShardPortReply = ShardReply & { id: number };

/** Passed to every worker at start-up. */
export interface ShardWorkerData {
  shardIndex: number;
  shardCount: number;
  dataDir: string;
  /** The frozen config, as JSON-compatible data. */
  config: unknown;
  /** Per-installation secret (hex) from the data dir, for ids that must be unguessable. */
  installSecret: string;
  /** Test-only requests (core.crash, core.stall, debug reads) are answered. */
  testHooks: boolean;
  /** The server already accepts clients (false until ShardPool.markServing): see ShardContext.onServing. */
  serving: boolean;
}
