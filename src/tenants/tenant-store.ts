/**
 * Where the admin API's tenants are kept: one node's LMDB (lmdb-tenant-store.ts), or the
 * cluster's Redis (redis-tenant-store.ts), shared by every node (SharedTenantStore). The config
 * file's `apps`/`push` are not in the store: they are the seed, merged over it
 * (tenant-registry.ts).
 */
import type { TenantKind, TenantRecord } from './tenant-record.js';

/** Records per page when the stored tenants are read at start-up or resynced. */
export const TENANT_PAGE_SIZE = 500;

export interface TenantStore {
  /** Every stored record, `TENANT_PAGE_SIZE` at a time (a page is dropped before the next is read). */
  pages(): AsyncIterable<TenantRecord[]>;
  /** Stores (creates or replaces) a record; resolves once it is durable in the store. */
  put(record: TenantRecord): Promise<void>;
  /** Removes a record; resolves once that is durable. */
  delete(kind: TenantKind, id: string): Promise<void>;
  /** One record as stored now, undefined when gone. */
  get(kind: TenantKind, id: string): Promise<TenantRecord | undefined>;
}

/** One entry of a shared store's change log: the tenant and the version of its last change. */
export interface TenantChangeEntry {
  kind: TenantKind;
  id: string;
  version: number;
}

/**
 * A store every node of a cluster shares. Each put or delete increments the store's version
 * and records the tenant in its change log at that version, atomically with the change, so a
 * node that missed notices (its subscriber reconnected, it was paused) reads what changed since
 * the version it last applied, and nothing else.
 */
export interface SharedTenantStore extends TenantStore {
  /** Tells the other nodes that a record changed (at most once: a lost notice is caught up by the version). */
  notify(kind: TenantKind, id: string): Promise<void>;
  /** The version now: the number of changes ever made (0 for an empty store). */
  version(): Promise<number>;
  /** The tenants whose last change is after `version`, oldest first. */
  changesSince(version: number): Promise<TenantChangeEntry[]>;
  /** Calls `listener` each time this node's notice subscription is made again (notices may have been missed meanwhile); answers the unsubscribe. */
  onResubscribed(listener: () => void): () => void;
}
