/**
 * The durable half of the webhook outbox: two named databases in the shard's LMDB environment.
 *
 *   webhooks/outbox  seq → OutboxEntry   one event for one receiver, until it is delivered
 *   webhooks/dead    seq → DeadLetter    entries given up on (about the newest MAX_DEAD_LETTERS kept)
 *
 * `seq` is a per-shard counter, so key order is the order in which events happened. Writes
 * are lmdb-js asynchronous writes: every write issued in one event-loop turn goes into one
 * transaction, committed and fdatasynced (overlappingSync off, see src/shards/storage.ts) in
 * the background right after that turn. Nothing here blocks the shard's event loop.
 */
import type { Database, RootDatabase } from 'lmdb';
import { log } from '../log.js';
import { logWriteFailure } from '../shards/disk-full.js';

/** The databases' names (also declared to the reshard, outbox-layout.ts). */
export const OUTBOX_DATABASE = 'webhooks/outbox';
export const DEAD_LETTER_DATABASE = 'webhooks/dead';

/**
 * Where one entry goes. `hook` is the index in the instance's `webhooks` list (its secret).
 * `retired`: a removed app's last events, signed with the credentials it had (targets.ts).
 */
export type WebhookTarget =
  | { kind: 'channel'; appId: string; url: string; retired?: true }
  | { kind: 'push'; instanceId: string; url: string; hook: number }
  | { kind: 'publish'; instanceId: string; url: string };

/** One event for one receiver, as stored. */
export interface OutboxEntry {
  seq: number;
  /** Event id, the same for every receiver of one event and across retries: receivers de-duplicate on it. */
  id: string;
  target: WebhookTarget;
  /** Channel entries: the event object as it goes into `events[]` (it carries `id`). */
  event?: Record<string, unknown>;
  /** Push and publish entries: the exact body, fixed once so every retry sends the same bytes. */
  body?: string;
  /** Push: `Webhook-Event-Type`; publish: the caller's label. */
  eventType?: string;
  /** When the event happened, ms since the epoch. */
  createdAt: number;
  /** Not sent before this time (ms): the debounce release time, or the next retry. */
  notBefore: number;
  /** Failed attempts so far. */
  attempts: number;
  /** Leave-debounce key while the entry is held (channel_vacated / member_removed). */
  holdKey?: string;
}

/** A dead-lettered entry and why it was given up on. */
export interface DeadLetter {
  entry: OutboxEntry;
  /** ms since the epoch. */
  deadAt: number;
  reason: string;
}

/**
 * Dead-letter records kept per shard; older ones (lowest seq) are deleted as new ones arrive.
 * A burst may pass the cap until its records are on disk (see trimDeadLetters).
 */
export const MAX_DEAD_LETTERS = 10_000;

export class OutboxStore {
  private readonly outbox: Database<OutboxEntry, number>;
  private readonly dead: Database<DeadLetter, number>;
  private lastSeq: number;
  /** Dead-letter records stored or being stored, trims issued subtracted. */
  private deadCount: number;
  /** A trim waits for the writes issued so far to be on disk. */
  private trimScheduled = false;

  /** `maxDeadLetters`: the dead-letter cap (MAX_DEAD_LETTERS; smaller in tests). */
  constructor(
    private readonly root: RootDatabase,
    private readonly maxDeadLetters = MAX_DEAD_LETTERS,
  ) {
    this.outbox = root.openDB<OutboxEntry, number>({ name: OUTBOX_DATABASE });
    this.dead = root.openDB<DeadLetter, number>({ name: DEAD_LETTER_DATABASE });
    const lastOutbox = first(this.outbox.getKeys({ reverse: true, limit: 1 }));
    const lastDead = first(this.dead.getKeys({ reverse: true, limit: 1 }));
    this.lastSeq = Math.max(lastOutbox ?? 0, lastDead ?? 0);
    this.deadCount = this.dead.getCount();
    if (this.deadCount > this.maxDeadLetters) this.scheduleTrim();
  }

  /** The next sequence number (strictly increasing within this shard's data dir). */
  nextSeq(): number {
    return ++this.lastSeq;
  }

  /** Every stored entry, in the order the events happened. */
  loadPending(): OutboxEntry[] {
    return [...this.outbox.getRange({}).map(({ value }) => value)];
  }

  /** Writes (or rewrites) an entry; durable once the current turn's transaction commits. */
  put(entry: OutboxEntry): void {
    this.watch(this.outbox.put(entry.seq, entry));
  }

  remove(seq: number): void {
    this.watch(this.outbox.remove(seq));
  }

  /** Moves an entry to the dead letters (same transaction as the removal: same turn). */
  deadLetter(entry: OutboxEntry, reason: string, now: number): void {
    this.watch(this.outbox.remove(entry.seq));
    this.watch(this.dead.put(entry.seq, { entry, deadAt: now, reason }));
    this.deadCount++;
    if (this.deadCount > this.maxDeadLetters) this.scheduleTrim();
  }

  /**
   * Trims the dead letters to the cap once every write issued so far is on disk, one trim at
   * a time. Reads see committed data only: a trim run at once would not see this turn's
   * records, and several in one turn would pick the same oldest keys again and again, each
   * counted as a removal, so the count would drift below the real size and the store grow
   * past its cap. After the flush, the keys read are exactly the stored ones, and the next trim
   * waits for this one's removals in turn.
   */
  private scheduleTrim(): void {
    if (this.trimScheduled) return;
    this.trimScheduled = true;
    this.root.flushed.then(
      () => {
        this.trimScheduled = false;
        this.trimDeadLetters();
      },
      (err: unknown) => {
        this.trimScheduled = false;
        log.error('webhook dead-letter trim skipped: flush failed', { error: String(err) });
      },
    );
  }

  private trimDeadLetters(): void {
    const excess = this.deadCount - this.maxDeadLetters;
    if (excess <= 0) return;
    try {
      // lmdb-js renews its read snapshot lazily (on a new event-loop turn, after a commit it
      // has seen): read from the latest one, or the keys of an earlier trim, already removed,
      // come back, are counted as removed again, and the store grows past its cap (seen under
      // CPU load).
      this.root.resetReadTxn();
      const removals: Promise<boolean>[] = [];
      for (const seq of this.dead.getKeys({ limit: excess })) {
        const removal = this.dead.remove(seq);
        this.watch(removal);
        removals.push(removal);
      }
      this.deadCount -= removals.length;
      // The next trim reads only once these removals are committed: before, it could run after
      // a flush that did not include them yet, find the same keys again and count them twice,
      // and the store grew past its cap (seen under CPU load). Records written after the flush
      // this trim waited for were not visible yet: trim again then, or the store would stay
      // over its cap until the next dead letter.
      this.trimScheduled = true;
      void Promise.allSettled(removals).then(() => {
        this.trimScheduled = false;
        if (this.deadCount > this.maxDeadLetters) this.scheduleTrim();
      });
    } catch (err) {
      // The environment was closed meanwhile (shutdown): the next start trims.
      log.debug('webhook dead-letter trim skipped', { error: String(err) });
    }
  }

  /** Dead-letter records kept, newest first. */
  deadLetters(limit = 100): DeadLetter[] {
    return [...this.dead.getRange({ reverse: true, limit }).map(({ value }) => value)];
  }

  get deadLetterCount(): number {
    return this.deadCount;
  }

  /** Resolves once every write issued so far is committed and on disk. */
  async flushed(): Promise<void> {
    await this.root.flushed;
  }

  private watch(write: Promise<boolean>): void {
    // A full disk is logged once per episode by the guard; the entry stays queued in memory.
    write.catch((err: unknown) => logWriteFailure(err, 'webhook outbox write failed'));
  }
}

function first<T>(iterable: Iterable<T>): T | undefined {
  for (const value of iterable) return value;
  return undefined;
}
