/** Shard side of push reporting. */
import type { ShardArea } from '../../shards/context.js';
import type { PushAreaDeps } from '../shard-handlers.js';
import type { ReportShardApi } from './shard-api.js';

export function createReportArea(_deps: PushAreaDeps): ShardArea<ReportShardApi> {
  return { handlers: {} };
}
