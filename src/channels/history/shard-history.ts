/**
 * The history of one shard's channels (history-store.ts) as the channel area uses it: each
 * app's bounds on this shard (its bytes shared evenly by the shards), appends answered in
 * serial order once committed, a recovering client's events, and the expired events pruned
 * every HISTORY_PRUNE_INTERVAL_MS.
 */
import type { RootDatabase } from 'lmdb';
import type { AppConfig } from '../../config/schema.js';
import { HeraldError } from '../../errors.js';
import { describeError, log } from '../../log.js';
import type { ChannelShardApi, HistoryAppend, HistoryRead, HistoryRecovery, KeptNotice } from '../messages.js';
import { frontEndsAttached, noticeFrontEnds } from '../../shards/front-end-notices.js';
import { keptEvent } from '../frames.js';
import { HistoryStore, type HistoryBounds } from './history-store.js';
import { keepsHistory } from './patterns.js';
import { replayedTo } from './previous-sockets.js';
import { parseSerial } from './serial.js';

/** How often expired history events are dropped (ms); reads check expiry themselves. */
const HISTORY_PRUNE_INTERVAL_MS = 5_000;

type AppendResults = ChannelShardApi['channels.historyAppends']['res']['results'];

export class ShardHistory {
  private readonly store: HistoryStore;
  private readonly prune: NodeJS.Timeout;

  /** Opens the history databases of the shard; `appOf` answers the app's current config (undefined once removed). */
  constructor(
    root: RootDatabase,
    private readonly shard: { shardIndex: number; shardCount: number },
    private readonly appOf: (appId: string) => AppConfig | undefined,
  ) {
    const bounds = (appId: string): HistoryBounds | null => this.bounds(appId);
    this.store = new HistoryStore(root, bounds);
    this.prune = setInterval(() => this.store.prune(bounds), HISTORY_PRUNE_INTERVAL_MS);
    this.prune.unref();
  }

  /** An app's history bounds on this shard; null when it keeps no history. Its bytes are shared evenly by the shards. */
  bounds(appId: string): HistoryBounds | null {
    const app = this.appOf(appId);
    if (!app?.history) return null;
    return { maxEvents: app.history.maxEvents, ttlSeconds: app.history.ttlSeconds, maxBytes: Math.floor(app.maxHistoryBytes / this.shard.shardCount) };
  }

  /**
   * `channels.historyAppends`: keeps each event of a history channel and answers its serial
   * (null: the app keeps no history for it now) once committed; commits resolve in order, so
   * the answers keep serial order. The events are readable from the answer's turn on.
   */
  async appendAll(appends: readonly HistoryAppend[], appFor: (appId: string) => AppConfig): Promise<{ results: AppendResults }> {
    const taken = appends.map((append) => {
      try {
        return this.append(append, appFor(append.appId));
      } catch (err) {
        return { failed: err };
      }
    });
    const results = await Promise.all(
      taken.map(async (t): Promise<AppendResults[number]> => {
        try {
          if ('failed' in t) throw t.failed;
          await t.written;
          return { ok: true, serial: t.serial };
        } catch (err) {
          if (err instanceof HeraldError) return { ok: false, code: err.code, message: err.message };
          log.error('channel history append failed', { shard: this.shard.shardIndex, error: describeError(err) });
          return { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard' };
        }
      }),
    );
    // Readable from now on: the answer goes out in this turn, before any later request is taken.
    for (const t of taken) if (!('failed' in t)) t.answered();
    // Several front-end threads: each gets every kept event from here, in serial order, and
    // delivers it to its own sockets (whichever thread appended it).
    if (frontEndsAttached()) {
      appends.forEach((a, i) => {
        const r = results[i];
        if (!r?.ok || r.serial === null) return;
        const notice: KeptNotice = { type: 'channels.kept', appId: a.appId, channel: a.channel, frame: keptEvent(a.event, a.channel, a.data, r.serial, a.userId) };
        if (a.except !== undefined) notice.except = a.except;
        noticeFrontEnds(notice);
      });
    }
    return { results };
  }

  /**
   * The kept events after a recovering client's serial, read in the turn its join is recorded,
   * less those left out for the client: for `socketId` (its socket now) or one of
   * `previousSocketIds` (previous-sockets.ts).
   */
  recoveryAfter(app: AppConfig, channel: string, since: string, socketId: string, previousSocketIds?: readonly string[]): HistoryRecovery {
    const bounds = this.bounds(app.id);
    if (!bounds || !keepsHistory(app, channel)) return { events: [], failed: 'not_a_history_channel' };
    if (parseSerial(since) === null) return { events: [], failed: 'invalid_serial' };
    const read = this.store.readEnvelopes(app.id, channel, since, bounds.maxEvents, bounds);
    return read.complete ? { events: replayedTo(read.envelopes, socketId, previousSocketIds), failed: null } : { events: [], failed: 'history_evicted' };
  }

  /** `channels.history`: the kept events of a channel after `since`; complete and empty for an app without history. */
  read(appId: string, channel: string, since: string | undefined, limit: number): HistoryRead {
    const bounds = this.bounds(appId);
    if (!bounds) return { events: [], complete: true };
    return this.store.read(appId, channel, since, limit, bounds);
  }

  /** Drops every kept event of a removed app. */
  removeApp(appId: string): void {
    this.store.removeApp(appId);
  }

  close(): void {
    clearInterval(this.prune);
  }

  /** Keeps one event of a history channel: its serial (null: the app keeps no history for it now) and its write. */
  private append(req: HistoryAppend, app: AppConfig): { serial: string | null; written: Promise<void>; answered: () => void } {
    const bounds = this.bounds(req.appId);
    if (!bounds || !keepsHistory(app, req.channel)) return { serial: null, written: Promise.resolve(), answered: () => undefined };
    return this.store.append(req.appId, req.channel, req.event, req.data, req.userId, bounds, req.except);
  }
}
