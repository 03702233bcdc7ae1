/**
 * The main↔shard message encoding (src/shards/messages.ts, encoded by pool.ts and worker.ts
 * with msgpackr, same options): one round trip of a typical request and its answer.
 */
import { Packr } from 'msgpackr';
import type { ShardEnvelope, ShardRequestOf, ShardResponseOf } from '../../src/shards/messages.js';
import type { HeraldShardApi } from '../../src/shard-api.js';
import type { MicroSuite } from '../micro-suite.js';

const packr = new Packr({ useRecords: false, moreTypes: false });

const request: ShardRequestOf<HeraldShardApi, 'channels.subscribe'> = {
  type: 'channels.subscribe',
  appId: 'app-id',
  channel: 'presence-lobby',
  socketId: '1234567.8901234',
  member: { userId: 'user-42', userInfo: { name: 'Ada Lovelace', avatar: 'https://example.com/a/42.png' } },
};
const subscribe: ShardEnvelope = { id: 123_456, deadline: 1_700_000_000_000, request };

// The members as the shard answers them: one JSON string (ChannelStore.presenceJson).
const ids = Array.from({ length: 20 }, (_, i) => `user-${i}`);
const presence = JSON.stringify({ ids, hash: Object.fromEntries(ids.map((id, i) => [id, { name: `User ${i}` }])), count: ids.length });
const answer: { ok: true; value: ShardResponseOf<HeraldShardApi, 'channels.subscribe'> } = {
  ok: true,
  value: { subscriptionCount: 20, occupied: false, memberAdded: true, presence },
};

export const suite: MicroSuite = {
  source: 'src/shards/messages.ts (msgpackr as in pool.ts / worker.ts)',
  setup(bench) {
    let sink = 0;
    bench.add('pack+unpack channels.subscribe request (presence member)', () => {
      sink ^= (packr.unpack(packr.pack(subscribe)) as ShardEnvelope).id;
    });
    bench.add('pack+unpack subscribe answer (20 presence members)', () => {
      sink ^= (packr.unpack(packr.pack(answer)) as typeof answer).value.subscriptionCount;
    });
    return { teardown: () => void sink };
  },
};
