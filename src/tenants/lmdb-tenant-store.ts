/** The tenant store of one node: LMDB on a shard (never written from the main thread). */
import type { ShardRequester } from '../shards/requester.js';
import type { TenantShardApi } from './messages.js';
import type { TenantKind, TenantRecord } from './tenant-record.js';
import type { TenantStore } from './tenant-store.js';

/** The shard that keeps the tenant records (every shard count has a shard 0). */
export const TENANT_SHARD = 0;

/**
 * How long reading every record may take, ms: it runs at start-up (as the shards' first ping
 * does, with the same bound), so `shardRequestTimeoutMs`, which may be a few ms, does not apply.
 */
const LIST_TIMEOUT_MS = 30_000;

export class LmdbTenantStore implements TenantStore {
  constructor(private readonly shards: ShardRequester<TenantShardApi>) {}

  async list(): Promise<TenantRecord[]> {
    return (await this.shards.request(TENANT_SHARD, { type: 'tenants.list' }, LIST_TIMEOUT_MS)).records;
  }

  async put(record: TenantRecord): Promise<void> {
    await this.shards.request(TENANT_SHARD, { type: 'tenants.put', record });
  }

  async delete(kind: TenantKind, id: string): Promise<void> {
    await this.shards.request(TENANT_SHARD, { type: 'tenants.delete', kind, id });
  }

  async get(kind: TenantKind, id: string): Promise<TenantRecord | undefined> {
    return (await this.list()).find((r) => r.kind === kind && (r.kind === 'app' ? r.config.id : r.config.instanceId) === id);
  }
}
