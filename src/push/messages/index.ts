/** Main ↔ shard messages of the push area (type-only): devices, publishes, reports, deleted instances. */
import type { DeviceShardApi } from './devices.js';
import type { NamespaceShardApi } from './namespaces.js';
import type { PublishShardApi } from './publishes.js';
import type { ReportShardApi } from './reports.js';

export interface PushShardApi extends DeviceShardApi, PublishShardApi, ReportShardApi, NamespaceShardApi {}
