/**
 * Shard-side channel history: the kept events of the history channels this shard owns, each
 * with its serial (serial.ts). The shard is the one writer of its channels, so it gives the
 * serials: in the order it takes the events, which is the order their frames go out.
 *
 * Held in memory for reads and written through to the shard's LMDB environment
 * (`channels/history`, key `[appId, channel, serial]`, value `[event, data, publishedAt, userId?,
 * except?]`: userId undefined when there is none but an except socket, the except socket only
 * when there is one, so records written before it was kept exclude nobody and a version of
 * Herald from before reads the new ones as it always did), read back when the
 * shard starts: kept events survive a restart. The except socket (a client event's sender, a
 * trigger's socket_id) is for the recovering read (readEnvelopes) only: read() and the events it
 * answers never carry it. Writes are lmdb-js
 * asynchronous writes, committed with the turn's other writes, in order. An appended event is
 * answered (and so sent) only once committed, and reads leave out events not answered yet: a
 * recovering join read before an event's answer went out leaves that event to the live
 * delivery, whose answer comes after the join's; and a serial that went out is never given
 * again after a crash.
 *
 * Bounds, each evicting the oldest first: per channel the last `maxEvents`, each for
 * `ttlSeconds`; per app on this shard `maxBytes` (its share of `maxHistoryBytes`), counted as
 * the cache counts (channel name + event name + data, UTF-8). A channel's kept events are
 * always the unbroken tail of its sequence: an event too large to keep drops the ones before
 * it, so "kept after since" is only answered complete when nothing after since is missing.
 */
import type { Database, RootDatabase } from 'lmdb';
import { logWriteFailure } from '../../shards/disk-full.js';
import { log } from '../../log.js';
import { cacheEntryBytes } from '../state/channel-store.js';
import { formatSerial, parseSerial } from './serial.js';
import type { HistoryRead, KeptEnvelope, KeptEvent } from '../messages.js';

/** The database's name (also declared to the reshard, history-layout.ts). */
export const HISTORY_DATABASE = 'channels/history';

/**
 * How long a channel whose events all went stays known (its generation and sequence), so that a
 * client whose last serial is the channel's last still recovers (with nothing missed), ms.
 */
const EMPTY_CHANNEL_KEPT_MS = 60 * 60 * 1000;

/** The bounds an app puts on its history on one shard. */
export interface HistoryBounds {
  maxEvents: number;
  ttlSeconds: number;
  /** The app's bytes on this shard (its maxHistoryBytes shared by the shards). */
  maxBytes: number;
}

type Key = [appId: string, channel: string, serial: string];
type Value = [event: string, data: string, publishedAt: number, userId?: string, except?: string];

interface Stored extends KeptEvent {
  sequence: number;
  bytes: number;
  /** Committed and answered (reads leave out the others). */
  committed: boolean;
  /** The socket the event is not sent to (a client event's sender, a trigger's socket_id). */
  except?: string;
}

interface ChannelHistory {
  channel: string;
  generation: number;
  /** The last sequence given. */
  sequence: number;
  /** Kept events are events[head..], oldest first. */
  events: Stored[];
  head: number;
  /** Epoch ms of the last event given a serial. */
  lastAt: number;
}

interface AppHistory {
  channels: Map<string, ChannelHistory>;
  bytes: number;
  /** Every kept event of the app in the order kept, for the byte bound (entries may be stale: checked when used). */
  order: { channel: ChannelHistory; sequence: number }[];
  orderHead: number;
}

export class HistoryStore {
  private readonly db: Database<Value, Key>;
  private readonly apps = new Map<string, AppHistory>();
  /** The last generation started on this shard: two fresh channels in one ms still get distinct ones. */
  private lastGeneration = 0;

  /**
   * Reads back what the previous worker kept; `boundsOf` answers an app's bounds (null: the app
   * keeps no history now, and what it kept is dropped).
   */
  constructor(
    root: RootDatabase,
    boundsOf: (appId: string) => HistoryBounds | null,
    private readonly now: () => number = Date.now,
  ) {
    this.db = root.openDB<Value, Key>({ name: HISTORY_DATABASE });
    this.load(boundsOf);
  }

  /**
   * Gives the event the channel's next serial and keeps it within the bounds. Answers the serial,
   * its write (resolves once committed, durable; rejects when it failed) and `answered`, to call
   * when its answer goes out: reads include the event from then on, not before. `except`: the
   * socket it is not sent to, kept with it (readEnvelopes).
   */
  append(
    appId: string,
    channel: string,
    event: string,
    data: string,
    userId: string | undefined,
    bounds: HistoryBounds,
    except?: string,
  ): { serial: string; written: Promise<void>; answered: () => void } {
    const now = this.now();
    let app = this.apps.get(appId);
    if (!app) this.apps.set(appId, (app = { channels: new Map(), bytes: 0, order: [], orderHead: 0 }));
    let ch = app.channels.get(channel);
    if (!ch) app.channels.set(channel, (ch = { channel, generation: this.newGeneration(now), sequence: 0, events: [], head: 0, lastAt: now }));
    const sequence = ++ch.sequence;
    ch.lastAt = now;
    const serial = formatSerial(ch.generation, sequence);
    const bytes = cacheEntryBytes(channel, event, data);
    if (bytes > bounds.maxBytes) {
      // Not kept: the older ones go too, so that what is kept stays an unbroken run.
      while (ch.head < ch.events.length) this.evictOldest(appId, app, ch);
      return { serial, written: Promise.resolve(), answered: () => undefined };
    }
    const stored: Stored = { serial, event, data, publishedAt: now, sequence, bytes, committed: false };
    if (userId !== undefined) stored.userId = userId;
    if (except !== undefined) stored.except = except;
    ch.events.push(stored);
    app.order.push({ channel: ch, sequence });
    app.bytes += bytes;
    const written = this.db.put([appId, channel, serial], recordOf(event, data, now, userId, except)).then(() => undefined);
    this.expire(appId, app, ch, bounds, now);
    while (ch.events.length - ch.head > bounds.maxEvents) this.evictOldest(appId, app, ch);
    this.evictForBytes(appId, app, bounds.maxBytes);
    return {
      serial,
      written,
      answered: () => {
        stored.committed = true;
      },
    };
  }

  /**
   * The kept events after `since` (all of them without), at most `limit`, oldest first when
   * `since` is given and the newest `limit` otherwise. `since` must be a serial (parseSerial).
   */
  read(appId: string, channel: string, since: string | undefined, limit: number, bounds: HistoryBounds): HistoryRead {
    const { events, complete } = this.readStored(appId, channel, since, limit, bounds);
    return { events: events.map(publicEvent), complete };
  }

  /** read(), each event with the socket it is not sent to: for a recovering join's replay (previous-sockets.ts). */
  readEnvelopes(appId: string, channel: string, since: string | undefined, limit: number, bounds: HistoryBounds): { envelopes: KeptEnvelope[]; complete: boolean } {
    const { events, complete } = this.readStored(appId, channel, since, limit, bounds);
    return { envelopes: events.map((e) => ({ kept: publicEvent(e), exceptSocketId: e.except })), complete };
  }

  private readStored(appId: string, channel: string, since: string | undefined, limit: number, bounds: HistoryBounds): { events: Stored[]; complete: boolean } {
    const app = this.apps.get(appId);
    const ch = app?.channels.get(channel);
    if (!app || !ch) return { events: [], complete: since === undefined };
    this.expire(appId, app, ch, bounds, this.now());
    const kept = ch.events.slice(ch.head).filter((e) => e.committed);
    if (since === undefined) {
      return { events: kept.slice(Math.max(0, kept.length - limit)), complete: kept.length <= limit };
    }
    const after = kept.filter((e) => e.serial > since);
    return { events: after.slice(0, limit), complete: this.reaches(ch, since) && after.length <= limit };
  }

  /** Drops expired events and forgets channels long empty; called on a timer by the shard. */
  prune(boundsOf: (appId: string) => HistoryBounds | null): void {
    const now = this.now();
    for (const [appId, app] of this.apps) {
      const bounds = boundsOf(appId);
      for (const ch of [...app.channels.values()]) {
        if (bounds) this.expire(appId, app, ch, bounds, now);
        else while (ch.head < ch.events.length) this.evictOldest(appId, app, ch);
        if (ch.head === ch.events.length && now - ch.lastAt > Math.max(EMPTY_CHANNEL_KEPT_MS, (bounds?.ttlSeconds ?? 0) * 1000)) {
          app.channels.delete(ch.channel);
        }
      }
      this.compactOrder(app);
      if (app.channels.size === 0) this.apps.delete(appId);
    }
  }

  /** Drops everything an app kept (the app was removed): an app created later with its id starts empty. */
  removeApp(appId: string): void {
    const app = this.apps.get(appId);
    if (!app) return;
    for (const ch of app.channels.values()) while (ch.head < ch.events.length) this.evictOldest(appId, app, ch);
    this.apps.delete(appId);
  }

  /** Bytes of the app's kept events on this shard. */
  keptBytes(appId: string): number {
    return this.apps.get(appId)?.bytes ?? 0;
  }

  /** Whether nothing after `since` is missing from what the channel keeps. */
  private reaches(ch: ChannelHistory, since: string): boolean {
    const first = ch.events[ch.head];
    if (!first) return since >= formatSerial(ch.generation, ch.sequence);
    if (since >= first.serial) return true;
    const parts = parseSerial(since);
    return parts !== null && parts.generation === ch.generation && parts.sequence === first.sequence - 1;
  }

  private expire(appId: string, app: AppHistory, ch: ChannelHistory, bounds: HistoryBounds, now: number): void {
    const oldest = now - bounds.ttlSeconds * 1000;
    while (ch.head < ch.events.length && ch.events[ch.head]!.publishedAt <= oldest) this.evictOldest(appId, app, ch);
  }

  private evictForBytes(appId: string, app: AppHistory, maxBytes: number): void {
    while (app.bytes > maxBytes && app.orderHead < app.order.length) {
      const { channel: ch, sequence } = app.order[app.orderHead++]!;
      const first = ch.events[ch.head];
      if (first && first.sequence === sequence && app.channels.get(ch.channel) === ch) this.evictOldest(appId, app, ch);
    }
    this.compactOrder(app);
  }

  private evictOldest(appId: string, app: AppHistory, ch: ChannelHistory): void {
    const gone = ch.events[ch.head]!;
    ch.events[ch.head++] = undefined as unknown as Stored;
    app.bytes -= gone.bytes;
    if (ch.head > 32 && ch.head * 2 > ch.events.length) {
      ch.events = ch.events.slice(ch.head);
      ch.head = 0;
    }
    this.write(appId, () => this.db.remove([appId, ch.channel, gone.serial]));
  }

  /** Drops the used part of the order list once it is most of it. */
  private compactOrder(app: AppHistory): void {
    if (app.orderHead > 64 && app.orderHead * 2 > app.order.length) {
      app.order = app.order.slice(app.orderHead);
      app.orderHead = 0;
    }
  }

  private newGeneration(now: number): number {
    this.lastGeneration = Math.max(now, this.lastGeneration + 1);
    return this.lastGeneration;
  }

  /** Never throws into the request: LMDB refuses keys over ~2 KB synchronously. */
  private write(appId: string, op: () => Promise<boolean>): void {
    try {
      op().catch((err: unknown) => logWriteFailure(err, 'channel history write failed', { appId }));
    } catch (err) {
      log.warn('channel history event not written', { appId, error: String(err) });
    }
  }

  /** Reads back the kept events (in key order: app, channel, serial), dropping what no longer fits. */
  private load(boundsOf: (appId: string) => HistoryBounds | null): void {
    const now = this.now();
    const dropped: Key[] = [];
    for (const { key, value } of this.db.getRange({})) {
      const [appId, channel, serial] = key;
      const bounds = boundsOf(appId);
      const parts = parseSerial(serial);
      if (!bounds || !parts || !Array.isArray(value) || value[2] <= now - bounds.ttlSeconds * 1000) {
        dropped.push(key);
        continue;
      }
      let app = this.apps.get(appId);
      if (!app) this.apps.set(appId, (app = { channels: new Map(), bytes: 0, order: [], orderHead: 0 }));
      let ch = app.channels.get(channel);
      if (!ch || ch.generation !== parts.generation || parts.sequence !== ch.sequence + 1) {
        // A new run (or a hole): only the unbroken tail counts as kept.
        if (ch) for (const e of ch.events) dropped.push([appId, channel, e.serial]);
        ch = { channel, generation: parts.generation, sequence: parts.sequence - 1, events: [], head: 0, lastAt: value[2] };
        app.channels.set(channel, ch);
      }
      const [event, data, publishedAt, userId, except] = value;
      const stored: Stored = { serial, event, data, publishedAt, sequence: parts.sequence, bytes: cacheEntryBytes(channel, event, data), committed: true };
      if (typeof userId === 'string') stored.userId = userId;
      if (typeof except === 'string') stored.except = except;
      ch.events.push(stored);
      ch.sequence = parts.sequence;
      ch.lastAt = publishedAt;
      app.bytes += stored.bytes;
      this.lastGeneration = Math.max(this.lastGeneration, parts.generation);
    }
    for (const [appId, app] of this.apps) {
      const all: Stored[] = [];
      const channelOf = new Map<Stored, ChannelHistory>();
      for (const ch of app.channels.values()) {
        for (const e of ch.events) {
          all.push(e);
          channelOf.set(e, ch);
        }
      }
      all.sort((a, b) => a.publishedAt - b.publishedAt);
      app.order = all.map((e) => ({ channel: channelOf.get(e)!, sequence: e.sequence }));
      const bounds = boundsOf(appId)!;
      for (const ch of app.channels.values()) while (ch.events.length - ch.head > bounds.maxEvents) this.evictOldest(appId, app, ch);
      this.evictForBytes(appId, app, bounds.maxBytes);
    }
    for (const key of dropped) this.write(key[0], () => this.db.remove(key));
    if (this.apps.size > 0) log.info('channel history read back', { apps: this.apps.size, dropped: dropped.length });
  }
}

/** An event's record: the optional fields only when set (userId undefined, which msgpackr keeps, holds the place of an except socket). */
function recordOf(event: string, data: string, publishedAt: number, userId: string | undefined, except: string | undefined): Value {
  if (except !== undefined) return [event, data, publishedAt, userId, except];
  return userId === undefined ? [event, data, publishedAt] : [event, data, publishedAt, userId];
}

function publicEvent(e: Stored): KeptEvent {
  // A fresh object of the wire fields only (not `bytes`, `sequence`, `committed`, `except`).
  const out: KeptEvent = { serial: e.serial, event: e.event, data: e.data, publishedAt: e.publishedAt };
  if (e.userId !== undefined) out.userId = e.userId;
  return out;
}
