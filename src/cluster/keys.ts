/**
 * The cluster's own Redis keys and pub/sub channels, each starting with the cluster's
 * `keyPrefix`: who is in the cluster (membership) and the control channels between nodes. Each
 * area keeps its own keys beside its store under the same prefix (channel state:
 * channels/adapter/redis/keys.ts; the webhook outbox: webhooks/shared-outbox-keys.ts; tenants:
 * tenants/redis-tenant-store.ts); docs/scaling.md lists them all.
 */
export class ClusterKeys {
  constructor(readonly prefix: string) {}

  /** ZSET session id → expiry (Redis server time, ms) of its last heartbeat. */
  nodes(): string {
    return `${this.prefix}nodes`;
  }

  /** HASH dead session id → `<claimant session>|<claim expiry ms>`: reaps in progress. */
  reaping(): string {
    return `${this.prefix}reaping`;
  }

  /**
   * STRING (an hour's TTL) set when another node claims a dead session: the session's node, if
   * it was only stalled, learns on re-registering that its members were announced as removed.
   */
  reapedSession(session: string): string {
    return `${this.prefix}reaped:${session}`;
  }

  /** Pub/sub channel every node listens on (control messages for all nodes). */
  controlAll(): string {
    return `${this.prefix}ctl`;
  }

  /** Pub/sub channel of one node (control messages for that node only), by node id. */
  controlNode(nodeId: string): string {
    return `${this.prefix}ctl:${nodeId}`;
  }
}
