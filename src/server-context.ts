/** What main-thread handlers share: config, app registry, shards, channel adapter. */
import type { TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig, PushInstanceConfig } from './config/schema.js';
import type { ShardPool } from './shards/pool.js';
import type { ChannelAdapter } from './channels/adapter/channel-adapter.js';
import type { DebugTap } from './admin/tap.js';

export interface ServerState {
  /** Accepting traffic (GET /ready answers 200). */
  ready: boolean;
  /** Shutting down: new connections and requests are refused. */
  draining: boolean;
}

export interface ServerContext {
  readonly config: Readonly<HeraldConfig>;
  readonly app: TemplatedApp;
  readonly shards: ShardPool;
  readonly appsById: ReadonlyMap<string, AppConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly pushInstances: ReadonlyMap<string, PushInstanceConfig>;
  readonly installSecret: string;
  readonly state: ServerState;
  /** Where the front end reports connections, subscriptions and events for the dashboard (src/admin). */
  readonly debug: DebugTap;
  /** Set once the channel area has registered its WebSocket endpoint. */
  channels: ChannelAdapter;
}
