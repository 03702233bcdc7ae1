/** Main ↔ shard messages of the tenants area (type-only): the admin API's records in LMDB. */
import type { TenantKind, TenantRecord } from './tenant-record.js';

export interface TenantShardApi {
  /** Every stored record (start-up). */
  'tenants.list': { req: {}; res: { records: TenantRecord[] } };
  /** Stores a record; answered once it is durable. */
  'tenants.put': { req: { record: TenantRecord }; res: { stored: true } };
  /** Removes a record; answered once that is durable. */
  'tenants.delete': { req: { kind: TenantKind; id: string }; res: { deleted: boolean } };
}
