/** Shard side of the push area: devices, interests, users and publish fan-out. */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { PushShardApi } from './shard-api.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';

export function createPushArea(_ctx: ShardContext, _webhooks: WebhookEmitter): ShardArea<PushShardApi> {
  return { handlers: {} };
}
