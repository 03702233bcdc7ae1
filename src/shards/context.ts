/** Worker-side context handed to each area's shard handlers. Never imported by main-thread code. */
import type { RootDatabase } from 'lmdb';
import type { AppConfig, HeraldConfig, PushInstanceConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';

export interface ShardContext {
  readonly shardIndex: number;
  readonly shardCount: number;
  readonly dataDir: string;
  /** The running config; replaced by a reload (SIGHUP), so read it when needed, not once. */
  config: Readonly<HeraldConfig>;
  readonly installSecret: string;
  /** This shard's LMDB environment; areas open named sub-databases in it. */
  readonly root: RootDatabase;
  /** Test-only requests are answered (HERALD_TEST_HOOKS=1, or the pool's `testHooks`). */
  readonly testHooks: boolean;
  /**
   * Runs `run` once the server accepts clients on every front end (`core.serving`): at once in
   * a worker started after that (a crash replacement), or without the pool's `holdUntilServing`.
   * What a client must have a chance to answer (a page-reload debounce) is timed from there.
   */
  readonly onServing: (run: () => void) => void;
}

/** Apps and push instances added or changed (whole entries) and removed (ids), as `core.tenants` carries them. */
export interface TenantChange {
  apps?: AppConfig[];
  removedApps?: string[];
  push?: PushInstanceConfig[];
  removedPush?: string[];
}

/** Handlers for one area's slice of the shard API. */
export type ShardHandlers<Api> = {
  [K in keyof Api]: Api[K] extends { req: infer Q; res: infer R } ? (req: Q) => R | Promise<R> : never;
};

/** What an area's factory returns: its handlers and how to stop its background work. */
export interface ShardArea<Api> {
  handlers: ShardHandlers<Api>;
  /** Stop timers, finish or persist in-flight work; called before LMDB closes. */
  close?: () => Promise<void>;
  /** Take a reloaded config (apps, push instances, credentials); called on every shard. */
  reload?: (config: Readonly<HeraldConfig>) => void;
  /**
   * Request types that add to storage: refused with STORAGE_FULL (507) before they run while
   * the data dir's disk is full (see disk-full.ts). Reads and deletes are not listed: they go on.
   */
  storageWrites?: readonly (keyof Api & string)[];
  /**
   * Take a few apps or push instances changed at run time (admin API) without rebuilding the
   * others; areas without it get `reload` with the patched config instead.
   */
  tenantsChanged?: (change: TenantChange, config: Readonly<HeraldConfig>) => void;
}

/** A handler of any request type, as the runtime dispatches to it. */
export type AnyHandler = (req: unknown) => unknown;

/**
 * One table of every request type's handler (null prototype: a request type is never an
 * Object.prototype name). A type answered twice is a bug, refused where the areas are joined.
 */
export function mergeHandlers(maps: readonly object[]): Record<string, AnyHandler> {
  const merged = Object.create(null) as Record<string, AnyHandler>;
  for (const map of maps) {
    for (const [type, handler] of Object.entries(map) as [string, AnyHandler][]) {
      if (type in merged) throw new Error(`shard request type ${type} is answered by two areas`);
      merged[type] = handler;
    }
  }
  return merged;
}

/** Refuses a test-only request unless test hooks are on (the request then does not exist). */
export function requireTestHooks(ctx: Pick<ShardContext, 'testHooks'>, type: string): void {
  if (!ctx.testHooks) throw new HeraldError('ROUTE_NOT_FOUND', `${type} is a test hook: it needs HERALD_TEST_HOOKS=1`);
}
