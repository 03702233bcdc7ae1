/** Main ↔ shard messages of the push area (type-only): devices, publishes, reports. */
import type { DeviceShardApi } from './devices.js';
import type { PublishShardApi } from './publishes.js';
import type { ReportShardApi } from './reports.js';

export interface PushShardApi extends DeviceShardApi, PublishShardApi, ReportShardApi {}
