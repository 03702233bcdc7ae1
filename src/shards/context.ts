/** Worker-side context handed to each area's shard handlers. Never imported by main-thread code. */
import type { RootDatabase } from 'lmdb';
import type { HeraldConfig } from '../config/schema.js';

export interface ShardContext {
  readonly shardIndex: number;
  readonly shardCount: number;
  readonly dataDir: string;
  /** The running config; replaced by a reload (SIGHUP), so read it when needed, not once. */
  config: Readonly<HeraldConfig>;
  readonly installSecret: string;
  /** This shard's LMDB environment; areas open named sub-databases in it. */
  readonly root: RootDatabase;
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
}
