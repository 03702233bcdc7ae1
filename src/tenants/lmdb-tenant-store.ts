/** The tenant store of one node: LMDB on a shard (never written from the main thread). */
import type { ShardRequester } from '../shards/requester.js';
import type { TenantShardApi } from './messages.js';
import type { TenantKind, TenantRecord } from './tenant-record.js';
import { TENANT_PAGE_SIZE, type TenantStore } from './tenant-store.js';

/** The shard that keeps the tenant records (every shard count has a shard 0). */
export const TENANT_SHARD = 0;

/**
 * How long reading one page may take, ms: it runs at start-up (as the shards' first ping
 * does, with the same bound), so `shardRequestTimeoutMs`, which may be a few ms, does not apply.
 */
const PAGE_TIMEOUT_MS = 30_000;

export class LmdbTenantStore implements TenantStore {
  constructor(private readonly shards: ShardRequester<TenantShardApi>) {}

  async *pages(): AsyncIterable<TenantRecord[]> {
    let after: string | null = null;
    do {
      const page: { records: TenantRecord[]; last: string | null } = await this.shards.request(TENANT_SHARD, { type: 'tenants.page', after, limit: TENANT_PAGE_SIZE }, PAGE_TIMEOUT_MS);
      // Copied: the decoded strings are slices of longer ones, which the records would keep alive (shards/codec.ts).
      if (page.records.length > 0) yield structuredClone(page.records);
      after = page.last;
    } while (after !== null);
  }

  async put(record: TenantRecord): Promise<void> {
    await this.shards.request(TENANT_SHARD, { type: 'tenants.put', record });
  }

  async delete(kind: TenantKind, id: string): Promise<void> {
    await this.shards.request(TENANT_SHARD, { type: 'tenants.delete', kind, id });
  }

  async get(kind: TenantKind, id: string): Promise<TenantRecord | undefined> {
    return (await this.shards.request(TENANT_SHARD, { type: 'tenants.get', kind, id })).record ?? undefined;
  }
}
