/**
 * The webhook emitter contract against both outboxes: the LMDB outbox of one node (a shard's
 * environment in a temp dir) and the shared outbox of a cluster (a private redis-server, a key
 * prefix per test).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../../src/config/load.js';
import { openShardDatabase } from '../../../src/shards/storage.js';
import { WebhookOutbox } from '../../../src/webhooks/outbox.js';
import { SharedWebhookOutbox } from '../../../src/webhooks/shared-outbox.js';
import { fileRedisServer } from '../../helpers/file-redis.js';
import { webhookEmitterContract } from './webhook-emitter-contract.js';

webhookEmitterContract('LMDB outbox (one node)', async (config) => {
  const dir = mkdtempSync(join(tmpdir(), 'herald-emitter-'));
  const root = openShardDatabase(join(dir, 'shard-0'));
  const outbox = new WebhookOutbox({ root, config, shardIndex: 0 });
  return {
    emitter: outbox,
    stats: () => outbox.stats(),
    close: async () => {
      await outbox.close();
      await root.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

const redis = fileRedisServer();
let run = 0;

webhookEmitterContract('shared outbox (cluster, Redis stream)', async (config) => {
  const cluster = parseConfig({ cluster: { redisUrl: redis().url, keyPrefix: `emitter${++run}:`, nodeTimeoutMs: 5_000 } }).cluster!;
  const outbox = new SharedWebhookOutbox({ cluster, config, shardIndex: 0 });
  return { emitter: outbox, stats: () => outbox.stats(), close: () => outbox.close() };
});
