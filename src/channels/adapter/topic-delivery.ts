/**
 * Delivery of one frame to this process's sockets on a channel, through its uWS topic: the
 * last step of every adapter's publish (the local adapter's only step; a cluster adapter's
 * step for its own sockets and for frames other nodes relay).
 */
import type { ExceptPublisher, TopicFanout } from '../../http/topic-fanout.js';
import { appCounters } from '../../metrics/node-counters.js';
import { topicFor, watchTopicFor, watchlistEvents } from '../frames.js';
import type { SocketRegistry } from '../socket-registry.js';

/**
 * Sends `frame` to every socket of this process on the channel except the one with
 * `exceptSocketId` (when this process holds it), counting the frames sent.
 */
export function deliverToTopic(topics: TopicFanout, registry: SocketRegistry, appId: string, channel: string, frame: string, exceptSocketId?: string): void {
  const topic = topicFor(appId, channel);
  if (exceptSocketId !== undefined) {
    const except = registry.get(appId, exceptSocketId);
    // A socket's own publish reaches everyone on the topic but that socket. Its return value
    // cannot decide anything (false also when nobody else is subscribed), and a socket that is
    // not on the topic cannot receive the plain publish anyway.
    if (except?.ws && !except.closed && except.ws.isSubscribed(topic)) {
      appCounters(appId).wsMessagesSent += topics.numSubscribers(topic) - 1;
      topics.publishFrom(except.ws, topic, frame);
      return;
    }
    // Another front-end thread may hold it: the fanout excludes it there.
    if (!except && 'publishExcept' in topics) {
      appCounters(appId).wsMessagesSent += topics.numSubscribers(topic);
      (topics as TopicFanout & ExceptPublisher).publishExcept(topic, frame, exceptSocketId);
      return;
    }
  }
  appCounters(appId).wsMessagesSent += topics.numSubscribers(topic);
  topics.publish(topic, frame);
}

/** Tells this process's watchers of a user (watchlist) that it came online or went offline. */
export function tellWatchers(topics: TopicFanout, appId: string, userId: string, online: boolean): void {
  topics.publish(watchTopicFor(appId, userId), watchlistEvents([{ name: online ? 'online' : 'offline', user_ids: [userId] }]));
}
