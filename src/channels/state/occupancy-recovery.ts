/**
 * The occupancy record (occupancy-journal.ts) as the channel area keeps it, for apps with
 * webhooks: every join and leave that changes a channel is recorded, so a worker starting
 * after a crash or kill -9 finds the channels its predecessor left occupied. It emits their
 * member_removed and channel_vacated into the page-reload debounce once the server accepts
 * clients (`onServing`: the clients that come back get the whole debounce, however long the
 * start took), and remembers them for a while: a restore of the same subscriptions then emits
 * channel_occupied / member_added, which cancel them in the debounce. A join or restore before
 * that (a front end that listens before the others) takes the leave back instead: neither goes out.
 */
import type { RootDatabase } from 'lmdb';
import type { AppConfig } from '../../config/schema.js';
import { log } from '../../log.js';
import type { ChannelEventBody } from '../../webhooks/emitter.js';
import type { JoinOutcome, LeaveOutcome } from './channel-store.js';
import { OccupancyJournal } from './occupancy-journal.js';

function recoveredKey(appId: string, channel: string, userId?: string): string {
  return userId === undefined ? JSON.stringify([appId, channel]) : JSON.stringify([appId, channel, userId]);
}

export class OccupancyRecovery {
  private readonly journal: OccupancyJournal;
  /** Keys of the leaves found for the previous worker's channels, until `forgetAfterMs` after they went out. */
  private readonly recovered: Set<string>;
  /** The leaves found, by key, until they go out (onServing); a join before that takes its key back. */
  private pending: Map<string, { app: AppConfig; event: ChannelEventBody }> | undefined = new Map();
  private forget: NodeJS.Timeout | undefined;
  private closed = false;

  /**
   * Reads (and clears) the record the previous worker left; once the server serves, emits for
   * each recorded channel of an app that still has webhooks member_removed for its members then
   * channel_vacated, as a real leave would; a restore may cancel them for `forgetAfterMs`.
   */
  constructor(
    root: RootDatabase,
    apps: ReadonlyMap<string, AppConfig>,
    private readonly emit: (app: AppConfig, event: ChannelEventBody) => void,
    private readonly forgetAfterMs: number,
    onServing: (run: () => void) => void,
  ) {
    this.journal = new OccupancyJournal(root);
    this.recovered = new Set<string>();
    let channels = 0;
    for (const { appId, channel, members } of this.journal.takeAll()) {
      const app = apps.get(appId);
      if (!app || app.webhooks.length === 0) continue;
      channels++;
      for (const userId of members) this.found(recoveredKey(appId, channel, userId), app, { name: 'member_removed', channel, user_id: userId });
      this.found(recoveredKey(appId, channel), app, { name: 'channel_vacated', channel });
    }
    if (channels > 0) log.info('channels left occupied by the previous worker: vacated (debounced)', { channels, members: this.recovered.size - channels });
    onServing(() => this.release());
  }

  private found(key: string, app: AppConfig, event: ChannelEventBody): void {
    this.recovered.add(key);
    this.pending!.set(key, { app, event });
  }

  /** The server accepts clients: the leaves found go out, in the order found, into the debounce. */
  private release(): void {
    const pending = this.pending;
    this.pending = undefined;
    if (this.closed || !pending) return;
    for (const { app, event } of pending.values()) this.emit(app, event);
    this.forget = setTimeout(() => this.recovered.clear(), this.forgetAfterMs);
    this.forget.unref();
  }

  /** Keeps the record in step with a join (apps with webhooks only). */
  recordJoin(app: AppConfig, channel: string, outcome: JoinOutcome, userId: string | undefined): void {
    if (app.webhooks.length === 0 || !outcome.changed) return;
    if (outcome.occupied) this.journal.occupied(app.id, channel);
    if (outcome.memberAdded && userId !== undefined) this.journal.memberAdded(app.id, channel, userId);
  }

  /** Keeps the record in step with a leave (apps with webhooks only). */
  recordLeave(app: AppConfig, channel: string, outcome: LeaveOutcome): void {
    if (app.webhooks.length === 0 || !outcome.changed) return;
    if (outcome.memberRemoved !== null) this.journal.memberRemoved(app.id, channel, outcome.memberRemoved);
    if (outcome.vacated) this.journal.vacated(app.id, channel);
  }

  /** A removed app's member is gone from the record, whatever the app's webhooks were. */
  memberRemoved(appId: string, channel: string, userId: string): void {
    this.journal.memberRemoved(appId, channel, userId);
  }

  /** A removed app's channel is gone from the record, whatever the app's webhooks were. */
  vacated(appId: string, channel: string): void {
    this.journal.vacated(appId, channel);
  }

  /**
   * A join re-occupying this channel (or re-adding this member) before the leaves found went
   * out: the leave is taken back and the join sends nothing either (for the receiver the
   * channel never emptied). True once per key.
   */
  takeBack(appId: string, channel: string, userId?: string): boolean {
    const key = recoveredKey(appId, channel, userId);
    if (!this.pending?.delete(key)) return false;
    this.recovered.delete(key);
    return true;
  }

  /**
   * Whether a restore re-occupying this channel (or re-adding this member) cancels a leave
   * emitted at start-up: true once per key, while they are remembered.
   */
  takeRecovered(appId: string, channel: string, userId?: string): boolean {
    return this.recovered.delete(recoveredKey(appId, channel, userId));
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.forget);
  }
}
