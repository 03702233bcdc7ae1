/** Main ↔ shard messages of the push area (type-only): devices, publishes, reports. */
import type { DeviceShardApi } from './devices/shard-api.js';
import type { PublishShardApi } from './publish/shard-api.js';
import type { ReportShardApi } from './reporting/shard-api.js';

export interface PushShardApi extends DeviceShardApi, PublishShardApi, ReportShardApi {}
