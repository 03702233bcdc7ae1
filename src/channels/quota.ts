/**
 * The per-app daily message quota (app.messageQuota, messages per UTC day). The counters live
 * in memory on the main thread: charging a trigger must not wait on a shard. They reset at
 * 00:00 UTC, when the process restarts and when the app is removed (and are per node when
 * several nodes run).
 */
import type { AppConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';

const MS_PER_DAY = 86_400_000;

/**
 * Messages one event costs: one per channel it is published to, doubled when the event asks
 * for `info` (a request with info counts as two messages, as on Pusher).
 */
export function messageCost(channelCount: number, withInfo: boolean): number {
  return channelCount * (withInfo ? 2 : 1);
}

export class MessageQuota {
  private readonly usage = new Map<string, { day: number; used: number }>();

  /** `now` returns epoch milliseconds (a parameter so tests can move the clock). */
  constructor(private readonly now: () => number = Date.now) {}

  /** Messages the app has been charged today (UTC). */
  usedToday(appId: string): number {
    const entry = this.usage.get(appId);
    return entry && entry.day === this.today() ? entry.used : 0;
  }

  /**
   * Charges `messages` to the app, or throws APP_OVER_QUOTA (403) when they would take it past
   * its quota; a refused request is not charged. Apps without a quota are not counted.
   */
  charge(app: Pick<AppConfig, 'id' | 'messageQuota'>, messages: number): void {
    if (app.messageQuota === null) return;
    const day = this.today();
    let entry = this.usage.get(app.id);
    if (!entry || entry.day !== day) {
      entry = { day, used: 0 };
      this.usage.set(app.id, entry);
    }
    if (entry.used + messages > app.messageQuota) throw overQuota(app.id, app.messageQuota, entry.used, messages, 'UTC');
    entry.used += messages;
  }

  /** The app was removed: an app created later with the same id starts at 0. */
  forget(appId: string): void {
    this.usage.delete(appId);
  }

  private today(): number {
    return Math.floor(this.now() / MS_PER_DAY);
  }
}

/**
 * The APP_OVER_QUOTA error (403) of a refused charge: `used` of `quota` messages spent today,
 * `messages` asked for; `day` says whose day it is (this node's, or every node's in a cluster).
 */
export function overQuota(appId: string, quota: number, used: number, messages: number, day: string): HeraldError {
  return new HeraldError(
    'APP_OVER_QUOTA',
    `Application ${appId} is over its message quota: ${used} of ${quota} messages used today (${day}), ` +
      `this request needs ${messages}; the count resets at 00:00 UTC`,
  );
}
