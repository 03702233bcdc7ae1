/**
 * Every request a Herald shard answers (type-only): the core requests and each area's, as
 * listed by the shard worker entry (shard-worker.ts). Main-thread clients use their own area's
 * slice of it; the composition root (server.ts) types the pool with the whole.
 */
import type { CoreShardApi } from './shards/messages.js';
import type { ChannelShardApi } from './channels/messages.js';
import type { PushShardApi } from './push/messages/index.js';
import type { WebhookShardApi } from './webhooks/messages.js';
import type { TenantShardApi } from './tenants/messages.js';

export interface HeraldShardApi extends CoreShardApi, ChannelShardApi, PushShardApi, WebhookShardApi, TenantShardApi {}
