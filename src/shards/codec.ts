/**
 * The msgpackr codec of main ↔ shard messages, one definition for both sides (pool.ts on the
 * main thread, worker.ts in the shards): plain maps and arrays, no records and no extension
 * types, so what one side packs the other reads without shared structure state.
 *
 * Why not `packr.pack()` as it is: msgpackr packs into one buffer it reuses and grows to the
 * largest message packed so far, and answers a view (subarray) of it. Posting a view to another
 * thread clones its whole backing buffer, so after one 5 MB message every later 30-byte message
 * crossed threads carrying tens of megabytes. `encode` answers a copy that owns a buffer of its
 * own size, and drops the grown buffer after a large message, so the memory of a message is
 * proportional to its own size whatever was packed before.
 *
 * Strings read by `decode` may be slices of a longer string msgpackr's native reader extracted
 * several of them into; a receiver that keeps decoded values long (tenants) copies them
 * (`structuredClone`), so each keeps only its own characters.
 */
import { Packr } from 'msgpackr';

/**
 * Messages larger than this (bytes) release afterwards the pack buffer msgpackr grew for them
 * (it keeps it for every later pack otherwise).
 */
const LARGE_MESSAGE_BYTES = 256 * 1024;

/** The size of the pack buffer msgpackr starts a thread with, bytes. */
const INITIAL_BUFFER_BYTES = 8192;

function newPackr(): Packr {
  return new Packr({ useRecords: false, moreTypes: false });
}

/** A codec for shard requests and replies (one per thread; not shared between threads). */
export class ShardCodec {
  private readonly packr = newPackr();

  /** The message as bytes in a buffer of exactly their length (safe to post to another thread). */
  encode(value: unknown): Uint8Array<ArrayBuffer> {
    const view = this.packr.pack(value);
    // A plain Uint8Array copy (Buffer#slice would be another view of the same buffer).
    const own = new Uint8Array(view.byteLength);
    own.set(view);
    // msgpackr's pack buffer is one per thread (module state shared by every Packr, so a new
    // Packr would keep it): hand it a small one, and the grown one is garbage.
    if (view.byteLength > LARGE_MESSAGE_BYTES) this.packr.useBuffer(Buffer.allocUnsafeSlow(INITIAL_BUFFER_BYTES));
    return own;
  }

  decode(bytes: Uint8Array): unknown {
    return this.packr.unpack(bytes);
  }
}
