/**
 * The admin API's tenants as the reshard sees them (src/shards/shard-layout.ts): they live on
 * shard 0 (shard-handlers.ts), which every layout has.
 */
import { recordByRecord } from '../shards/shard-layout.js';
import { TENANTS_DATABASE } from './shard-handlers.js';

export const tenantLayout = recordByRecord([{ name: TENANTS_DATABASE, encoding: 'default', shardOf: () => 0 }]);
