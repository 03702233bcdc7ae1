/** Shard side of the channels area: channel state for the channels this shard owns. */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { ChannelShardApi } from './shard-api.js';
import type { WebhookEmitter } from '../webhooks/emitter.js';

export function createChannelArea(_ctx: ShardContext, _webhooks: WebhookEmitter): ShardArea<ChannelShardApi> {
  return { handlers: {} };
}
