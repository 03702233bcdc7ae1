/**
 * The webhook outbox's databases as the reshard sees them (src/shards/shard-layout.ts): entries
 * and dead letters go to the shard of their channel (a channel event, so that its reload
 * debounce hold stays with the channel) or of their id, renumbered per new shard in the order
 * they happened (dead letters first, by when they died, then the outbox by creation).
 */
import { channelShardFor, shardForKey } from '../shards/hash.js';
import type { ShardLayout } from '../shards/shard-layout.js';
import { DEAD_LETTER_DATABASE, OUTBOX_DATABASE, type DeadLetter, type OutboxEntry } from './outbox-store.js';

export const outboxLayout: ShardLayout = {
  databases: [
    { name: OUTBOX_DATABASE, encoding: 'default', oneForOne: true },
    { name: DEAD_LETTER_DATABASE, encoding: 'default', oneForOne: true },
  ],
  copy(old, out) {
    const to = out.count;
    const shardOf = (entry: OutboxEntry): number => {
      const channel = entry.event?.channel;
      if (entry.target.kind === 'channel' && typeof channel === 'string') return channelShardFor(entry.target.appId, channel, to);
      return shardForKey(entry.id, to);
    };
    const dead: { shard: number; letter: DeadLetter }[] = [];
    const outbox: { shard: number; entry: OutboxEntry }[] = [];
    for (let i = 0; i < old.count; i++) {
      for (const { value } of old.records(i, DEAD_LETTER_DATABASE)) {
        const letter = value as DeadLetter;
        dead.push({ shard: shardOf(letter.entry), letter });
      }
      for (const { value } of old.records(i, OUTBOX_DATABASE)) {
        const entry = value as OutboxEntry;
        outbox.push({ shard: shardOf(entry), entry });
      }
    }
    const seq = new Array<number>(to).fill(0);
    dead.sort((a, b) => a.letter.deadAt - b.letter.deadAt || a.letter.entry.createdAt - b.letter.entry.createdAt);
    for (const { shard, letter } of dead) {
      const next = ++seq[shard]!;
      out.put(shard, DEAD_LETTER_DATABASE, next, { ...letter, entry: { ...letter.entry, seq: next } });
    }
    outbox.sort((a, b) => a.entry.createdAt - b.entry.createdAt);
    for (const { shard, entry } of outbox) {
      const next = ++seq[shard]!;
      out.put(shard, OUTBOX_DATABASE, next, { ...entry, seq: next });
    }
  },
};
