/**
 * Subscriptions for the debug tap, taken where they are recorded: the channel adapter's
 * subscribe and unsubscribe, whose answers carry the channel's new subscriber count. Only the
 * calls of a watched app get a continuation; the others are the adapter's own promise.
 */
import type { ChannelAdapter } from '../channels/adapter/channel-adapter.js';
import type { DebugTap } from './tap.js';

/** Wraps `adapter.subscribe` and `adapter.unsubscribe` in place so that their successes reach `tap`. */
export function tapSubscriptions(adapter: ChannelAdapter, tap: DebugTap): void {
  const subscribe = adapter.subscribe.bind(adapter);
  const unsubscribe = adapter.unsubscribe.bind(adapter);
  adapter.subscribe = (req) => {
    const joined = subscribe(req);
    if (!tap.watching(req.appId)) return joined;
    return joined.then((res) => {
      tap.subscription(req.appId, 'subscribed', req.channel, req.socketId, res.subscriptionCount);
      return res;
    });
  };
  adapter.unsubscribe = (appId, channel, socketId) => {
    const left = unsubscribe(appId, channel, socketId);
    if (!tap.watching(appId)) return left;
    return left.then((res) => {
      tap.subscription(appId, 'unsubscribed', channel, socketId, res.subscriptionCount);
      return res;
    });
  };
}
