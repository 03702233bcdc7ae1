/** Main ↔ shard messages of push devices (type-only). */
export interface DeviceShardApi {}
