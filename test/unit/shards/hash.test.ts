import { describe, expect, it } from 'vitest';
import { channelShardFor, fnv1a32, shardForKey } from '../../../src/shards/hash.js';

describe('shard hashing', () => {
  it('is stable: the same key always lands on the same shard', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    for (const key of ['presence-room', 'private-x', 'device-123']) {
      expect(shardForKey(key, 4)).toBe(shardForKey(key, 4));
    }
  });

  it('spreads keys evenly over shards', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 40_000; i++) counts[channelShardFor('app', `channel-${i}`, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(9000);
  });

  it('keeps apps apart: the key includes the app id', () => {
    const shards = new Set<number>();
    for (let i = 0; i < 50; i++) shards.add(channelShardFor(`app-${i}`, 'same-channel', 8));
    expect(shards.size).toBeGreaterThan(1);
  });
});
