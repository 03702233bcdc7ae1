/**
 * Where the admin API's tenants are kept: one node's LMDB (lmdb-tenant-store.ts), or the
 * cluster's Redis (redis-tenant-store.ts), where a change made through any node reaches every
 * other one by a pub/sub notice. The config file's `apps`/`push` are not in the store: they are
 * the seed, merged over it (tenant-registry.ts).
 */
import type { TenantKind, TenantRecord } from './tenant-record.js';

export interface TenantStore {
  /** Every stored record (start-up). */
  list(): Promise<TenantRecord[]>;
  /** Stores (creates or replaces) a record; resolves once it is durable in the store. */
  put(record: TenantRecord): Promise<void>;
  /** Removes a record; resolves once that is durable. */
  delete(kind: TenantKind, id: string): Promise<void>;
  /** One record as stored now (a change notice names it), undefined when gone. */
  get(kind: TenantKind, id: string): Promise<TenantRecord | undefined>;
  /**
   * Shared stores: tells the other nodes that a record changed (they `get` it and apply it);
   * each node's `onChange` hears the other nodes' notices. Absent on one node.
   */
  notify?(kind: TenantKind, id: string): Promise<void>;
}
