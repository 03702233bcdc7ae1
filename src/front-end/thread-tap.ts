/**
 * The debug tap of a front-end thread: events of watched apps go to the main thread's DebugHub
 * the way a shard's do (debug-tap/shard-tap.ts: a BroadcastChannel, and the list of watched apps
 * it announces), and the overview's totals are counted here and reported once a second.
 */
import type { PublishJob } from '../push/messages/publishes.js';
import { dataPreview, type DebugEvent, type DebugTap } from '../debug-tap/tap.js';
import { shardTapEvent, shardWatching } from '../debug-tap/shard-tap.js';
import type { ControlLink } from './control.js';

/** How often the totals go to the main thread (ms). */
const REPORT_INTERVAL_MS = 1000;

export interface TapTotals {
  messages: number;
  connectionsOpened: number;
}

export class ThreadTap implements DebugTap {
  private readonly totals: TapTotals = { messages: 0, connectionsOpened: 0 };
  private reported = '';
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly link: ControlLink) {
    this.timer = setInterval(() => this.report(), REPORT_INTERVAL_MS);
    this.timer.unref();
  }

  /** Reports the totals now when they changed (also before the thread ends). */
  report(): void {
    const now = `${this.totals.messages}/${this.totals.connectionsOpened}`;
    if (now === this.reported) return;
    this.reported = now;
    this.link.tell('tapTotals', { ...this.totals });
  }

  close(): void {
    clearInterval(this.timer);
    this.report();
  }

  watching(appId: string): boolean {
    return shardWatching(appId);
  }

  connectionOpened(appId: string, socketId: string): void {
    this.totals.connectionsOpened++;
    if (this.watching(appId)) shardTapEvent(appId, { kind: 'connection', action: 'opened', socketId });
  }

  connectionClosed(appId: string, socketId: string, code: number): void {
    if (this.watching(appId)) shardTapEvent(appId, { kind: 'connection', action: 'closed', socketId, code });
  }

  subscription(appId: string, action: 'subscribed' | 'unsubscribed', channel: string, socketId: string, subscriptionCount: number): void {
    if (this.watching(appId)) shardTapEvent(appId, { kind: 'subscription', action, channel, socketId, subscriptionCount });
  }

  apiEvent(appId: string, channels: readonly string[], event: string, data: string, socketId?: string): void {
    this.totals.messages += channels.length;
    if (!this.watching(appId)) return;
    const e: DebugEvent = { kind: 'api_event', channels: [...channels], event, data: dataPreview(data), dataBytes: Buffer.byteLength(data) };
    if (socketId !== undefined) e.socketId = socketId;
    shardTapEvent(appId, e);
  }

  clientEvent(appId: string, channel: string, event: string, data: string, socketId: string, userId?: string): void {
    this.totals.messages++;
    if (!this.watching(appId)) return;
    const e: DebugEvent = { kind: 'client_event', channel, event, data: dataPreview(data), dataBytes: Buffer.byteLength(data), socketId };
    if (userId !== undefined) e.userId = userId;
    shardTapEvent(appId, e);
  }

  /** The push view's recent publishes are the main thread's list. */
  publishAccepted(job: Readonly<PublishJob>): void {
    this.link.tell('publishAccepted', job);
  }
}
