/**
 * Stable key → shard mapping. FNV-1a (32 bit) over the UTF-16 code units: cheap, stable
 * across processes and versions, and evenly spread for channel names and random ids.
 * Changing the shard count moves keys, so the data dir records the count (see data-dir.ts).
 */
export function fnv1a32(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Shard owning a key, in [0, shardCount). */
export function shardForKey(key: string, shardCount: number): number {
  return shardCount === 1 ? 0 : fnv1a32(key) % shardCount;
}

/** Shard owning a channel of an app. */
export function channelShardFor(appId: string, channel: string, shardCount: number): number {
  return shardForKey(`${appId}\u0000${channel}`, shardCount);
}

/** Shard owning a push device (its record, interests and user association). */
export function deviceShardFor(deviceId: string, shardCount: number): number {
  return shardForKey(deviceId, shardCount);
}
