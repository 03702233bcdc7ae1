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
 */

/** Atomics.waitAsync (Node >= 16; not in this project's TypeScript lib). */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs?: number,
) => { async: false; value: 'not-equal' | 'timed-out' } | { async: true; value: Promise<'ok' | 'timed-out'> };
export const waitAsync: WaitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

/** Ring header (Int32): the write sequence, the writer-is-waiting flag, then reader r's read sequence at READ + r. */
export const RING_WRITE = 0;
export const RING_WAITING = 1;
export const RING_READ = 2;

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

/** The buffers of one producer's ring. */
export interface RingBuffers {
  header: SharedArrayBuffer;
  data: SharedArrayBuffer;
}

export function createRing(readers: number, capacity: number): RingBuffers {
  if (capacity < 64 || (capacity & (capacity - 1)) !== 0) throw new RangeError(`ring capacity must be a power of two of at least 64 bytes, got ${capacity}`);
  return { header: new SharedArrayBuffer((RING_READ + readers) * 4), data: new SharedArrayBuffer(capacity) };
}

/** Bytes a record takes at most: header, topic and except id (UTF-8, 3 bytes per UTF-16 unit at most) and the frame. */
export function recordBound(topicUnits: number, exceptUnits: number, frameBytes: number): number {
  return align4(RECORD_HEADER + 3 * topicUnits + 3 * exceptUnits + frameBytes);
}

const align4 = (n: number): number => (n + 3) & ~3;

const encoder = new TextEncoder();

/** A frame waiting for room in the ring. */
interface Queued {
  mask: number;
  topic: string;
  except: string;
  frame: string | Uint8Array;
  bytes: number;
}

export interface RingWriterOptions {
  /**
   * Called once when records have queued for `behindMs` or beyond `maxQueuedBytes`, with the
   * readers that hold the ring (the slowest); called again only after the queue drained. The
   * records stay queued: nothing is dropped.
   */
  onReaderBehind?: (readers: number[], queuedBytes: number) => void;
  /** Milliseconds queued before onReaderBehind. Default 5,000. */
  behindMs?: number;
  /** Queued bytes (counted at their upper bound, 3 per UTF-16 unit) before onReaderBehind, however recent. Default none: time only. */
  maxQueuedBytes?: number;
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
  private behindSince = 0;
  private behindTold = false;
  private closed = false;
  private readonly behindMs: number;
  private readonly maxQueuedBytes: number;

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
    this.behindMs = opts.behindMs ?? 5000;
    this.maxQueuedBytes = opts.maxQueuedBytes ?? Infinity;
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
    let bytes = recordBound(topic.length, except.length, typeof frame === 'string' ? 3 * frame.length : frame.length);
    if (bytes > this.capacity / 2 && typeof frame === 'string') bytes = recordBound(topic.length, except.length, Buffer.byteLength(frame));
    if (bytes > this.capacity / 2) throw new RangeError(`record of ${bytes} bytes does not fit a ring of ${this.capacity} bytes`);
    if (this.queue.length === 0 && this.tryWrite(mask, topic, except, frame, bytes)) return;
    this.queue.push({ mask, topic, except, frame, bytes });
    this.queuedBytes += bytes;
    if (this.queue.length === 1) {
      this.behindSince = Date.now();
      this.behindTold = false;
    }
    this.waitForRoom();
  }

  /** Stops writing; queued records are dropped (the process is shutting down). */
  close(): void {
    this.closed = true;
    this.queue.length = 0;
    this.queuedBytes = 0;
  }

  /** The slowest active reader's read sequence (the write sequence when none is active). */
  private slowest(): { read: number; reader: number } {
    let read = this.write;
    let reader = -1;
    for (let r = 0; r < this.readers; r++) {
      if (r === this.self || Atomics.load(this.control, controlActive(this.readers, r)) === 0) continue;
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

  private tryWrite(mask: number, topic: string, except: string, frame: string | Uint8Array, bound: number): boolean {
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
    this.ints[i + R_EXCEPT] = exceptBytes;
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
      if (r !== this.self && Atomics.load(this.control, controlActive(this.readers, r)) !== 0 && Atomics.load(this.header, RING_READ + r) !== this.write) mask |= 1 << r;
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
      if (!this.tryWrite(q.mask, q.topic, q.except, q.frame, q.bytes)) return;
      this.queue.shift();
      this.queuedBytes -= q.bytes;
    }
  }

  /** Waits (asynchronously) on the slowest reader until the queue is written. */
  private waitForRoom(): void {
    if (this.waiting || this.closed) return;
    this.waiting = true;
    const step = (): void => {
      this.drainQueue();
      if (this.queue.length === 0 || this.closed) {
        this.waiting = false;
        Atomics.store(this.header, RING_WAITING, 0);
        return;
      }
      this.tellIfBehind();
      Atomics.store(this.header, RING_WAITING, 1);
      const { read, reader } = this.slowest();
      // Everyone behind is asked to move on, including readers no record addressed.
      this.ringBells(this.behindReaders());
      if (reader < 0) {
        setImmediate(step);
        return;
      }
      const wait = waitAsync(this.header, RING_READ + reader, read, Math.min(this.behindMs, 1000));
      if (wait.async) void wait.value.then(step);
      else setImmediate(step);
    };
    queueMicrotask(step);
  }

  private tellIfBehind(): void {
    if (this.behindTold || !this.opts.onReaderBehind) return;
    if (this.queuedBytes <= this.maxQueuedBytes && Date.now() - this.behindSince < this.behindMs) return;
    this.behindTold = true;
    const { read } = this.slowest();
    const slow: number[] = [];
    for (let r = 0; r < this.readers; r++) {
      if (r !== this.self && Atomics.load(this.control, controlActive(this.readers, r)) !== 0 && Atomics.load(this.header, RING_READ + r) === read) slow.push(r);
    }
    this.opts.onReaderBehind(slow, this.queuedBytes);
  }
}

/** One record as a reader sees it; `frame` is a view into the ring, valid until drain returns. */
export type RecordHandler = (topic: string, frame: Uint8Array, except: string) => void;

/** A reader's side of one producer's ring. */
export class RingReader {
  private readonly header: Int32Array;
  private readonly data: SharedArrayBuffer;
  private readonly ints: Int32Array;
  private readonly capacity: number;
  private readonly bit: number;
  private readonly bytes: Uint8Array;
  /** The last topic read, and its bytes: a run of frames on one topic decodes it once. */
  private lastTopic = '';
  private lastTopicBytes = new Uint8Array(0);
  /** The pass under way: where this reader is, and the write sequence it reads up to. */
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
  }

  /** Bytes written and not yet read by this reader. */
  lag(): number {
    return (Atomics.load(this.header, RING_WRITE) - Atomics.load(this.header, RING_READ + this.reader)) | 0;
  }

  /** Hands each record addressed to this reader to `handle`, in order; returns how many. */
  drain(handle: RecordHandler): number {
    this.begin();
    let handled = 0;
    while (this.head() !== null) {
      this.take(handle);
      handled++;
    }
    this.finish();
    return handled;
  }

  /** Starts a pass over the records written so far. */
  begin(): void {
    this.read = Atomics.load(this.header, RING_READ + this.reader);
    this.end = Atomics.load(this.header, RING_WRITE);
  }

  /** The sequence of the next record of this pass addressed to this reader, or null when there is none (padding and records for others skipped). */
  head(): number | null {
    while (this.read !== this.end) {
      const i = (this.read & (this.capacity - 1)) >> 2;
      const bytes = this.ints[i + R_BYTES]!;
      if (bytes >= RECORD_HEADER && (this.ints[i + R_MASK]! & this.bit) !== 0) return this.ints[i + R_SEQUENCE]!;
      this.read = (this.read + bytes) | 0;
    }
    return null;
  }

  /** Hands the record head() named to `handle` and moves past it. */
  take(handle: RecordHandler): void {
    const pos = this.read & (this.capacity - 1);
    const i = pos >> 2;
    const bytes = this.ints[i + R_BYTES]!;
    const topicBytes = this.ints[i + R_TOPIC]!;
    const exceptBytes = this.ints[i + R_EXCEPT]!;
    const frameBytes = this.ints[i + R_FRAME]!;
    let at = pos + RECORD_HEADER;
    const topic = this.topicAt(at, topicBytes);
    at += topicBytes;
    const except = exceptBytes === 0 ? '' : Buffer.from(this.data, at, exceptBytes).toString('latin1');
    at += exceptBytes;
    this.read = (this.read + bytes) | 0;
    handle(topic, new Uint8Array(this.data, at, frameBytes), except);
  }

  /** Ends the pass: what was read is free for the writer. */
  finish(): void {
    Atomics.store(this.header, RING_READ + this.reader, this.read);
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
