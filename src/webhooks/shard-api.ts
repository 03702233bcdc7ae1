/** Main ↔ shard messages of the webhooks area (type-only). */
 
export interface WebhookShardApi {}
