/** Main ↔ shard messages of the tenants area (type-only): the admin API's records in LMDB. */
import type { TenantKind, TenantRecord } from './tenant-record.js';

export interface TenantShardApi {
  /** Up to `limit` stored records in key order after the key `after` (null: from the first); `last` is the key to continue after, null at the end. */
  'tenants.page': { req: { after: string | null; limit: number }; res: { records: TenantRecord[]; last: string | null } };
  /** One stored record. */
  'tenants.get': { req: { kind: TenantKind; id: string }; res: { record: TenantRecord | null } };
  /** Stores a record; answered once it is durable. */
  'tenants.put': { req: { record: TenantRecord }; res: { stored: true } };
  /** Removes a record; answered once that is durable. */
  'tenants.delete': { req: { kind: TenantKind; id: string }; res: { deleted: boolean } };
}
