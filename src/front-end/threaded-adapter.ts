/**
 * The channel adapter of one front-end thread when several serve: the single-node adapter
 * (channel state on the shards, frames through the threads' shared fan-out) with what spans
 * the threads asked of the main thread: who is online (sign-in, watchlists), terminating a
 * user's connections, and the app's connection count (the process-wide counters).
 *
 * A cache channel's join (cache-join-watch.ts) also watches the events other threads publish on
 * the channel while it is in flight: the thread takes the channel's frames meanwhile (its
 * interest is set before the join leaves), and the latest of them wins over the join's read, as
 * an event stored by this thread does.
 */
import type { ShardRequester } from '../shards/requester.js';
import type { ChannelShardApi } from '../channels/messages.js';
import type { ChannelSocket, SubscribeRequest, SubscribeResult } from '../channels/adapter/channel-adapter.js';
import { LocalChannelAdapter } from '../channels/adapter/local-adapter.js';
import type { TopicFanout } from '../http/topic-fanout.js';
import type { SocketRegistry } from '../channels/socket-registry.js';
import { topicFor, watchTopicFor } from '../channels/frames.js';
import { channelType } from '../channels/names.js';
import type { TopicInterestHook } from '../http/topic-fanout.js';
import type { ControlLink } from './control.js';

export interface ThreadedAdapterDeps {
  /** This thread's index. */
  frontEnd: number;
  /** The link to the main thread. */
  link: ControlLink;
  /** The app's live connections on every thread. */
  connectionCount(appId: string): number;
  /** This thread's interest in topics (the fan-out's): set while a cache channel's join is in flight. */
  interest: TopicInterestHook;
}

/** A cache channel with joins in flight on this thread. */
interface CacheJoin {
  readonly appId: string;
  readonly channel: string;
  joins: number;
}

export class ThreadedChannelAdapter extends LocalChannelAdapter {
  /** Cache channels with a join in flight, by topic; empty almost always. */
  private readonly cacheJoinTopics = new Map<string, CacheJoin>();

  constructor(
    topics: TopicFanout,
    shards: ShardRequester<ChannelShardApi>,
    registry: SocketRegistry,
    private readonly deps: ThreadedAdapterDeps,
  ) {
    super(topics, shards, registry, { frontEnd: deps.frontEnd, keptByShards: true });
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

  override subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  override subscribe(req: SubscribeRequest, wanted: () => boolean): Promise<SubscribeResult | null>;
  override subscribe(req: SubscribeRequest, wanted?: () => boolean): Promise<SubscribeResult | null> {
    const join = (): Promise<SubscribeResult | null> => (wanted ? super.subscribe(req, wanted) : super.subscribe(req));
    if (!channelType(req.channel).cache) return join();
    const topic = topicFor(req.appId, req.channel);
    let watch = this.cacheJoinTopics.get(topic);
    if (!watch) this.cacheJoinTopics.set(topic, (watch = { appId: req.appId, channel: req.channel, joins: 0 }));
    watch.joins++;
    this.deps.interest.add(topic);
    const joining = join();
    const seen = watch;
    // Until the end of the turn the answer arrives in, as the watch itself: the socket is attached by then.
    const end = (): void => {
      setImmediate(() => {
        this.deps.interest.remove(topic);
        if (--seen.joins === 0 && this.cacheJoinTopics.get(topic) === seen) this.cacheJoinTopics.delete(topic);
      });
    };
    joining.then(end, end);
    return joining;
  }

  /** A frame another thread published (the fan-out's `onRemoteFrame`): a cache event of a channel being joined here counts as stored. */
  remoteFrame(topic: string, frame: Uint8Array): void {
    if (this.cacheJoinTopics.size === 0) return;
    const watch = this.cacheJoinTopics.get(topic);
    if (!watch) return;
    const { event, data } = JSON.parse(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8')) as { event: string; data: unknown };
    // Member and subscription-count frames are not the channel's events: never cached.
    if (event.startsWith('pusher')) return;
    this.cacheJoins.stored(watch.appId, watch.channel, event, typeof data === 'string' ? data : JSON.stringify(data));
  }

  override terminateUserConnections(appId: string, userId: string): Promise<number> {
    return this.deps.link.ask<number>('terminateUser', { appId, userId });
  }
}
