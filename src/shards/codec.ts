/**
 * The msgpackr codec of main ↔ shard messages, one definition for both sides (pool.ts on the
 * main thread, worker.ts in the shards): plain maps and arrays, no records and no extension
 * types, so what one side packs the other reads without shared structure state.
 */
import { Packr } from 'msgpackr';

/** A codec for shard requests and replies (one per thread; Packr instances are not shared). */
export function createShardPackr(): Packr {
  return new Packr({ useRecords: false, moreTypes: false });
}
