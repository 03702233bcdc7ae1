/**
 * Cache channels: a join reads the channel's cached event when it is recorded, but the socket
 * joins the channel's delivery only when the answer is back. An event published in between
 * reaches neither the socket (not attached yet) nor the join's answer (stored after the read).
 * So while a join is in flight the cache events this process stores on its channel are counted
 * here, and the event replayed on attach is the latest of them when there was one, the join's
 * read otherwise. A watch lasts until the end of the event-loop turn the answer arrived in
 * (setImmediate), which is when the caller attaches (ChannelAdapter.attach).
 */
import type { CachedEvent, SubscribeResult } from './channel-adapter.js';

interface Watch {
  joins: number;
  stored: number;
  latest: CachedEvent | null;
}

export class CacheJoinWatch {
  /** Cache channels with a join in flight, by `appId\0channel`; empty almost always. */
  private readonly watches = new Map<string, Watch>();
  /** Per answered cache-channel join: the event to replay when its socket is attached. */
  private readonly onAttach = new WeakMap<SubscribeResult, () => CachedEvent | null>();

  /** A cache event was stored on the channel (call it for every store). */
  stored(appId: string, channel: string, event: string, data: string): void {
    if (this.watches.size === 0) return;
    const watch = this.watches.get(key(appId, channel));
    if (watch) {
      watch.stored++;
      watch.latest = { event, data };
    }
  }

  /**
   * Runs a join of a cache channel under watch. `join` answers the result and the cached event
   * its read found; the result's replay (see replay) is the newer of that and what was stored
   * meanwhile.
   */
  async around<R extends SubscribeResult | null>(appId: string, channel: string, join: () => Promise<R>): Promise<R> {
    const k = key(appId, channel);
    let watch = this.watches.get(k);
    if (!watch) this.watches.set(k, (watch = { joins: 0, stored: 0, latest: null }));
    watch.joins++;
    const storedBefore = watch.stored;
    const seen = watch;
    try {
      const res = await join();
      if (res !== null && res.cached !== undefined) {
        const fromJoin = res.cached;
        this.onAttach.set(res, () => (seen.stored > storedBefore ? seen.latest : fromJoin));
      }
      return res;
    } finally {
      setImmediate(() => {
        if (--seen.joins === 0 && this.watches.get(k) === seen) this.watches.delete(k);
      });
    }
  }

  /** The event to replay on attach for a join's result: undefined for other channels. */
  replay(joined: SubscribeResult | undefined): CachedEvent | null | undefined {
    if (joined?.cached === undefined) return undefined;
    return (this.onAttach.get(joined) ?? (() => joined.cached ?? null))();
  }
}

function key(appId: string, channel: string): string {
  return `${appId}\u0000${channel}`;
}
