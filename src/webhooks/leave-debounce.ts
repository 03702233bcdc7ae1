/**
 * The leave debounce: channel_vacated and member_removed are held for `pageReloadDebounceMs`;
 * a channel_occupied (member_added for the same user) inside that window cancels the held
 * event and is itself dropped, so a page reload produces no vacated+occupied pair.
 *
 * Holds are kept in a Map in insertion order; every hold lasts the same time, so the oldest
 * is always first and expired holds are pruned from the front.
 */

/** A held entry in a receiver's queue. */
export interface HeldRef {
  queueKey: string;
  seq: number;
}

interface Hold {
  /** ms since the epoch when the held events go out. */
  releaseAt: number;
  /** The outbox entries of the held event (none when no receiver wants it: the hold still cancels). */
  refs: HeldRef[];
}

export class LeaveDebounce {
  private readonly holds = new Map<string, Hold>();

  /** Key of a channel's occupancy (vacated ↔ occupied). */
  static channelKey(appId: string, channel: string): string {
    return `c\u0000${appId}\u0000${channel}`;
  }

  /** Key of a presence member (removed ↔ added). */
  static memberKey(appId: string, channel: string, userId: string): string {
    return `m\u0000${appId}\u0000${channel}\u0000${userId}`;
  }

  /** Holds an event until `releaseAt`; a second hold of the same key adds to the first. */
  hold(key: string, releaseAt: number, refs: HeldRef[]): void {
    const existing = this.holds.get(key);
    if (existing && existing.releaseAt >= releaseAt) {
      existing.refs.push(...refs);
      return;
    }
    this.holds.delete(key);
    this.holds.set(key, { releaseAt, refs: [...(existing?.refs ?? []), ...refs] });
  }

  /** Removes and returns the hold a re-occupy cancels, if it is still held at `now`. */
  cancel(key: string, now: number): HeldRef[] | undefined {
    const hold = this.holds.get(key);
    if (!hold) return undefined;
    this.holds.delete(key);
    return hold.releaseAt > now ? hold.refs : undefined;
  }

  /**
   * Forgets the holds of the apps `removed` answers true for: their held events still go out
   * when due, but nothing can cancel them any more (an app created again with a removed app's
   * id must not cancel the old app's last events).
   */
  forgetApps(removed: (appId: string) => boolean): void {
    for (const key of this.holds.keys()) {
      if (removed(key.split('\u0000', 3)[1]!)) this.holds.delete(key);
    }
  }

  /** Forgets holds whose events have gone out. */
  prune(now: number): void {
    for (const [key, hold] of this.holds) {
      if (hold.releaseAt > now) break;
      this.holds.delete(key);
    }
  }

  /** Outbox entries held right now (call prune first for an exact figure). */
  heldEntries(): number {
    let n = 0;
    for (const hold of this.holds.values()) n += hold.refs.length;
    return n;
  }
}
