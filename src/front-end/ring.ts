/**
 * The ring a producer thread hands channel frames to the other front-end threads through: one
 * SharedArrayBuffer of `capacity` bytes (a power of two), one writer, every front-end thread a
 * reader with its own read sequence. Sequences are byte counts that wrap as Int32; a position
 * is `sequence & (capacity − 1)`.
 *
 * Record, 4-byte aligned and never split across the end of the ring (a padding record fills
 * the rest and the next starts at 0):
 * `[bytes][destination mask][topic bytes][except bytes][frame bytes][sequence][topic][except socket id][frame UTF-8]`.
 * A record whose `bytes` is under the header size, or whose mask is 0, is padding.
 *
 * Every record carries a sequence from one counter shared by all the rings (taken when it is
 * written), and a reader hands on the records it finds in all the rings in that order: a frame
 * written after another was in its ring (an event triggered after the previous trigger was
 * answered, through another thread) is delivered after it.
 *
 * The writer never waits in the event loop: what does not fit queues in order and is written
 * when the slowest reader advances (`Atomics.waitAsync` on its read sequence). Readers are woken
 * through their doorbell in the control buffer, once per producer turn.
 *
 * The queue is bounded (`maxQueuedBytes`, by default half the ring: a reader holds a producer
 * back by at most one and a half rings of its frames), and so is the time a reader may hold the
 * ring without moving while records queue (`maxHeldMs`, 5 s). Past either the writer drops the
 * readers that hold the ring: it stops waiting for them and addressing them, so the other readers go on, and
 * keeps which topics of theirs it did not deliver (the records in the ring they had not read,
 * the queued ones, and each one put while they are dropped). A reader between two drains can be
 * dropped, one in the middle of a drain cannot (its state cell, below, says which). A dropped
 * reader that drains next asks to rejoin; the writer then moves its read sequence to the write
 * sequence and addresses it a gap record (`except bytes` −1, the frame
 * `{"records":n,"topics":[…] or null for every topic}`) before anything else, so a reader
 * learns of every record it missed, in order: nothing is lost silently.
 */

/** Atomics.waitAsync (Node >= 16; not in this project's TypeScript lib). */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs?: number,
) => { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
export const waitAsync: WaitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Ring header (Int32): the write sequence, the writer-is-waiting flag, then reader r's read sequence at READ + r, then reader r's state at readerState(readers, r). */
export const RING_WRITE = 0;
export const RING_WAITING = 1;
export const RING_READ = 2;
export const readerState = (readers: number, r: number): number => RING_READ + readers + r;

/** Reader states: addressed (between drains), draining (the writer may not drop it), dropped by the writer, asking to rejoin. */
export const READER_IDLE = 0;
export const READER_DRAINING = 1;
export const READER_DROPPED = 2;
export const READER_REJOIN = 3;

/** Control buffer (Int32), shared by every ring: reader r's doorbell, active flag and stop flag. */
export const CONTROL_BELL = 0;
export const controlActive = (readers: number, r: number): number => readers + r;
export const controlStop = (readers: number, r: number): number => 2 * readers + r;
/** The sequence counter every ring's records take theirs from. */
export const controlSequence = (readers: number): number => 3 * readers;
export const controlInts = (readers: number): number => 3 * readers + 1;

/** Bytes of a record before its topic. */
export const RECORD_HEADER = 24;
const R_BYTES = 0;
const R_MASK = 1;
const R_TOPIC = 2;
const R_EXCEPT = 3;
const R_FRAME = 4;
const R_SEQUENCE = 5;
/** `except bytes` of a gap record. */
const GAP = -1;

/** The content of a gap record's frame. */
function parseGap(frame: Uint8Array): Missed {
  const { records, topics } = JSON.parse(Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8')) as { records: number; topics: string[] | null };
  return { records, topics: topics ? new Set(topics) : null };
}

/** The buffers of one producer's ring. */
export interface RingBuffers {
  header: SharedArrayBuffer;
  data: SharedArrayBuffer;
}

export function createRing(readers: number, capacity: number): RingBuffers {
  if (capacity < 64 || (capacity & (capacity - 1)) !== 0) throw new RangeError(`ring capacity must be a power of two of at least 64 bytes, got ${capacity}`);
  return { header: new SharedArrayBuffer((RING_READ + 2 * readers) * 4), data: new SharedArrayBuffer(capacity) };
}

/** Bytes a record takes at most: header, topic and except id (UTF-8, 3 bytes per UTF-16 unit at most) and the frame. */
export function recordBound(topicUnits: number, exceptUnits: number, frameBytes: number): number {
  return align4(RECORD_HEADER + 3 * topicUnits + 3 * exceptUnits + frameBytes);
}

const align4 = (n: number): number => (n + 3) & ~3;

const encoder = new TextEncoder();

/** A frame waiting for room in the ring; `gap` marks a gap record (its frame is the gap's JSON). */
interface Queued {
  mask: number;
  topic: string;
  except: string;
  frame: string | Uint8Array;
  bytes: number;
  gap?: Missed;
}

/** What a dropped reader missed: records, and their topics (null: too many to list, every topic). */
export interface Missed {
  records: number;
  topics: Set<string> | null;
}

/** Topics a gap record lists at most; past it the gap is for every topic. */
const GAP_MAX_TOPICS = 1000;

export interface RingWriterOptions {
  /**
   * Called when readers are dropped (their queue passed `maxQueuedBytes`), with the readers and
   * the bytes that were queued: the writer goes on without them until they rejoin.
   */
  onReadersDropped?: (readers: number[], queuedBytes: number) => void;
  /** Queued bytes (counted at their upper bound, 3 per UTF-16 unit) past which the readers holding the ring are dropped. Default half the ring. */
  maxQueuedBytes?: number;
  /** Milliseconds a reader may hold the ring without moving while records queue before it is dropped, however few. Default 5,000. */
  maxHeldMs?: number;
}

/** The producer's side of a ring. */
export class RingWriter {
  private readonly header: Int32Array;
  private readonly control: Int32Array;
  private readonly bytes: Uint8Array;
  private readonly ints: Int32Array;
  private readonly capacity: number;
  private write: number;
  private readonly queue: Queued[] = [];
  private queuedBytes = 0;
  /** Readers addressed this turn, rung at its end. */
  private turnMask = 0;
  private flushScheduled = false;
  private waiting = false;
  private closed = false;
  private readonly maxQueuedBytes: number;
  /** Readers dropped and not yet rejoined (bit r), and what each missed. */
  private dropped = 0;
  /**
   * Queued bytes the readers still addressed were not yet given a turn to make room for: what
   * was queued when the last readers were dropped (lowered as the queue drains). The bound is on
   * the growth past it, so a drop is never followed by another before the others could read.
   */
  private queueFloor = 0;
  /** The reader holding the ring while records queue, at which read sequence, since when (epoch ms). */
  private held = { reader: -1, read: 0, since: 0 };
  private readonly maxHeldMs: number;
  private readonly missed = new Map<number, Missed>();

  constructor(
    ring: RingBuffers,
    control: SharedArrayBuffer,
    private readonly readers: number,
    private readonly opts: RingWriterOptions = {},
    /** The producer's own reader index (a front-end thread does not read its own ring); -1 for none. */
    private readonly self = -1,
  ) {
    this.header = new Int32Array(ring.header);
    this.control = new Int32Array(control);
    this.bytes = new Uint8Array(ring.data);
    this.ints = new Int32Array(ring.data);
    this.capacity = ring.data.byteLength;
    this.write = Atomics.load(this.header, RING_WRITE);
    this.maxQueuedBytes = opts.maxQueuedBytes ?? this.capacity / 2;
    this.maxHeldMs = opts.maxHeldMs ?? 5000;
  }

  /** Records queued for room, and their bytes (at most). */
  get queued(): { records: number; bytes: number } {
    return { records: this.queue.length, bytes: this.queuedBytes };
  }

  /**
   * Writes one record for the readers in `mask` (in order after any queued ones). A record larger
   * than half the ring is a bug of the caller (the ring is sized for the largest frame): RangeError.
   */
  put(mask: number, topic: string, except: string, frame: string | Uint8Array): void {
    if (mask === 0 || this.closed) return;
    if (this.dropped !== 0) {
      this.rejoinAsked();
      const lost = mask & this.dropped;
      if (lost !== 0) {
        for (let r = 0; r < this.readers; r++) if ((lost & (1 << r)) !== 0) this.noteMissed(r, topic, null);
        mask &= ~lost;
        if (mask === 0) return;
      }
    }
    this.enqueue(mask, topic, except, frame);
  }

  /** Readers dropped and not yet rejoined, as a bit mask. */
  get droppedReaders(): number {
    return this.dropped;
  }

  private enqueue(mask: number, topic: string, except: string, frame: string | Uint8Array, gap?: Missed): void {
    let bytes = recordBound(topic.length, except.length, typeof frame === 'string' ? 3 * frame.length : frame.length);
    if (bytes > this.capacity / 2 && typeof frame === 'string') bytes = recordBound(topic.length, except.length, Buffer.byteLength(frame));
    if (bytes > this.capacity / 2) throw new RangeError(`record of ${bytes} bytes does not fit a ring of ${this.capacity} bytes`);
    if (this.queue.length === 0 && this.tryWrite(mask, topic, except, frame, bytes, gap !== undefined)) return;
    this.queue.push(gap ? { mask, topic, except, frame, bytes, gap } : { mask, topic, except, frame, bytes });
    this.queuedBytes += bytes;
    // The bound holds at each record, not only when the writer next looks at the readers.
    if (this.queuedBytes - this.queueFloor > this.maxQueuedBytes && this.dropHolders()) this.drainQueue();
    this.waitForRoom();
  }

  /** Drops the readers holding the ring (dropSlowest) and tells the owner; false if none could be. */
  private dropHolders(): boolean {
    const queued = this.queuedBytes;
    const gone = this.dropSlowest();
    if (gone.length === 0) return false;
    this.queueFloor = this.queuedBytes;
    this.held = { reader: -1, read: 0, since: 0 };
    for (const r of gone) this.watchRejoin(r);
    this.opts.onReadersDropped?.(gone, queued);
    return true;
  }

  /** Adds a missed record (or a gap record's content) to what dropped reader r missed. */
  private noteMissed(r: number, topic: string, gap: Missed | null): void {
    let m = this.missed.get(r);
    if (!m) this.missed.set(r, (m = { records: 0, topics: new Set() }));
    if (gap) {
      m.records += gap.records;
      if (gap.topics === null) m.topics = null;
      else if (m.topics) for (const t of gap.topics) m.topics.add(t);
    } else {
      m.records++;
      m.topics?.add(topic);
    }
    if (m.topics && m.topics.size > GAP_MAX_TOPICS) m.topics = null;
  }

  /**
   * Drops the readers that hold the ring (at the slowest read sequence, between two drains):
   * what they had not read and what is queued for them goes to `missed`, their bells ring so that
   * they ask to rejoin as soon as they run. Returns the readers dropped.
   */
  private dropSlowest(): number[] {
    const { read, reader } = this.slowest();
    if (reader < 0) return [];
    const out: number[] = [];
    for (let r = 0; r < this.readers; r++) {
      if (r === this.self || (this.dropped & (1 << r)) !== 0 || Atomics.load(this.control, controlActive(this.readers, r)) === 0) continue;
      if (Atomics.load(this.header, RING_READ + r) !== read) continue;
      if (Atomics.compareExchange(this.header, readerState(this.readers, r), READER_IDLE, READER_DROPPED) !== READER_IDLE) continue;
      this.dropped |= 1 << r;
      out.push(r);
      // Read again: it may have drained once more before the exchange; it cannot move now.
      this.scanUnread(r, Atomics.load(this.header, RING_READ + r));
    }
    if (out.length === 0) return out;
    const gone = out.reduce((mask, r) => mask | (1 << r), 0);
    let kept = 0;
    for (const q of this.queue) {
      const lost = q.mask & gone;
      for (let r = 0; lost !== 0 && r < this.readers; r++) if ((lost & (1 << r)) !== 0) this.noteMissed(r, q.topic, q.gap ?? null);
      q.mask &= ~gone;
      if (q.mask !== 0) this.queue[kept++] = q;
      else this.queuedBytes -= q.bytes;
    }
    this.queue.length = kept;
    this.ringBells(gone);
    return out;
  }

  /** Notes the records addressed to reader r in the ring from `read` to the write sequence (r is dropped: it reads nothing now). */
  private scanUnread(r: number, read: number): void {
    const bit = 1 << r;
    while (read !== this.write) {
      const pos = read & (this.capacity - 1);
      const i = pos >> 2;
      const bytes = this.ints[i + R_BYTES]!;
      if (bytes >= RECORD_HEADER && (this.ints[i + R_MASK]! & bit) !== 0) {
        const topicBytes = this.ints[i + R_TOPIC]!;
        const topic = Buffer.from(this.bytes.buffer, pos + RECORD_HEADER, topicBytes).toString('utf8');
        if (this.ints[i + R_EXCEPT] === GAP) {
          this.noteMissed(r, '', parseGap(this.bytes.subarray(pos + RECORD_HEADER + topicBytes, pos + RECORD_HEADER + topicBytes + this.ints[i + R_FRAME]!)));
        } else {
          this.noteMissed(r, topic, null);
        }
      }
      read = (read + bytes) | 0;
    }
  }

  /** Readers that asked to rejoin are addressed again, a gap record first. */
  private rejoinAsked(): void {
    for (let r = 0; r < this.readers; r++) {
      const bit = 1 << r;
      if ((this.dropped & bit) === 0) continue;
      const state = Atomics.load(this.header, readerState(this.readers, r));
      if (state === READER_IDLE) {
        // A new reader took the slot (attachFanoutThread): it starts from the write sequence, owing nothing.
        this.dropped &= ~bit;
        this.missed.delete(r);
        continue;
      }
      if (state !== READER_REJOIN) continue;
      Atomics.store(this.header, RING_READ + r, this.write);
      this.dropped &= ~bit;
      const missed = this.missed.get(r) ?? { records: 0, topics: new Set<string>() };
      this.missed.delete(r);
      Atomics.store(this.header, readerState(this.readers, r), READER_IDLE);
      this.enqueue(bit, '', '', JSON.stringify({ records: missed.records, topics: missed.topics ? [...missed.topics] : null }), missed);
    }
  }

  /** Stops writing; queued records are dropped (the process is shutting down). */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
    this.queueFloor = 0;
  }

  /** The slowest active reader's read sequence (the write sequence when none is active). */
  private slowest(): { read: number; reader: number } {
    let read = this.write;
    let reader = -1;
    for (let r = 0; r < this.readers; r++) {
      if (r === this.self || (this.dropped & (1 << r)) !== 0 || Atomics.load(this.control, controlActive(this.readers, r)) === 0) continue;
      const at = Atomics.load(this.header, RING_READ + r);
      if (((this.write - at) | 0) > ((this.write - read) | 0)) {
        read = at;
        reader = r;
      }
    }
    return { read, reader };
  }

  private free(): number {
    return this.capacity - ((this.write - this.slowest().read) | 0);
  }

  private tryWrite(mask: number, topic: string, except: string, frame: string | Uint8Array, bound: number, gap = false): boolean {
    const free = this.free();
    let pos = this.write & (this.capacity - 1);
    const tail = this.capacity - pos;
    const pad = bound > tail ? tail : 0;
    if (pad + bound > free) return false;
    if (pad > 0) {
      this.ints[pos >> 2] = pad;
      if (pad >= 8) this.ints[(pos >> 2) + R_MASK] = 0;
      pos = 0;
    }
    let at = pos + RECORD_HEADER;
    const topicBytes = encoder.encodeInto(topic, this.bytes.subarray(at, pos + bound)).written;
    at += topicBytes;
    const exceptBytes = except === '' ? 0 : encoder.encodeInto(except, this.bytes.subarray(at, pos + bound)).written;
    at += exceptBytes;
    let frameBytes: number;
    if (typeof frame === 'string') {
      frameBytes = encoder.encodeInto(frame, this.bytes.subarray(at, pos + bound)).written;
    } else {
      this.bytes.set(frame, at);
      frameBytes = frame.length;
    }
    const bytes = align4(RECORD_HEADER + topicBytes + exceptBytes + frameBytes);
    const i = pos >> 2;
    this.ints[i + R_BYTES] = bytes;
    this.ints[i + R_MASK] = mask;
    this.ints[i + R_TOPIC] = topicBytes;
    this.ints[i + R_EXCEPT] = gap ? GAP : exceptBytes;
    this.ints[i + R_FRAME] = frameBytes;
    this.ints[i + R_SEQUENCE] = Atomics.add(this.control, controlSequence(this.readers), 1);
    this.write = (this.write + pad + bytes) | 0;
    Atomics.store(this.header, RING_WRITE, this.write);
    this.turnMask |= mask;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      queueMicrotask(this.endTurn);
    }
    return true;
  }

  /** Rings the doorbell of each reader addressed this turn, and of every reader behind once the ring is a quarter full (records not addressed to a reader still need it to move past them). */
  private readonly endTurn = (): void => {
    this.flushScheduled = false;
    let ring = this.turnMask;
    this.turnMask = 0;
    if (((this.write - this.slowest().read) | 0) > this.capacity / 4) ring |= this.behindReaders();
    this.ringBells(ring);
  };

  private behindReaders(): number {
    let mask = 0;
    for (let r = 0; r < this.readers; r++) {
      if (r !== this.self && (this.dropped & (1 << r)) === 0 && Atomics.load(this.control, controlActive(this.readers, r)) !== 0 && Atomics.load(this.header, RING_READ + r) !== this.write) mask |= 1 << r;
    }
    return mask;
  }

  private ringBells(mask: number): void {
    for (let r = 0; mask !== 0; r++, mask >>>= 1) {
      if ((mask & 1) === 0) continue;
      Atomics.add(this.control, CONTROL_BELL + r, 1);
      Atomics.notify(this.control, CONTROL_BELL + r);
    }
  }

  /** Writes what fits of the queue, in order. */
  private drainQueue(): void {
    while (this.queue.length > 0) {
      const q = this.queue[0]!;
      if (!this.tryWrite(q.mask, q.topic, q.except, q.frame, q.bytes, q.gap !== undefined)) return;
      this.queue.shift();
      this.queuedBytes -= q.bytes;
      if (this.queuedBytes < this.queueFloor) this.queueFloor = this.queuedBytes;
    }
  }

  /** Waits (asynchronously) for dropped reader r to ask to rejoin, then addresses it again. */
  private watchRejoin(r: number): void {
    const cell = readerState(this.readers, r);
    const step = (): void => {
      if (this.closed || (this.dropped & (1 << r)) === 0 || Atomics.load(this.control, controlActive(this.readers, r)) === 0) return;
      if (Atomics.load(this.header, cell) !== READER_DROPPED) {
        this.rejoinAsked();
        return;
      }
      const wait = waitAsync(this.header, cell, READER_DROPPED, 1000);
      if (wait.async) void wait.value.then(step);
      else setImmediate(step);
    };
    step();
  }

  /** Waits (asynchronously) on the slowest reader until the queue is written. */
  private waitForRoom(): void {
    if (this.waiting || this.closed) return;
    this.waiting = true;
    const step = (): void => {
      this.drainQueue();
      if (this.queue.length === 0 || this.closed) {
        this.waiting = false;
        this.held = { reader: -1, read: 0, since: 0 };
        Atomics.store(this.header, RING_WAITING, 0);
        return;
      }
      const held = this.slowest();
      if (held.reader !== this.held.reader || held.read !== this.held.read) this.held = { ...held, since: Date.now() };
      if ((this.queuedBytes - this.queueFloor > this.maxQueuedBytes || Date.now() - this.held.since >= this.maxHeldMs) && this.dropHolders()) {
        queueMicrotask(step);
        return;
      }
      Atomics.store(this.header, RING_WAITING, 1);
      const { read, reader } = this.slowest();
      // Everyone behind is asked to move on, including readers no record addressed.
      this.ringBells(this.behindReaders());
      if (reader < 0) {
        setImmediate(step);
        return;
      }
      const wait = waitAsync(this.header, RING_READ + reader, read, Math.min(this.maxHeldMs, 1000));
      if (wait.async) void wait.value.then(step);
      else setImmediate(step);
    };
    queueMicrotask(step);
  }
}

/** One record as a reader sees it; `frame` is a view into the ring, valid until drain returns. */
export type RecordHandler = (topic: string, frame: Uint8Array, except: string) => void;
/** This reader was dropped (ring.ts, top) and missed `missed`; told in order, before the records after the gap. */
export type GapHandler = (missed: Missed) => void;

/** A reader's side of one producer's ring. */
export class RingReader {
  private readonly header: Int32Array;
  private readonly data: SharedArrayBuffer;
  private readonly ints: Int32Array;
  private readonly capacity: number;
  private readonly bit: number;
  private readonly bytes: Uint8Array;
  private readonly stateCell: number;
  /** The last topic read, and its bytes: a run of frames on one topic decodes it once. */
  private lastTopic = '';
  private lastTopicBytes = new Uint8Array(0);
  /** The pass under way: whether one is, where this reader is, and the write sequence it reads up to. */
  private passing = false;
  private read = 0;
  private end = 0;

  constructor(
    ring: RingBuffers,
    private readonly reader: number,
  ) {
    this.header = new Int32Array(ring.header);
    this.data = ring.data;
    this.bytes = new Uint8Array(ring.data);
    this.ints = new Int32Array(ring.data);
    this.capacity = ring.data.byteLength;
    this.bit = 1 << reader;
    this.stateCell = readerState((this.header.length - RING_READ) / 2, reader);
  }

  /** Bytes written and not yet read by this reader. */
  lag(): number {
    return (Atomics.load(this.header, RING_WRITE) - Atomics.load(this.header, RING_READ + this.reader)) | 0;
  }

  /**
   * Hands each record addressed to this reader to `handle`, in order, and each gap to `gap`;
   * returns how many records. Dropped, it asks to rejoin instead and reads nothing.
   */
  drain(handle: RecordHandler, gap: GapHandler): number {
    if (!this.begin()) return 0;
    let handled = 0;
    while (this.head() !== null) if (this.take(handle, gap)) handled++;
    this.finish();
    return handled;
  }

  /**
   * Starts a pass over the records written so far; false when this reader takes no part (the
   * writer dropped it: it asks to rejoin instead, and the writer readdresses it with a gap record).
   */
  begin(): boolean {
    const was = Atomics.compareExchange(this.header, this.stateCell, READER_IDLE, READER_DRAINING);
    if (was === READER_DROPPED) {
      Atomics.store(this.header, this.stateCell, READER_REJOIN);
      Atomics.notify(this.header, this.stateCell);
      return false;
    }
    if (was !== READER_IDLE) return false;
    this.read = Atomics.load(this.header, RING_READ + this.reader);
    this.end = Atomics.load(this.header, RING_WRITE);
    this.passing = true;
    return true;
  }

  /** The sequence of this pass's next record addressed to this reader (padding and others' records skipped), or null when none is left. */
  head(): number | null {
    if (!this.passing) return null;
    while (this.read !== this.end) {
      const i = (this.read & (this.capacity - 1)) >> 2;
      const bytes = this.ints[i + R_BYTES]!;
      if (bytes >= RECORD_HEADER && (this.ints[i + R_MASK]! & this.bit) !== 0) return this.ints[i + R_SEQUENCE]!;
      this.read = (this.read + bytes) | 0;
    }
    return null;
  }

  /** Hands the record head() named to `handle` (a gap to `gap`) and moves past it; true for a record, false for a gap. */
  take(handle: RecordHandler, gap: GapHandler): boolean {
    const pos = this.read & (this.capacity - 1);
    const i = pos >> 2;
    const bytes = this.ints[i + R_BYTES]!;
    const topicBytes = this.ints[i + R_TOPIC]!;
    const exceptBytes = this.ints[i + R_EXCEPT]!;
    const frameBytes = this.ints[i + R_FRAME]!;
    this.read = (this.read + bytes) | 0;
    if (exceptBytes === GAP) {
      gap(parseGap(new Uint8Array(this.data, pos + RECORD_HEADER + topicBytes, frameBytes)));
      return false;
    }
    let at = pos + RECORD_HEADER;
    const topic = this.topicAt(at, topicBytes);
    at += topicBytes;
    const except = exceptBytes === 0 ? '' : Buffer.from(this.data, at, exceptBytes).toString('latin1');
    at += exceptBytes;
    handle(topic, new Uint8Array(this.data, at, frameBytes), except);
    return true;
  }

  /** Ends the pass: what was read is free for the writer. */
  finish(): void {
    if (!this.passing) return;
    this.passing = false;
    Atomics.store(this.header, RING_READ + this.reader, this.read);
    Atomics.store(this.header, this.stateCell, READER_IDLE);
    if (Atomics.load(this.header, RING_WAITING) !== 0) Atomics.notify(this.header, RING_READ + this.reader);
  }

  private topicAt(at: number, length: number): string {
    const last = this.lastTopicBytes;
    if (length === last.length) {
      let i = 0;
      while (i < length && this.bytes[at + i] === last[i]) i++;
      if (i === length) return this.lastTopic;
    }
    this.lastTopicBytes = this.bytes.slice(at, at + length);
    this.lastTopic = Buffer.from(this.lastTopicBytes.buffer, 0, length).toString('utf8');
    return this.lastTopic;
  }
}
