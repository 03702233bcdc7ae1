/** The shape of a shard's `core.metrics` answer (type-only; shared by both sides). */
export interface ShardMetrics {
  /** Push notification outcomes since the worker started; `reason` is '' for sent ones. */
  notifications: { instanceId: string; gateway: string; result: string; reason: string; count: number }[];
  /** Outbound connections refused because their address is not public, since the worker started. */
  outboundRefusals: { client: string; reason: string; count: number }[];
  /** Bytes of finished publishes' records the shard keeps (retention by bytes). */
  publishRecordBytes: number;
  /** Notifications sent again after their partition's lease passed to another node (cluster). */
  publishResends: number;
  /** Namespaces of deleted push instances whose records the shard has still to purge. */
  pushPurgesPending?: number;
  /** The shard's disk-full state (src/shards/disk-full.ts). */
  storage?: DiskFullFigures;
}

/** A shard's disk-full state and counters since its worker started. */
export interface DiskFullFigures {
  dataDir: string;
  /** Writes are being refused (STORAGE_FULL). */
  full: boolean;
  /** Disk-full episodes begun. */
  episodes: number;
  /** Writes refused or failed for want of room. */
  refusedWrites: number;
  /** Free bytes for an unprivileged user, as last looked at (-1: never). */
  freeBytes: number;
}
