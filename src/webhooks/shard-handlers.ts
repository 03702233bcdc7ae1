/** Shard side of the webhooks area: the durable outbox (the shard's WebhookEmitter) and its stats. */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { WebhookShardApi } from './messages.js';
import type { WebhookEmitter } from './emitter.js';
import { WebhookOutbox } from './outbox.js';

/** Opens the outbox (resuming stored entries) and exposes its stats, decided events and drain. */
export function createWebhookArea(ctx: ShardContext): ShardArea<WebhookShardApi> & { emitter: WebhookEmitter } {
  const outbox = new WebhookOutbox({ root: ctx.root, config: ctx.config, shardIndex: ctx.shardIndex });
  return {
    handlers: {
      'webhooks.stats': () => outbox.stats(),
      'webhooks.channelEvents': (req) => {
        for (const event of req.events) outbox.channelEvent({ appId: req.appId, event }, { debounced: true });
        return {};
      },
      'webhooks.drain': async (req) => ({ left: await outbox.drain(req.waitMs) }),
    },
    emitter: outbox,
    reload: (config) => outbox.reload(config),
    tenantsChanged: (change) => outbox.tenantsChanged(change),
    close: () => outbox.close(),
  };
}
