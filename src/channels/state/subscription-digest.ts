/**
 * A digest of a set of subscriptions, computed the same way on the main thread (what the front
 * end holds) and on a shard (what it holds): equal digests mean, with overwhelming likelihood,
 * equal sets, so the periodic reconcile sends the whole list only when they differ.
 */
import { fnv1a32 } from '../../shards/hash.js';

export interface SubscriptionDigest {
  count: number;
  /** Sum of the key hashes, mod 2^32. */
  sum: number;
  /** Xor of the key hashes. */
  xor: number;
}

/** Digest of [appId, channel, socketId] triples (order does not matter). */
export function subscriptionDigest(subscriptions: Iterable<readonly [appId: string, channel: string, socketId: string]>): SubscriptionDigest {
  let count = 0;
  let sum = 0;
  let xor = 0;
  for (const [appId, channel, socketId] of subscriptions) {
    const h = fnv1a32(`${appId}\u0000${channel}\u0000${socketId}`);
    count++;
    sum = (sum + h) >>> 0;
    xor = (xor ^ h) >>> 0;
  }
  return { count, sum, xor };
}
