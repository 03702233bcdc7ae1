/**
 * A front-end thread's share of its cluster node, assembled (several front-end threads): the
 * Redis channel adapter on the thread's own connection (thread-node.ts), asking the main thread
 * (thread-host.ts) for what is the node's, and answering its re-registration requests.
 */
import type { AppConfig, ClusterConfig, HeraldConfig } from '../../../config/schema.js';
import type { TopicFanout, TopicInterestHook } from '../../../http/topic-fanout.js';
import type { ShardRequester } from '../../../shards/requester.js';
import type { WebhookShardApi } from '../../../webhooks/messages.js';
import type { ChannelShardApi } from '../../messages.js';
import type { SocketRegistry } from '../../socket-registry.js';
import type { ChannelAdapter } from '../channel-adapter.js';
import type { NodeSubscription } from './channel-state.js';
import { RedisChannelAdapter, type ThreadSide } from './redis-adapter.js';
import { MARK_SIGNAL, ThreadNode, type ThreadClusterInit, type ThreadLink } from './thread-node.js';

/** How long a re-registration waits for this thread's Redis connection (ms); the main thread waits 30 s for the thread's answer. */
const REGISTER_WAIT_MS = 25_000;

export interface ThreadShareDeps {
  init: ThreadClusterInit;
  settings: ClusterConfig;
  /** This thread's index. */
  thread: number;
  /** The main thread's producer index in the fan-out (the number of threads). */
  mainProducer: number;
  link: ThreadLink;
  /** The thread's fan-out (front-end/fanout.ts). */
  topics: TopicFanout;
  shards: ShardRequester<ChannelShardApi & WebhookShardApi>;
  registry: SocketRegistry;
  /** This thread's interest in topics (the fan-out's). */
  interest: TopicInterestHook;
  /** The app's live connections on every thread. */
  connectionCount(appId: string): number;
  config: () => Readonly<HeraldConfig>;
  apps: ReadonlyMap<string, AppConfig>;
}

export interface ThreadShare {
  adapter: ChannelAdapter;
  /** The thread's share of the node (its connection, the node's id): HTTP fallback sessions are recorded through it. */
  node: ThreadNode;
  /** A frame the fan-out delivered to this thread (the fan-out's onRemoteFrame). */
  remoteFrame(topic: string, frame: Uint8Array, producer: number, except: string): void;
  /** A signal the main thread sent this thread (the fan-out's onSignal). */
  signal(name: string, message: string): void;
}

export async function startThreadShare(deps: ThreadShareDeps): Promise<ThreadShare> {
  const { link } = deps;
  const node = new ThreadNode(deps.settings, deps.init, deps.thread, link);
  const side: ThreadSide = {
    node,
    thread: deps.thread,
    adoptSession: (session) => node.adopt(session),
    connected: () => node.start(REGISTER_WAIT_MS),
    userPresence: (appId, userId, online) => link.tell('userPresence', { appId, userId, online }),
    terminateUser: (appId, userId) => link.ask<number>('terminateUser', { appId, userId }),
    catchUp: (appId, channel) => link.ask<boolean>('catchUp', { appId, channel }),
    connectionCount: deps.connectionCount,
    relayFailed: () => node.relayFailed(),
    interest: deps.interest,
  };
  const adapter = await RedisChannelAdapter.start({
    topics: deps.topics,
    registry: deps.registry,
    shards: deps.shards,
    subscriptionWaitMs: deps.settings.subscriptionWaitMs,
    config: deps.config,
    apps: deps.apps,
    thread: side,
  });
  link.on<{ session: string }>('clusterRegister', ({ session }) => adapter.registerShare(session));
  link.on('clusterSettled', () => node.state.settled());
  link.on<{ left: NodeSubscription[] }>('clusterForget', ({ left }) => node.state.forget(left));
  return {
    adapter,
    node,
    // What the main thread relays from the node's subscriber connection: recovering joins take their history frames and marks from it.
    remoteFrame: (topic, frame, producer, except) => {
      if (producer === deps.mainProducer) adapter.relayedFrame(topic, frame, except);
    },
    signal: (name, message) => {
      if (name === MARK_SIGNAL) adapter.relayedMark(message);
    },
  };
}
