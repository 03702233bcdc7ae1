/**
 * The one place that lists every area's on-disk layout for `herald reshard` (src/reshard.ts),
 * as shard-worker.ts lists the areas a shard runs. Each area declares its databases and how
 * its records move next to its store (src/shards/shard-layout.ts says what a layout is). A
 * database that no layout names refuses the reshard rather than be dropped.
 */
import type { ShardLayout } from './shards/shard-layout.js';
import { occupancyLayout } from './channels/state/occupancy-layout.js';
import { historyLayout } from './channels/history/history-layout.js';
import { deviceLayout } from './push/shard/devices/device-layout.js';
import { reportLayout } from './push/shard/reports/report-layout.js';
import { publishLayout } from './push/shard/publishes/publish-layout.js';
import { namespaceLayout } from './push/shard/namespace-layout.js';
import { outboxLayout } from './webhooks/outbox-layout.js';
import { tenantLayout } from './tenants/tenant-layout.js';

export const SHARD_LAYOUTS: readonly ShardLayout[] = [deviceLayout, reportLayout, publishLayout, namespaceLayout, outboxLayout, occupancyLayout, historyLayout, tenantLayout];
