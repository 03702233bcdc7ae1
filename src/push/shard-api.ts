/** Main ↔ shard messages of the push area (type-only). */
 
export interface PushShardApi {}
