/**
 * The main thread's end of the debug tap: which apps a dashboard watches, the events of those
 * apps handed to the watching streams, sampled under load, and a few always-on counters for the
 * overview (messages, connections opened).
 *
 * Taps are off by default: an app is watched only while at least one stream asks for it, and
 * the shards hear which apps are watched (webhook attempts of those apps come back over a
 * BroadcastChannel, see debug-tap/shard-tap.ts). Under load each watched app passes at most
 * `maxEventsPerSecond` events a second: the next second shows one event in `every`, and the
 * listeners are told so (a `sampling` notice) to say it on the page.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { describeError, log } from '../log.js';
import type { PublishJob } from '../push/messages/publishes.js';
import { dataPreview, type DebugEvent, type DebugTap } from '../debug-tap/tap.js';
import { shardTapChannelNames, type ShardTapMessage, type WatchMessage } from '../debug-tap/shard-tap.js';

/** Events per second per watched app passed on in full; above it the console is sampled. */
export const DEFAULT_MAX_EVENTS_PER_SECOND = 200;
/** Recent publishes kept per push instance for the push view. */
export const RECENT_PUBLISHES = 20;

/** What a watching stream receives. `sampling.every` 1 means "no longer sampled". */
export type DebugMessage = { type: 'event'; t: number; event: DebugEvent } | { type: 'sampling'; t: number; every: number; eventsLastSecond: number };

export type DebugListener = (message: DebugMessage) => void;

/** A recently accepted publish (the push view asks the shards for its state). */
export interface RecentPublish {
  publishId: string;
  kind: PublishJob['kind'];
  targets: string[];
  acceptedAt: number;
}

interface Watch {
  listeners: Set<DebugListener>;
  /** Start of the current one-second window (ms). */
  windowStart: number;
  /** Events seen in the current window. */
  seen: number;
  /** Pass one event in `every` (1: all). */
  every: number;
}

export interface DebugHubOptions {
  /** Absolute data dir: names the BroadcastChannels, so two servers in one process stay apart. */
  dataDir: string;
  maxEventsPerSecond?: number;
  now?: () => number;
}

export class DebugHub implements DebugTap {
  private readonly watches = new Map<string, Watch>();
  private readonly recent = new Map<string, RecentPublish[]>();
  private readonly maxPerSecond: number;
  private readonly now: () => number;
  private readonly toShards: BroadcastChannel;
  private readonly fromShards: BroadcastChannel;
  /** Since start, on this thread: messages published (one per channel of an API event, one per client event). */
  private ownMessages = 0;
  /** Since start, on this thread: connections accepted. */
  private ownConnectionsOpened = 0;
  /** The same totals of each front-end thread (when several serve), as they last reported them. */
  private readonly threadTotals = new Map<number, { messages: number; connectionsOpened: number }>();

  constructor(opts: DebugHubOptions) {
    this.maxPerSecond = opts.maxEventsPerSecond ?? DEFAULT_MAX_EVENTS_PER_SECOND;
    this.now = opts.now ?? Date.now;
    const names = shardTapChannelNames(opts.dataDir);
    this.toShards = new BroadcastChannel(names.watch);
    this.fromShards = new BroadcastChannel(names.events);
    this.fromShards.onmessage = (message: unknown) => this.fromShard((message as { data: ShardTapMessage }).data);
    // Neither keeps the process alive.
    this.toShards.unref();
    this.fromShards.unref();
  }

  /** Since start: messages published (one per channel of an API event, one per client event), every thread. */
  get messages(): number {
    let n = this.ownMessages;
    for (const t of this.threadTotals.values()) n += t.messages;
    return n;
  }

  /** Since start: connections accepted, every thread. */
  get connectionsOpened(): number {
    let n = this.ownConnectionsOpened;
    for (const t of this.threadTotals.values()) n += t.connectionsOpened;
    return n;
  }

  /** A front-end thread's totals since start (front-end/thread-tap.ts). */
  threadReported(thread: number, totals: { messages: number; connectionsOpened: number }): void {
    this.threadTotals.set(thread, totals);
  }

  close(): void {
    for (const watch of this.watches.values()) watch.listeners.clear();
    this.watches.clear();
    this.toShards.close();
    this.fromShards.close();
  }

  /** Starts sending the app's events to `listener`; returns the function that stops it. */
  watch(appId: string, listener: DebugListener): () => void {
    let watch = this.watches.get(appId);
    if (!watch) {
      watch = { listeners: new Set(), windowStart: this.now(), seen: 0, every: 1 };
      this.watches.set(appId, watch);
      this.announceWatched();
    }
    watch.listeners.add(listener);
    const current = watch;
    return () => {
      current.listeners.delete(listener);
      if (current.listeners.size === 0 && this.watches.get(appId) === current) {
        this.watches.delete(appId);
        this.announceWatched();
      }
    };
  }

  watching(appId: string): boolean {
    return this.watches.size !== 0 && this.watches.has(appId);
  }

  /** Apps watched now, for the shards and the overview. */
  watchedApps(): string[] {
    return [...this.watches.keys()];
  }

  recentPublishes(instanceId: string): readonly RecentPublish[] {
    return this.recent.get(instanceId) ?? [];
  }

  connectionOpened(appId: string, socketId: string): void {
    this.ownConnectionsOpened++;
    if (this.watching(appId)) this.emit(appId, { kind: 'connection', action: 'opened', socketId });
  }

  connectionClosed(appId: string, socketId: string, code: number): void {
    if (this.watching(appId)) this.emit(appId, { kind: 'connection', action: 'closed', socketId, code });
  }

  subscription(appId: string, action: 'subscribed' | 'unsubscribed', channel: string, socketId: string, subscriptionCount: number): void {
    if (this.watching(appId)) this.emit(appId, { kind: 'subscription', action, channel, socketId, subscriptionCount });
  }

  apiEvent(appId: string, channels: readonly string[], event: string, data: string, socketId?: string): void {
    this.ownMessages += channels.length;
    if (!this.watching(appId)) return;
    const e: DebugEvent = { kind: 'api_event', channels: [...channels], event, data: dataPreview(data), dataBytes: Buffer.byteLength(data) };
    if (socketId !== undefined) e.socketId = socketId;
    this.emit(appId, e);
  }

  clientEvent(appId: string, channel: string, event: string, data: string, socketId: string, userId?: string): void {
    this.ownMessages++;
    if (!this.watching(appId)) return;
    const e: DebugEvent = { kind: 'client_event', channel, event, data: dataPreview(data), dataBytes: Buffer.byteLength(data), socketId };
    if (userId !== undefined) e.userId = userId;
    this.emit(appId, e);
  }

  publishAccepted(job: Readonly<PublishJob>): void {
    let list = this.recent.get(job.instanceId);
    if (!list) this.recent.set(job.instanceId, (list = []));
    list.unshift({ publishId: job.publishId, kind: job.kind, targets: job.targets.slice(0, 10), acceptedAt: job.acceptedAt });
    if (list.length > RECENT_PUBLISHES) list.length = RECENT_PUBLISHES;
  }

  private fromShard(message: ShardTapMessage): void {
    if (message.type === 'hello') {
      // A shard worker (re)started: it needs the current list.
      this.announceWatched();
      return;
    }
    if (this.watching(message.appId)) this.emit(message.appId, message.event);
  }

  private announceWatched(): void {
    const message: WatchMessage = { apps: this.watchedApps() };
    this.toShards.postMessage(message);
  }

  /** Hands an event to the app's listeners, one in `every` once over the per-second budget. */
  private emit(appId: string, event: DebugEvent): void {
    const watch = this.watches.get(appId)!;
    const now = this.now();
    if (now - watch.windowStart >= 1000) {
      // A quiet gap of more than one window means the load is over.
      const rate = now - watch.windowStart >= 2000 ? 0 : watch.seen;
      const every = Math.max(1, Math.ceil(rate / this.maxPerSecond));
      if (every !== watch.every) this.send(watch, { type: 'sampling', t: now, every, eventsLastSecond: rate });
      watch.every = every;
      watch.windowStart = now;
      watch.seen = 0;
    }
    const index = watch.seen++;
    if (watch.every === 1 ? index >= this.maxPerSecond : index % watch.every !== 0) {
      if (watch.every === 1 && index === this.maxPerSecond) {
        // Over budget within the first second of a burst: sample the rest of it too.
        watch.every = 2;
        this.send(watch, { type: 'sampling', t: now, every: 2, eventsLastSecond: index });
      }
      return;
    }
    this.send(watch, { type: 'event', t: now, event });
  }

  /**
   * Never throws: taps are called from inside uWS callbacks and the channel front end's
   * bookkeeping, which a failing dashboard stream must not interrupt.
   */
  private send(watch: Watch, message: DebugMessage): void {
    for (const listener of watch.listeners) {
      try {
        listener(message);
      } catch (err) {
        log.error('debug stream listener failed', { error: describeError(err) });
      }
    }
  }
}
