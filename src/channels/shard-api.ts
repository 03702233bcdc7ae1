/** Main ↔ shard messages of the channels area (type-only). */
 
export interface ChannelShardApi {}
