/** Main ↔ shard messages of push reporting (type-only). */
export interface ReportShardApi {}
