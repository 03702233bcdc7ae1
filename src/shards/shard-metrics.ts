/** The shape of a shard's `core.metrics` answer (type-only; shared by both sides). */
export interface ShardMetrics {
  /** Push notification outcomes since the worker started; `reason` is '' for sent ones. */
  notifications: { instanceId: string; gateway: string; result: string; reason: string; count: number }[];
}
