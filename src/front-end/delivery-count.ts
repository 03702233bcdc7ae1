/**
 * wsMessagesSent for frames a thread delivers from another producer's record, as
 * deliverToTopic counts its own publishes: channel topics only (`<app>:<channel>`), not
 * watchlist topics (`<app>::watch:<user>`, never counted). The app id is the topic's first part
 * (topicFor URI-encodes both parts, so the first `:` ends it).
 */
import { appCounters } from '../metrics/node-counters.js';

export function countRemoteDelivery(topic: string, frames: number): void {
  const colon = topic.indexOf(':');
  if (colon <= 0 || topic.charCodeAt(colon + 1) === 0x3a) return;
  appCounters(decodedPart(topic.slice(0, colon))).wsMessagesSent += frames;
}

/** The app id of any topic (channel, watchlist, server-to-user): its first part. */
export function appIdOfTopic(topic: string): string {
  const colon = topic.indexOf(':');
  return decodedPart(colon < 0 ? topic : topic.slice(0, colon));
}

function decodedPart(part: string): string {
  if (!part.includes('%')) return part;
  try {
    return decodeURIComponent(part);
  } catch {
    // The `%u` form topicPart gives a lone surrogate; app ids are validated well before.
    return part;
  }
}
