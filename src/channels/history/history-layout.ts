/**
 * Channel history as the reshard sees it (src/shards/shard-layout.ts): each kept event goes to
 * its channel's shard (the key is `[appId, channel, serial]`).
 */
import { channelShardFor } from '../../shards/hash.js';
import { recordByRecord } from '../../shards/shard-layout.js';
import { HISTORY_DATABASE } from './history-store.js';

export const historyLayout = recordByRecord([
  {
    name: HISTORY_DATABASE,
    encoding: 'default',
    shardOf: ({ key }, shards) => {
      const parts = key as unknown[];
      return channelShardFor(String(parts[0]), String(parts[1]), shards);
    },
  },
]);
