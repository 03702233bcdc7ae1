/**
 * The occupancy record (occupancy-journal.ts) as the channel area keeps it, for apps with
 * webhooks: every join and leave that changes a channel is recorded, so a worker starting
 * after a crash or kill -9 finds the channels its predecessor left occupied. It emits their
 * member_removed and channel_vacated at once, into the page-reload debounce, and remembers
 * them for a while: a restore of the same subscriptions then emits channel_occupied /
 * member_added, which cancel them in the debounce.
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
  /** Keys of the leaves emitted for the previous worker's channels, until `forgetAfterMs` has passed. */
  private readonly recovered: Set<string>;
  private readonly forget: NodeJS.Timeout;

  /**
   * Reads (and clears) the record the previous worker left and emits, for each recorded
   * channel of an app that still has webhooks, member_removed for its members then
   * channel_vacated, as a real leave would; a restore may cancel them for `forgetAfterMs`.
   */
  constructor(root: RootDatabase, apps: ReadonlyMap<string, AppConfig>, emit: (app: AppConfig, event: ChannelEventBody) => void, forgetAfterMs: number) {
    this.journal = new OccupancyJournal(root);
    this.recovered = new Set<string>();
    let channels = 0;
    for (const { appId, channel, members } of this.journal.takeAll()) {
      const app = apps.get(appId);
      if (!app || app.webhooks.length === 0) continue;
      channels++;
      for (const userId of members) {
        emit(app, { name: 'member_removed', channel, user_id: userId });
        this.recovered.add(recoveredKey(appId, channel, userId));
      }
      emit(app, { name: 'channel_vacated', channel });
      this.recovered.add(recoveredKey(appId, channel));
    }
    if (channels > 0) log.info('channels left occupied by the previous worker: vacated (debounced)', { channels, members: this.recovered.size - channels });
    this.forget = setTimeout(() => this.recovered.clear(), forgetAfterMs);
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
   * Whether a restore re-occupying this channel (or re-adding this member) cancels a leave
   * emitted at start-up: true once per key, while they are remembered.
   */
  takeRecovered(appId: string, channel: string, userId?: string): boolean {
    return this.recovered.delete(recoveredKey(appId, channel, userId));
  }

  close(): void {
    clearTimeout(this.forget);
  }
}
