/**
 * The occupancy journal as the reshard sees it (src/shards/shard-layout.ts): each record goes
 * to its channel's shard (the value repeats the key's parts: app id and channel first).
 */
import { channelShardFor } from '../../shards/hash.js';
import { recordByRecord } from '../../shards/shard-layout.js';
import { OCCUPANCY_DATABASE } from './occupancy-journal.js';

export const occupancyLayout = recordByRecord([
  {
    name: OCCUPANCY_DATABASE,
    encoding: 'default',
    shardOf: ({ key, value }, shards) => {
      const parts = Array.isArray(value) ? (value as unknown[]) : (JSON.parse(String(key)) as unknown[]);
      return channelShardFor(String(parts[0]), String(parts[1]), shards);
    },
  },
]);
