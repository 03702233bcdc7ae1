/**
 * Catching up a node's history channels after its subscriber connection came back. While that
 * connection is down the node receives no frame, yet its sockets stay connected (and its
 * command connection may stay up, other nodes publishing on): without this they would silently
 * miss the history events published meanwhile.
 *
 * Per history channel this node has subscribers on, it remembers the last serial it delivered
 * (a baseline read when the channel is first watched here, then each history frame's serial).
 * From a drop of the subscriber connection, the channel's history frames are held; once the
 * node listens again, one read takes what is kept after that serial with a mark (as a
 * recovering join's, history-seam.ts): the held frames before the mark are events the read
 * holds (or older), dropped; those after it are later. The channel's sockets get the read's
 * events in order (or `herald:recovery_failed` when the history no longer reaches back), then
 * the frames held after the mark, then live ones: nothing missed, nothing twice. Each event
 * leaves out the socket its live frame would (a client event's sender, a trigger's socket_id),
 * kept with it in Redis.
 *
 * A node's own history events reach its sockets only through its subscriber connection (the
 * append script publishes them to every node, this one included; redis-adapter.ts publishKept
 * delivers nothing itself): one appended while that connection was down reached none of them,
 * and the catch-up delivers it once.
 */
import { keptEvent, recoveryFailed } from '../../frames.js';
import type { EnvelopeRead, HistoryMark } from './history-store.js';

/** Pause before a catch-up whose read failed or whose mark did not arrive is tried again (ms). */
const RETRY_PAUSE_MS = 200;

/** `"serial":"` + 26 characters + `"}`: how a history frame ends (frames.ts keptEvent). */
const SERIAL_TAIL = 38;
const SERIAL_KEY = '"serial":"';

export interface CatchUpDeps {
  /** The kept events after `since`, each with its except socket, and the channel's last serial given, publishing `mark` in the same step; null when the channel keeps no history now. */
  read(appId: string, channel: string, since: string, mark: HistoryMark): Promise<EnvelopeRead | null>;
  /** The channel's last serial given, publishing `mark` in the same step; null when it keeps no history now. */
  point(appId: string, channel: string, mark: HistoryMark): Promise<string | null>;
  /** Sends a frame to the channel's sockets on this node. */
  deliver(appId: string, channel: string, frame: string, exceptSocketId: string | undefined): void;
  /** A mark for this token, published to this node's control topic. */
  markFor(token: string): HistoryMark;
  /** Whether the node receives what the others publish (delivery-bus.ts listening). */
  listening(): boolean;
  /** How long a mark may take to arrive (ms) before the read is made again. */
  markWaitMs: number;
}

interface Held {
  frame: string;
  except: string | undefined;
}

interface Watched {
  appId: string;
  channel: string;
  /** The last serial delivered here, or the baseline; undefined until either is known. */
  last: string | undefined;
  /** From a drop of the subscriber connection until caught up. */
  holding: boolean;
  /** Counts the drops: a catch-up of an earlier one stops. */
  round: number;
  /** The round whose catch-up started. */
  started: number;
  /** The current catch-up's mark arrived: frames from then on come after its read. */
  marked: boolean;
  /** History frames received after the mark, delivered once the read's events are. */
  after: Held[];
  /** The baseline read in flight, shared by the joins that wait for it. */
  baseline?: Promise<boolean> | undefined;
  /** Joins waiting for the catch-up to end. */
  waiting: (() => void)[];
}

export class HistoryCatchUp {
  /** `appId\0channel` → the history channels with subscribers here. */
  private readonly channels = new Map<string, Watched>();
  /** Marks awaited, by token. */
  private readonly marks = new Map<string, () => void>();
  private counter = 0;
  private closed = false;

  constructor(private readonly deps: CatchUpDeps) {}

  /**
   * A history channel got a subscriber here, this node listening to it: resolves once its
   * baseline is known (at once when it already is) and no catch-up is under way (its socket,
   * attached after, gets none of the catch-up's events: its own join answered what it missed).
   * Rejects when the read fails; false when the mark did not arrive or the catch-up did not end
   * within markWaitMs (the subscriber connection dropped: the join is made again).
   */
  watch(appId: string, channel: string): Promise<boolean> {
    const key = keyOf(appId, channel);
    let w = this.channels.get(key);
    if (!w) this.channels.set(key, (w = { appId, channel, last: undefined, holding: false, round: 0, started: 0, marked: false, after: [], waiting: [] }));
    if (w.holding) return this.caughtUp(w).then((ended) => ended && this.watch(appId, channel));
    if (w.last !== undefined) return Promise.resolve(true);
    const watched = w;
    watched.baseline ??= this.takeBaseline(key, watched).finally(() => (watched.baseline = undefined));
    return watched.baseline;
  }

  private async takeBaseline(key: string, w: Watched): Promise<boolean> {
    const { appId, channel } = w;
    const { token, marked } = this.awaitMark();
    try {
      const point = await this.deps.point(appId, channel, this.deps.markFor(token));
      if (point === null) return true;
      if (!(await marked)) return false;
      // Every frame published before the point preceded the mark: delivered, or held by a drop since.
      if (this.channels.get(key) === w) raise(w, point);
      return true;
    } finally {
      this.marks.delete(token);
    }
  }

  /** The channel's last subscriber here left. */
  forget(appId: string, channel: string): void {
    const key = keyOf(appId, channel);
    const w = this.channels.get(key);
    this.channels.delete(key);
    if (w) for (const wake of w.waiting.splice(0)) wake();
  }

  /** Whether a frame this node received for the channel goes to its sockets now (false: held or dropped). */
  frame(appId: string, channel: string, frame: string, exceptSocketId: string | undefined): boolean {
    if (this.channels.size === 0) return true;
    const w = this.channels.get(keyOf(appId, channel));
    if (!w || !frame.startsWith(SERIAL_KEY, frame.length - SERIAL_TAIL)) return true;
    if (w.holding) {
      if (w.marked) w.after.push({ frame, except: exceptSocketId });
      return false;
    }
    w.last = serialOf(frame);
    return true;
  }

  /** A mark arrived on this node's control topic; false when it is not one of these. */
  mark(token: string): boolean {
    const arrived = this.marks.get(token);
    if (!arrived) return false;
    arrived();
    return true;
  }

  /** The subscriber connection dropped: the history frames received from now on are held. */
  dropped(): void {
    for (const w of this.channels.values()) {
      w.round++;
      w.holding = true;
      w.marked = false;
      w.after = [];
    }
  }

  /** The node listens again: every channel held catches up. */
  listening(): void {
    for (const [key, w] of this.channels) {
      if (!w.holding || w.started === w.round) continue;
      w.started = w.round;
      void this.catchUp(key, w, w.round);
    }
  }

  close(): void {
    this.closed = true;
    for (const arrived of this.marks.values()) arrived();
    for (const w of this.channels.values()) for (const wake of w.waiting.splice(0)) wake();
  }

  private async catchUp(key: string, w: Watched, round: number): Promise<void> {
    const current = (): boolean => !this.closed && this.channels.get(key) === w && w.holding && w.round === round;
    while (current()) {
      // Dropped again: the next listening() starts it over.
      if (!this.deps.listening()) return;
      if (w.last === undefined) {
        // No baseline yet (its join is made again): nothing this node can tell was missed.
        this.release(w);
        return;
      }
      w.marked = false;
      w.after = [];
      const { token, marked } = this.awaitMark(() => {
        if (w.round === round) w.marked = true;
      });
      let read: Awaited<ReturnType<CatchUpDeps['read']>> | undefined;
      try {
        read = await this.deps.read(w.appId, w.channel, w.last, this.deps.markFor(token));
        if (!(await marked)) read = undefined;
      } catch {
        read = undefined;
      } finally {
        this.marks.delete(token);
      }
      if (!current()) return;
      if (read === undefined) {
        await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE_MS));
        continue;
      }
      if (read !== null) {
        if (!read.complete) this.deps.deliver(w.appId, w.channel, recoveryFailed(w.channel, 'history_evicted'), undefined);
        else for (const { kept: e, exceptSocketId } of read.envelopes) this.deps.deliver(w.appId, w.channel, keptEvent(e.event, w.channel, e.data, e.serial, e.userId), exceptSocketId);
        if (read.lastGiven !== '') raise(w, read.lastGiven);
      }
      this.release(w);
      return;
    }
  }

  /** True once the channel's catch-up ended, false after markWaitMs. */
  private caughtUp(w: Watched): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.deps.markWaitMs);
      timer.unref();
      w.waiting.push(() => {
        clearTimeout(timer);
        resolve(!this.closed);
      });
    });
  }

  /** Delivers what was held after the mark; live delivery takes over. */
  private release(w: Watched): void {
    for (const held of w.after) {
      this.deps.deliver(w.appId, w.channel, held.frame, held.except);
      w.last = serialOf(held.frame);
    }
    w.holding = false;
    w.marked = false;
    w.after = [];
    for (const wake of w.waiting.splice(0)) wake();
  }

  /** A token whose mark resolves `marked` true (calling `onMark` first), or false after markWaitMs or on close. */
  private awaitMark(onMark?: () => void): { token: string; marked: Promise<boolean> } {
    const token = `c${++this.counter}`;
    const marked = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), this.deps.markWaitMs);
      timer.unref();
      this.marks.set(token, () => {
        clearTimeout(timer);
        onMark?.();
        resolve(!this.closed);
      });
    });
    return { token, marked };
  }
}

/** The channel's last serial is at least `serial`. */
function raise(w: Watched, serial: string): void {
  if (w.last === undefined || serial > w.last) w.last = serial;
}

function keyOf(appId: string, channel: string): string {
  return `${appId}\u0000${channel}`;
}

function serialOf(frame: string): string {
  return frame.slice(frame.length - SERIAL_TAIL + SERIAL_KEY.length, frame.length - 2);
}
