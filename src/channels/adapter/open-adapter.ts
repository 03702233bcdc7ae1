/**
 * The channel adapter's factory: with a cluster, the Redis adapter on it (which joins it);
 * without one, the local adapter (this process's shards and uWS topics). The composition root
 * calls this and never names an implementation.
 */
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import type { Cluster } from '../../cluster/cluster.js';
import type { TopicFanout } from '../../http/topic-fanout.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { WebhookShardApi } from '../../webhooks/messages.js';
import type { ChannelShardApi } from '../messages.js';
import type { SocketRegistry } from '../socket-registry.js';
import type { ChannelAdapter } from './channel-adapter.js';
import { LocalChannelAdapter } from './local-adapter.js';
import { RedisChannelAdapter, type NodeThreads } from './redis/redis-adapter.js';

export interface ChannelAdapterDeps {
  /** The uWS topics frames go to (the main app's, http/tls.ts). */
  topics: TopicFanout;
  registry: SocketRegistry;
  shards: ShardRequester<ChannelShardApi & WebhookShardApi>;
  /** This node's cluster (not started yet: the Redis adapter starts and closes it), or null on a single node. */
  cluster: Cluster | null;
  /** How long a subscription waits for the cluster to be available again (ms); cluster.subscriptionWaitMs. */
  subscriptionWaitMs: number;
  /** The running config (replaced by a reload). */
  config: () => Readonly<HeraldConfig>;
  /** The running apps by id (updated in place by a reload). */
  apps: ReadonlyMap<string, AppConfig>;
  /** Several front-end threads serve (one node only): history events reach them from the shards (LocalChannelAdapterOptions). */
  keptByShards?: boolean;
  /** Several front-end threads serve a cluster node: the main thread's side of them (channels/adapter/redis/thread-host.ts). */
  threads?: NodeThreads;
}

export { ClusterThreadsHost, type NodeThreadsView } from './redis/thread-host.js';
export { startThreadShare, type ThreadShare } from './redis/thread-share.js';
export type { ThreadClusterInit, ThreadLink } from './redis/thread-node.js';

/** Opens the adapter; with a cluster it resolves once the node has joined (rejects when it cannot). */
export async function openChannelAdapter(deps: ChannelAdapterDeps): Promise<ChannelAdapter> {
  const { cluster, threads, ...rest } = deps;
  if (cluster) {
    const adapter = await RedisChannelAdapter.start({ ...rest, cluster, ...(threads && { threads }) });
    threads?.started(adapter);
    return adapter;
  }
  return new LocalChannelAdapter(deps.topics, deps.shards, deps.registry, { keptByShards: deps.keptByShards === true });
}
