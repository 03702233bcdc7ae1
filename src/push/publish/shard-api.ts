/** Main ↔ shard messages of push publish (type-only). */
export interface PublishShardApi {}
