/**
 * Shard side of the webhooks area: the outbox (the shard's WebhookEmitter) and its stats. One
 * node keeps it in the shard's LMDB (outbox.ts); a cluster node shares one in Redis with the
 * other nodes (shared-outbox.ts), so its data dir holds no webhook.
 */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { WebhookShardApi } from './messages.js';
import type { WebhookEmitter } from './emitter.js';
import { WebhookOutbox } from './outbox.js';
import { SharedWebhookOutbox } from './shared-outbox.js';

/** Opens the outbox (resuming stored entries) and exposes its stats, decided events and drain. */
export function createWebhookArea(ctx: ShardContext): ShardArea<WebhookShardApi> & { emitter: WebhookEmitter } {
  const cluster = ctx.config.cluster;
  const outbox = cluster
    ? new SharedWebhookOutbox({ cluster, config: ctx.config, shardIndex: ctx.shardIndex })
    : new WebhookOutbox({ root: ctx.root, config: ctx.config, shardIndex: ctx.shardIndex });
  return {
    handlers: {
      'webhooks.stats': () => outbox.stats(),
      'webhooks.channelEvents': (req) => {
        const retired = req.retired === true;
        if (outbox instanceof SharedWebhookOutbox) outbox.channelEvents(req.appId, req.events, retired);
        else for (const event of req.events) outbox.channelEvent({ appId: req.appId, event }, { debounced: true, retired });
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
