/**
 * The channel adapter of one front-end thread when several serve: the single-node adapter
 * (channel state on the shards, frames through the threads' shared fan-out) with what spans
 * the threads asked of the main thread: who is online (sign-in, watchlists), terminating a
 * user's connections, and the app's connection count (the process-wide counters).
 */
import type { ShardRequester } from '../shards/requester.js';
import type { ChannelShardApi } from '../channels/messages.js';
import type { ChannelSocket } from '../channels/adapter/channel-adapter.js';
import { LocalChannelAdapter } from '../channels/adapter/local-adapter.js';
import type { TopicFanout } from '../http/topic-fanout.js';
import type { SocketRegistry } from '../channels/socket-registry.js';
import { watchTopicFor } from '../channels/frames.js';
import type { ControlLink } from './control.js';

export interface ThreadedAdapterDeps {
  /** This thread's index. */
  frontEnd: number;
  /** The link to the main thread. */
  link: ControlLink;
  /** The app's live connections on every thread. */
  connectionCount(appId: string): number;
}

export class ThreadedChannelAdapter extends LocalChannelAdapter {
  constructor(
    topics: TopicFanout,
    shards: ShardRequester<ChannelShardApi>,
    registry: SocketRegistry,
    private readonly deps: ThreadedAdapterDeps,
  ) {
    super(topics, shards, registry, { frontEnd: deps.frontEnd });
  }

  /** The user's first connection on this thread, or its last one here closed: the main thread decides for the process. */
  override userPresence(appId: string, userId: string, online: boolean): void {
    this.deps.link.tell('userPresence', { appId, userId, online });
  }

  override watch(socket: ChannelSocket, appId: string, userIds: readonly string[]): Promise<string[]> {
    for (const id of userIds) socket.subscribe(watchTopicFor(appId, id));
    return this.deps.link.ask<string[]>('online', { appId, userIds: [...userIds] });
  }

  override connectionCount(appId: string): number {
    return this.deps.connectionCount(appId);
  }

  override terminateUserConnections(appId: string, userId: string): Promise<number> {
    return this.deps.link.ask<number>('terminateUser', { appId, userId });
  }
}
