/** Shard side of push publish. */
import type { ShardArea } from '../../shards/context.js';
import type { PushAreaDeps } from '../shard-handlers.js';
import type { PublishShardApi } from './shard-api.js';

export function createPublishArea(_deps: PushAreaDeps): ShardArea<PublishShardApi> {
  return { handlers: {} };
}
