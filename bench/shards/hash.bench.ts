/** Shard routing (src/shards/hash.ts): the per-request cost of finding a key's shard. */
import { channelShardFor, deviceShardFor } from '../../src/shards/hash.js';
import type { MicroSuite } from '../micro-suite.js';

const channels = Array.from({ length: 1024 }, (_, i) => `private-chat-room-${i}`);
const devices = Array.from({ length: 1024 }, (_, i) => `web-${i.toString(16).padStart(8, '0')}-5a57-4d3c-9d0c-2f1e6c1b7a10`);

export const suite: MicroSuite = {
  source: 'src/shards/hash.ts',
  setup(bench) {
    let i = 0;
    let sink = 0;
    bench.add('channelShardFor (app, 22-char channel, 4 shards)', () => {
      sink ^= channelShardFor('app-id', channels[i++ & 1023]!, 4);
    });
    bench.add('deviceShardFor (45-char device id, 4 shards)', () => {
      sink ^= deviceShardFor(devices[i++ & 1023]!, 4);
    });
    return { teardown: () => void sink };
  },
};
