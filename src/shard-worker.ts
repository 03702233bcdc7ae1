/**
 * The shard worker entry (Piscina loads this file in each shard's worker thread; the
 * composition root, server.ts, tells the pool its path). The one place that lists the areas a
 * shard runs: the webhook outbox first, since the channel and push areas emit into it.
 */
import { createShardWorker } from './shards/worker.js';
import { createChannelArea } from './channels/shard-handlers.js';
import { createPushArea } from './push/shard-handlers.js';
import { createWebhookArea } from './webhooks/shard-handlers.js';
import { createTenantArea } from './tenants/shard-handlers.js';

export default createShardWorker((ctx) => {
  const webhooks = createWebhookArea(ctx);
  return [createChannelArea(ctx, webhooks.emitter), createPushArea(ctx, webhooks.emitter), webhooks, createTenantArea(ctx)];
});
