/** Shard side of the webhooks area: the durable outbox and its sender. */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { WebhookShardApi } from './shard-api.js';
import type { WebhookEmitter } from './emitter.js';

export function createWebhookArea(_ctx: ShardContext): ShardArea<WebhookShardApi> & { emitter: WebhookEmitter } {
  return {
    handlers: {},
    emitter: { channelEvent: () => undefined, pushEvent: () => undefined },
  };
}
