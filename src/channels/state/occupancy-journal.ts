/**
 * Which channels a shard holds occupied, and the presence members on them, written to the
 * shard's LMDB environment (`channels/occupied`). Channel state itself is in memory and dies
 * with the worker or the process; without this record, a crash or `kill -9` would lose the
 * channel_vacated / member_removed webhooks of every channel occupied at that moment. On the
 * next start the shard reads the record back and emits them (see shard-handlers.ts).
 *
 * Only apps with webhooks are recorded (the caller decides): nobody else needs it. Writes are
 * lmdb-js asynchronous writes, committed with the turn's other writes (the webhook outbox's
 * included), never awaited on the request path.
 *
 * Records: key `JSON.stringify([appId, channel])` for an occupied channel and
 * `JSON.stringify([appId, channel, userId])` for a member; the value repeats the parts, so
 * reading never parses keys.
 */
import type { Database, RootDatabase } from 'lmdb';
import { logWriteFailure } from '../../shards/disk-full.js';
import { log } from '../../log.js';

/** The database's name (also declared to the reshard, occupancy-layout.ts). */
export const OCCUPANCY_DATABASE = 'channels/occupied';

type RecordParts = [appId: string, channel: string] | [appId: string, channel: string, userId: string];

/** A channel found occupied in the record, with the presence members recorded on it. */
export interface RecordedChannel {
  appId: string;
  channel: string;
  /** User ids, for presence channels (empty otherwise). */
  members: string[];
}

export class OccupancyJournal {
  private readonly db: Database<RecordParts, string>;

  constructor(root: RootDatabase) {
    this.db = root.openDB<RecordParts, string>({ name: OCCUPANCY_DATABASE });
  }

  occupied(appId: string, channel: string): void {
    this.put([appId, channel]);
  }

  vacated(appId: string, channel: string): void {
    this.remove([appId, channel]);
  }

  memberAdded(appId: string, channel: string, userId: string): void {
    this.put([appId, channel, userId]);
  }

  memberRemoved(appId: string, channel: string, userId: string): void {
    this.remove([appId, channel, userId]);
  }

  /**
   * Every recorded channel with its members, and the records deleted (asynchronously): they
   * describe the state of a worker that is gone. Called once, when the shard starts. A member
   * whose channel record is missing (its write was lost) still counts its channel.
   */
  takeAll(): RecordedChannel[] {
    const channels = new Map<string, RecordedChannel>();
    const keys: string[] = [];
    for (const { key, value } of this.db.getRange({})) {
      keys.push(key);
      if (!Array.isArray(value) || typeof value[0] !== 'string' || typeof value[1] !== 'string') continue;
      const id = JSON.stringify([value[0], value[1]]);
      let recorded = channels.get(id);
      if (!recorded) channels.set(id, (recorded = { appId: value[0], channel: value[1], members: [] }));
      if (value.length === 3 && typeof value[2] === 'string') recorded.members.push(value[2]);
    }
    for (const key of keys) this.watch(this.db.remove(key));
    return [...channels.values()];
  }

  private put(parts: RecordParts): void {
    this.write(parts, (key) => this.db.put(key, parts));
  }

  private remove(parts: RecordParts): void {
    this.write(parts, (key) => this.db.remove(key));
  }

  /** Never throws into the request: LMDB refuses keys over ~2 KB synchronously (odd, huge ids). */
  private write(parts: RecordParts, op: (key: string) => Promise<boolean>): void {
    try {
      this.watch(op(JSON.stringify(parts)));
    } catch (err) {
      log.warn('channel occupancy record not written', { appId: parts[0], error: String(err) });
    }
  }

  private watch(write: Promise<boolean>): void {
    write.catch((err: unknown) => logWriteFailure(err, 'channel occupancy record write failed'));
  }
}
