/** Shard side of push devices. */
import type { ShardArea } from '../../shards/context.js';
import type { PushAreaDeps } from '../shard-handlers.js';
import type { DeviceShardApi } from './shard-api.js';

export function createDeviceArea(_deps: PushAreaDeps): ShardArea<DeviceShardApi> {
  return { handlers: {} };
}
