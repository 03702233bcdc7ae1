/** The channel adapter contract against the Redis adapter: one node on a private redis-server. */
import { RedisChannelAdapter } from '../../../../src/channels/adapter/redis/redis-adapter.js';
import { Cluster } from '../../../../src/cluster/cluster.js';
import { parseConfig } from '../../../../src/config/load.js';
import { startAdapterHarness } from '../../../helpers/local-channel-adapter.js';
import { fileRedisServer } from '../../../helpers/file-redis.js';
import { channelAdapterContract } from './channel-adapter-contract.js';

const redis = fileRedisServer();
let run = 0;

channelAdapterContract('redis (shared state + pub/sub)', () =>
  startAdapterHarness(async ({ topics, shards, registry, config }) => {
    const cluster = parseConfig({ cluster: { redisUrl: redis().url, keyPrefix: `contract${++run}:`, nodeTimeoutMs: 5_000 } }).cluster!;
    const apps = new Map(config.apps.map((a) => [a.id, a]));
    return RedisChannelAdapter.start({ topics, registry, shards, cluster: new Cluster(cluster, { nodeId: `contract-${run}` }), subscriptionWaitMs: cluster.subscriptionWaitMs, config: () => config, apps });
  }, { cacheTtlSeconds: 600 }),
);
