/**
 * Shard side of the tenants area: the apps and push instances created through the admin API,
 * in the LMDB database `tenants/records` (key `<kind>\0<id>`, msgpack value) of shard 0
 * (TENANT_SHARD in lmdb-tenant-store.ts: tens of thousands of records fit one shard; start-up
 * reads them in pages). Writes are awaited, so an answered change survives kill -9.
 */
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { TenantShardApi } from './messages.js';
import type { TenantRecord } from './tenant-record.js';
import { tenantId } from './tenant-record.js';

/** The database name (the reshard tool copies it to the same shard). */
export const TENANTS_DATABASE = 'tenants/records';

export function createTenantArea(ctx: ShardContext): ShardArea<TenantShardApi> {
  const db = ctx.root.openDB<TenantRecord, string>({ name: TENANTS_DATABASE });
  return {
    handlers: {
      'tenants.page': (req) => {
        const records: TenantRecord[] = [];
        let last: string | null = null;
        for (const { key, value } of db.getRange(req.after === null ? {} : { start: req.after })) {
          if (key === req.after) continue;
          if (records.length === req.limit) return { records, last };
          records.push(value);
          last = key;
        }
        return { records, last: null };
      },
      'tenants.get': (req) => ({ record: db.get(`${req.kind}\0${req.id}`) ?? null }),
      'tenants.put': async (req) => {
        await db.put(`${req.record.kind}\0${tenantId(req.record)}`, req.record);
        return { stored: true };
      },
      'tenants.delete': async (req) => ({ deleted: await db.remove(`${req.kind}\0${req.id}`) }),
    },
  };
}
