/**
 * Where an adapter hands the subscriptions it recorded to the debug tap (tapSubscriptions in
 * channel-adapter.ts): the answers of subscribe and unsubscribe carry the channel's new
 * subscriber count. Only the calls of a watched app get a continuation; the others return the
 * adapter's own promise.
 */
import type { SubscribeRequest, SubscribeResult, SubscriptionTap, UnsubscribeResult } from './channel-adapter.js';

export class TapPoint {
  private tap: SubscriptionTap | undefined;

  set(tap: SubscriptionTap): void {
    this.tap = tap;
  }

  /** A join's answer; a dropped join (null) is not a subscription. */
  joined<R extends SubscribeResult | null>(req: SubscribeRequest, joining: Promise<R>): Promise<R> {
    const tap = this.tap;
    if (!tap?.watching(req.appId)) return joining;
    return joining.then((res) => {
      if (res) tap.subscription(req.appId, 'subscribed', req.channel, req.socketId, res.subscriptionCount);
      return res;
    });
  }

  left(appId: string, channel: string, socketId: string, leaving: Promise<UnsubscribeResult>): Promise<UnsubscribeResult> {
    const tap = this.tap;
    if (!tap?.watching(appId)) return leaving;
    return leaving.then((res) => {
      tap.subscription(appId, 'unsubscribed', channel, socketId, res.subscriptionCount);
      return res;
    });
  }
}
