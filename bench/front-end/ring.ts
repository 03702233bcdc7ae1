/**
 * A single-writer, many-reader ring of frames in SharedArrayBuffers, the shared-memory
 * candidate for handing a channel frame to the front-end threads once per thread: the writer
 * copies a frame in once, each reader reads it in place. Header (Int32): the write sequence, a
 * stop flag, then each reader's read sequence. Slots: a 4-byte length, then the frame.
 */

import type { FanoutInit } from '../../src/front-end/fanout.js';

/** Atomics.waitAsync (Node >= 16; not in this project's TypeScript lib). */
type WaitAsync = (array: Int32Array, index: number, value: number) => { async: false; value: string } | { async: true; value: Promise<string> };
export const waitAsync: WaitAsync = (Atomics as unknown as { waitAsync: WaitAsync }).waitAsync;

export const RING_WRITE = 0;
export const RING_STOP = 1;
/** First reader's read sequence; reader i's is RING_READ + i. */
export const RING_READ = 2;

/** workerData of a handoff sink thread. */
export interface HandoffSinkData {
  role: 'sink';
  index: number;
  header: SharedArrayBuffer;
  slots: SharedArrayBuffer;
  slotCount: number;
  /** Bytes per slot, a multiple of 4. */
  slotBytes: number;
  /** The production fanout's buffers (src/front-end/fanout.ts): the sink also reads as thread `index` of it. */
  fanout: FanoutInit;
}

/** The topic the fanout variant publishes on. */
export const BENCH_TOPIC = 'app:bench';

/** Main → sink (frames themselves come as Uint8Array or ArrayBuffer, or through the ring). */
export type SinkCommand = { type: 'expect'; total: number } | { type: 'exit' };

/** Sink → main. */
export interface SinkReply {
  type: 'done';
  received: number;
  cpuUs: number;
  touched: number;
}

/** The writer's side of the ring. */
export class RingWriter {
  readonly header: Int32Array;
  private readonly lengths: Int32Array;
  private readonly bytes: Uint8Array;
  private write = 0;

  constructor(
    readonly headerBuffer: SharedArrayBuffer,
    readonly slotBuffer: SharedArrayBuffer,
    readonly slotCount: number,
    readonly slotBytes: number,
    private readonly readers: number,
  ) {
    this.header = new Int32Array(headerBuffer);
    this.lengths = new Int32Array(slotBuffer);
    this.bytes = new Uint8Array(slotBuffer);
  }

  static create(readers: number, slotCount: number, maxFrameBytes: number): RingWriter {
    const slotBytes = Math.ceil((maxFrameBytes + 4) / 4) * 4;
    return new RingWriter(
      new SharedArrayBuffer((RING_READ + readers) * 4),
      new SharedArrayBuffer(slotCount * slotBytes),
      slotCount,
      slotBytes,
      readers,
    );
  }

  /** Free slots: the distance from the write sequence to the slowest reader. */
  private free(): number {
    let slowest = this.write;
    for (let i = 0; i < this.readers; i++) slowest = Math.min(slowest, Atomics.load(this.header, RING_READ + i));
    return this.slotCount - (this.write - slowest);
  }

  /** Waits until the slowest reader frees a slot. */
  async room(): Promise<void> {
    while (this.free() === 0) {
      for (let i = 0; i < this.readers; i++) {
        const read = Atomics.load(this.header, RING_READ + i);
        if (this.write - read === this.slotCount) {
          const wait = waitAsync(this.header, RING_READ + i, read);
          if (wait.async) await wait.value;
        }
      }
    }
  }

  /**
   * Copies a frame into the next slot and publishes it (`notify`: wakes the readers now); false,
   * and nothing written, when the ring is full (await room(), then put it again).
   */
  put(frame: Uint8Array, notify: boolean): boolean {
    if (this.free() === 0) return false;
    const slot = this.write % this.slotCount;
    this.lengths[(slot * this.slotBytes) / 4] = frame.length;
    this.bytes.set(frame, slot * this.slotBytes + 4);
    this.write++;
    Atomics.store(this.header, RING_WRITE, this.write);
    if (notify) Atomics.notify(this.header, RING_WRITE);
    return true;
  }

  /** Wakes the readers (after frames put without `notify`). */
  notify(): void {
    Atomics.notify(this.header, RING_WRITE);
  }

  /** Tells the readers to stop. */
  stop(): void {
    Atomics.store(this.header, RING_STOP, 1);
    Atomics.notify(this.header, RING_WRITE);
  }
}
