/** What main-thread handlers share: config, app registry, shards, channel adapter. */
import type { TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig, PushInstanceConfig } from './config/schema.js';
import type { ShardPool } from './shards/pool.js';
import type { ChannelAdapter } from './channels/adapter/channel-adapter.js';

export interface ServerState {
  /** Accepting traffic (GET /ready answers 200). */
  ready: boolean;
  /** Shutting down: new connections and requests are refused. */
  draining: boolean;
}

export interface ServerContext {
  /** The running config; a reload (SIGHUP) replaces it, so read it when needed, not once. */
  config: Readonly<HeraldConfig>;
  readonly app: TemplatedApp;
  readonly shards: ShardPool;
  /** Apps and push instances of the running config; a reload updates these maps in place. */
  readonly appsById: ReadonlyMap<string, AppConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly pushInstances: ReadonlyMap<string, PushInstanceConfig>;
  readonly installSecret: string;
  readonly state: ServerState;
  /** Set once the channel area has registered its WebSocket endpoint. */
  channels: ChannelAdapter;
}
