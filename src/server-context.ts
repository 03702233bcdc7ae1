/**
 * What the composition root (server.ts) hands to route modules: config, the app and instance
 * registries and one main-thread client per area. Each route module takes only the fields it
 * uses (`Pick<ServerContext, ...>`); none sees the shard pool or the uWS app.
 */
import type { ReadonlyIdOrderedMap } from './tenants/id-ordered-map.js';
import type { AppConfig, HeraldConfig, PushInstanceConfig } from './config/schema.js';
import type { CoreShardApi } from './shards/messages.js';
import type { ShardRequester } from './shards/requester.js';
import type { ChannelAdapter } from './channels/adapter/channel-adapter.js';
import type { DebugTap } from './debug-tap/tap.js';
import type { DevicesClient } from './push/clients/devices.js';
import type { PublishesClient } from './push/clients/publishes.js';
import type { ReportsClient } from './push/clients/reports.js';
import type { WebhooksClient } from './webhooks/client.js';

export interface ServerState {
  /** Accepting traffic (GET /ready answers 200). */
  ready: boolean;
  /** Shutting down: new connections and requests are refused. */
  draining: boolean;
}

export interface ServerContext {
  /** The running config; a reload (SIGHUP) replaces it, so read it when needed, not once. */
  config: Readonly<HeraldConfig>;
  /** Apps and push instances of the running config; a reload updates these maps in place. By id, they page in id order. */
  readonly appsById: ReadonlyIdOrderedMap<AppConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly pushInstances: ReadonlyIdOrderedMap<PushInstanceConfig>;
  readonly installSecret: string;
  readonly state: ServerState;
  /** Where the front end reports connections, subscriptions and events for the dashboard (src/admin). */
  readonly debug: DebugTap;
  /** The shards' own requests (health, test hooks). */
  readonly core: ShardRequester<CoreShardApi>;
  /** Channel state and delivery to sockets. */
  readonly channels: ChannelAdapter;
  readonly devices: DevicesClient;
  readonly publishes: PublishesClient;
  readonly reports: ReportsClient;
  readonly webhooks: WebhooksClient;
}
