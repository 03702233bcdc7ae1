/**
 * Delivery of channel frames across front-end threads. Each producer (front-end thread t, and
 * main as producer `threads`) publishes to its own subscribers and writes ONE record to its
 * ring (ring.ts) addressed to the other threads whose interest cell for the topic is set
 * (interest.ts). Each front-end thread reads every other producer's ring and publishes each
 * record addressed to it on its own uWS topic from a view of the ring: one delivery per thread,
 * no copy per subscriber, no JSON re-encoding. Frames from one producer reach each thread in
 * the order published.
 *
 * A thread that falls behind holds a producer back by a bounded queue (ring.ts); past it the
 * producer drops it and goes on with the others, and the thread is told what it missed
 * (`onMissed`) before it reads that producer's frames again.
 */
import type { RecognizedString } from 'uWebSockets.js';
import type { ExceptPublisher, PublishingSocket, TopicFanout } from '../http/topic-fanout.js';
import { describeError, log } from '../log.js';
import { InterestTable, TopicInterest, interestBytes } from './interest.js';
import { CONTROL_BELL, RingReader, RingWriter, controlActive, controlInts, controlStop, createRing, READER_IDLE, readerState, RING_READ, RING_WRITE, waitAsync, type Missed, type RingBuffers } from './ring.js';
import { threadOf } from '../channels/socket-id.js';

/** Default ring size per producer: 4 MiB. */
export const DEFAULT_RING_BYTES = 4 * 1024 * 1024;
/** How a signal's record is told from a frame's: its topic starts with it (no channel topic does). */
const SIGNAL_PREFIX = '\u0000';

/** Front-end threads the destination mask (one Int32) can address. */
export const MAX_FANOUT_THREADS = 32;

/** What every thread is started with (structured-clonable: SharedArrayBuffers and numbers). */
export interface FanoutInit {
  /** Front-end threads (readers 0..threads − 1); producer `threads` is the main thread. */
  readonly threads: number;
  readonly ringBytes: number;
  /** Interest table (interest.ts). */
  readonly interest: SharedArrayBuffer;
  /** Doorbells, active and stop flags of the readers (ring.ts). */
  readonly control: SharedArrayBuffer;
  /** One ring per producer: index t for front-end thread t, `threads` for main. */
  readonly rings: readonly RingBuffers[];
}

/**
 * Makes the shared buffers once, on the main thread. The ring is at least 4× the largest
 * record (`maxFrameBytes` of frame plus a topic and socket id), rounded up to a power of two.
 */
export function createFanoutBuffers(opts: { threads: number; ringBytes?: number; maxFrameBytes: number }): FanoutInit {
  const { threads } = opts;
  if (!Number.isInteger(threads) || threads < 1 || threads > MAX_FANOUT_THREADS) throw new RangeError(`threads must be 1..${MAX_FANOUT_THREADS}, got ${threads}`);
  const wanted = Math.max(opts.ringBytes ?? DEFAULT_RING_BYTES, 4 * (opts.maxFrameBytes + 4096));
  const ringBytes = 2 ** Math.ceil(Math.log2(wanted));
  const control = new SharedArrayBuffer(controlInts(threads) * 4);
  const flags = new Int32Array(control);
  for (let r = 0; r < threads; r++) flags[controlActive(threads, r)] = 1;
  const rings: RingBuffers[] = [];
  for (let p = 0; p <= threads; p++) rings.push(createRing(threads, ringBytes));
  return { threads, ringBytes, interest: new SharedArrayBuffer(interestBytes(threads)), control, rings };
}

/**
 * A front-end thread is gone (main, after it died): nothing is addressed to it any more and
 * producers stop waiting for it.
 */
export function detachFanoutThread(init: FanoutInit, thread: number): void {
  const control = new Int32Array(init.control);
  Atomics.store(control, controlActive(init.threads, thread), 0);
  new InterestTable(init.interest, init.threads).clearThread(thread);
  for (const ring of init.rings) Atomics.notify(new Int32Array(ring.header), RING_READ + thread);
}

/** A replacement thread takes slot `thread`: it reads from now on. Call before starting it. */
export function attachFanoutThread(init: FanoutInit, thread: number): void {
  for (const ring of init.rings) {
    const header = new Int32Array(ring.header);
    Atomics.store(header, RING_READ + thread, Atomics.load(header, RING_WRITE));
    Atomics.store(header, readerState(init.threads, thread), READER_IDLE);
  }
  const control = new Int32Array(init.control);
  Atomics.store(control, controlStop(init.threads, thread), 0);
  Atomics.store(control, controlActive(init.threads, thread), 1);
}

export interface ThreadedTopicFanoutOptions {
  /**
   * The socket `socketId` of this thread, if it is subscribed to `topic`: a remote publish
   * excluding it is published from it (`publishFrom`).
   */
  lookupSocket?: (socketId: string, topic: string) => PublishingSocket | undefined;
  /**
   * Frames this thread delivered from another producer's record (its local subscribers of the
   * topic, the excluded socket not counted): the caller counts them for the topic's app.
   */
  onDelivered?: (topic: string, frames: number) => void;
  /**
   * Every frame this thread takes from another producer's record (`producer`: `threads` for
   * main), whether or not it has subscribers of the topic, with the socket it excludes ('' for
   * none) (read it before returning: it is a view of the ring).
   */
  onRemoteFrame?: (topic: string, frame: Uint8Array, producer: number, except: string) => void;
  /** A signal main sent this thread (`signal`), after every frame main wrote before it. */
  onSignal?: (name: string, message: string) => void;
  /**
   * Producer side: threads whose frames queued here past `maxQueuedBytes` were dropped: this
   * thread goes on without them until they rejoin (each is told with onMissed).
   */
  onReadersDropped?: (threads: number[], queuedBytes: number) => void;
  /** Bytes of frames a producer queues for a thread that holds its ring before dropping it (RingWriterOptions; default half the ring). */
  maxQueuedBytes?: number;
  /** Milliseconds a thread may hold this thread's ring without moving while frames queue before it is dropped (RingWriterOptions; default 5,000). */
  maxHeldMs?: number;
  /**
   * Reader side: producer `producer` dropped this thread, which missed `missed` of its frames;
   * told before any later frame of that producer is delivered. Without it, a warning is logged.
   */
  onMissed?: (producer: number, missed: Missed) => void;
}

/**
 * TopicFanout over every front-end thread. `thread` is this thread's index; main passes
 * `init.threads` (a producer only, `local` then has nobody) and reads nothing.
 */
export class ThreadedTopicFanout implements TopicFanout, ExceptPublisher {
  /** This thread's subscriptions, for the interest table: give it to the subscription hooks. */
  readonly interest: TopicInterest | null;
  private readonly table: InterestTable;
  private readonly writer: RingWriter;
  private readonly readers: { reader: RingReader; gap: (missed: Missed) => void; deliver: (topic: string, frame: Uint8Array, except: string) => void }[] = [];
  private readonly control: Int32Array;
  private closed = false;
  /** Resolves when the reading loop ended (after close()). */
  readonly stopped: Promise<void>;

  constructor(
    private readonly init: FanoutInit,
    private readonly thread: number,
    private readonly local: TopicFanout,
    private readonly opts: ThreadedTopicFanoutOptions = {},
  ) {
    this.table = new InterestTable(init.interest, init.threads);
    this.control = new Int32Array(init.control);
    const writerOpts = {
      ...(opts.onReadersDropped ? { onReadersDropped: opts.onReadersDropped } : {}),
      ...(opts.maxQueuedBytes !== undefined ? { maxQueuedBytes: opts.maxQueuedBytes } : {}),
      ...(opts.maxHeldMs !== undefined ? { maxHeldMs: opts.maxHeldMs } : {}),
    };
    this.writer = new RingWriter(init.rings[thread]!, init.control, init.threads, writerOpts, thread);
    const reads = thread < init.threads;
    this.interest = reads ? new TopicInterest(this.table, thread) : null;
    if (reads) {
      for (let p = 0; p <= init.threads; p++) {
        if (p !== thread) this.readers.push({ reader: new RingReader(init.rings[p]!, thread), gap: (missed) => this.missed(p, missed), deliver: (topic, frame, except) => this.deliver(p, topic, frame, except) });
      }
    }
    this.stopped = reads ? this.readLoop() : Promise.resolve();
  }

  publish(topic: RecognizedString, message: RecognizedString): void {
    this.local.publish(topic, message);
    this.remote(topic, message, '');
  }

  /** Local subscribers only: each thread counts the frames it delivers (onDelivered). */
  numSubscribers(topic: RecognizedString): number {
    return this.local.numSubscribers(topic);
  }

  publishFrom(ws: PublishingSocket, topic: RecognizedString, message: RecognizedString): void {
    this.local.publishFrom(ws, topic, message);
    this.remote(topic, message, '');
  }

  /**
   * Every subscriber of the topic but the socket `exceptSocketId`, on whichever thread holds it
   * (`threadOf`): that thread publishes from the socket, the others publish to all.
   */
  publishExcept(topic: RecognizedString, message: RecognizedString, exceptSocketId: string): void {
    if (threadOf(exceptSocketId) === this.thread) {
      const ws = this.opts.lookupSocket?.(exceptSocketId, text(topic));
      if (ws) this.local.publishFrom(ws, topic, message);
      else this.local.publish(topic, message);
      this.remote(topic, message, '');
      return;
    }
    this.local.publish(topic, message);
    this.remote(topic, message, exceptSocketId);
  }

  /**
   * Main: a signal to front-end thread `thread` (`onSignal` there), read after every frame main
   * published before it (a recovering join's mark follows the frames received before it).
   */
  signal(thread: number, name: string, message: string): void {
    this.writer.put(1 << thread, SIGNAL_PREFIX + name, '', message);
  }

  /** Stops reading and writing; `stopped` resolves once the reading loop is out. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.writer.close();
    if (this.thread < this.init.threads) {
      Atomics.store(this.control, controlStop(this.init.threads, this.thread), 1);
      Atomics.add(this.control, CONTROL_BELL + this.thread, 1);
      Atomics.notify(this.control, CONTROL_BELL + this.thread);
    }
  }

  private remote(topic: RecognizedString, message: RecognizedString, except: string): void {
    const name = text(topic);
    const mask = this.table.maskFor(name, this.thread);
    if (mask === 0) return;
    this.writer.put(mask, name, except, typeof message === 'string' ? message : bytesOf(message));
  }

  private deliver(producer: number, topic: string, frame: Uint8Array, except: string): void {
    try {
      if (topic.startsWith(SIGNAL_PREFIX)) {
        this.opts.onSignal?.(topic.slice(SIGNAL_PREFIX.length), Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8'));
        return;
      }
      this.deliverLocally(producer, topic, frame, except);
    } catch (err) {
      log.error('fanout delivery failed', { topic, error: describeError(err) });
    }
  }

  private deliverLocally(producer: number, topic: string, frame: Uint8Array, except: string): void {
    this.opts.onRemoteFrame?.(topic, frame, producer, except);
    let excepted = false;
    if (except !== '' && threadOf(except) === this.thread) {
      const ws = this.opts.lookupSocket?.(except, topic);
      if (ws) {
        this.local.publishFrom(ws, topic, frame);
        excepted = true;
      }
    }
    if (!excepted) this.local.publish(topic, frame);
    if (this.opts.onDelivered) {
      const frames = this.local.numSubscribers(topic) - (excepted ? 1 : 0);
      if (frames > 0) this.opts.onDelivered(topic, frames);
    }
  }

  private missed(producer: number, missed: Missed): void {
    try {
      if (this.opts.onMissed) this.opts.onMissed(producer, missed);
      else log.warn('frames missed: this thread fell behind and was dropped by a producer', { thread: this.thread, producer, records: missed.records, topics: missed.topics?.size ?? 'all' });
    } catch (err) {
      log.error('handling missed frames failed', { producer, error: describeError(err) });
    }
  }

  /** Hands on the records of every other producer's ring written so far, in the order they were written (their sequences). */
  private drainInOrder(): void {
    const readers = this.readers;
    for (const { reader } of readers) reader.begin();
    for (;;) {
      let next: (typeof readers)[number] | undefined;
      let nextSequence = 0;
      for (const r of readers) {
        const sequence = r.reader.head();
        if (sequence !== null && (next === undefined || ((sequence - nextSequence) | 0) < 0)) {
          next = r;
          nextSequence = sequence;
        }
      }
      if (next === undefined) break;
      next.reader.take(next.deliver, next.gap);
    }
    for (const { reader } of readers) reader.finish();
  }

  /** Drains every other producer's ring whenever this thread's doorbell rings; never blocks. */
  private async readLoop(): Promise<void> {
    const bell = CONTROL_BELL + this.thread;
    const stop = controlStop(this.init.threads, this.thread);
    for (;;) {
      const rung = Atomics.load(this.control, bell);
      if (Atomics.load(this.control, stop) !== 0) return;
      this.drainInOrder();
      const wait = waitAsync(this.control, bell, rung);
      if (wait.async) await wait.value;
    }
  }
}

function text(s: RecognizedString): string {
  return typeof s === 'string' ? s : Buffer.from(bytesOf(s)).toString('utf8');
}

function bytesOf(s: Exclude<RecognizedString, string>): Uint8Array {
  if (s instanceof Uint8Array) return s;
  if (ArrayBuffer.isView(s)) return new Uint8Array(s.buffer, s.byteOffset, s.byteLength);
  return new Uint8Array(s);
}
