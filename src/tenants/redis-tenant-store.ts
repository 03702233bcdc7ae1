/**
 * The tenant store of a cluster, in the cluster's Redis under its key prefix: two HASHes
 * (`tenants:app`, `tenants:push`: id → JSON record), a version counter (`tenants:version`) and
 * the change log (`tenants:changes`, a sorted set of `<kind>:<id>` scored by the version of its
 * last change, so it holds each tenant once). A change updates all three in one script; then a
 * control notice on the cluster's pub/sub bus makes every other node apply it at once, and a node
 * that missed the notice catches up from the log (tenant-sync.ts). Durable as far as the Redis
 * deployment is (AOF, replicas: docs/scaling.md).
 */
import type { Cluster } from '../cluster/cluster.js';
import { whenAvailable } from '../cluster/connection.js';
import type { TenantKind, TenantRecord } from './tenant-record.js';
import { tenantId } from './tenant-record.js';
import { TENANT_PAGE_SIZE, type SharedTenantStore, type TenantChangeEntry } from './tenant-store.js';

/**
 * KEYS: hash, version, changes. ARGV: id, JSON record ('' deletes), change log member.
 * Writes (or deletes) the record, increments the version and logs the tenant at it; answers the version.
 */
const CHANGE = `
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], ARGV[1]) else redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
local version = redis.call('INCR', KEYS[2])
redis.call('ZADD', KEYS[3], version, ARGV[3])
return version
`;

export class RedisTenantStore implements SharedTenantStore {
  constructor(private readonly cluster: Cluster) {}

  private key(name: string): string {
    return `${this.cluster.keys.prefix}tenants:${name}`;
  }

  private get redis() {
    return this.cluster.connections.commands;
  }

  async *pages(): AsyncIterable<TenantRecord[]> {
    for (const kind of ['app', 'push'] as const) {
      let cursor = '0';
      do {
        const [next, flat] = await whenAvailable(() => this.redis.hscan(this.key(kind), cursor, 'COUNT', TENANT_PAGE_SIZE));
        cursor = next;
        const page: TenantRecord[] = [];
        for (let i = 1; i < flat.length; i += 2) page.push(JSON.parse(flat[i]!) as TenantRecord);
        if (page.length > 0) yield page;
      } while (cursor !== '0');
    }
  }

  async put(record: TenantRecord): Promise<void> {
    await this.change(record.kind, tenantId(record), JSON.stringify(record));
  }

  async delete(kind: TenantKind, id: string): Promise<void> {
    await this.change(kind, id, '');
  }

  private async change(kind: TenantKind, id: string, json: string): Promise<void> {
    await whenAvailable(() => this.redis.eval(CHANGE, 3, this.key(kind), this.key('version'), this.key('changes'), id, json, `${kind}:${id}`));
  }

  async get(kind: TenantKind, id: string): Promise<TenantRecord | undefined> {
    const json = await whenAvailable(() => this.redis.hget(this.key(kind), id));
    return json === null ? undefined : (JSON.parse(json) as TenantRecord);
  }

  async notify(kind: TenantKind, id: string): Promise<void> {
    await this.cluster.sendControl('all', { type: 'tenantChanged', kind, id });
  }

  async version(): Promise<number> {
    return Number((await whenAvailable(() => this.redis.get(this.key('version')))) ?? 0);
  }

  async changesSince(version: number): Promise<TenantChangeEntry[]> {
    const flat = await whenAvailable(() => this.redis.zrangebyscore(this.key('changes'), `(${version}`, '+inf', 'WITHSCORES'));
    const entries: TenantChangeEntry[] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const member = flat[i]!;
      const colon = member.indexOf(':');
      entries.push({ kind: member.slice(0, colon) as TenantKind, id: member.slice(colon + 1), version: Number(flat[i + 1]) });
    }
    return entries;
  }

  onResubscribed(listener: () => void): () => void {
    // The cluster subscribes to its control channels again on the subscriber's 'ready' (cluster.ts resubscribe).
    const subscriber = this.cluster.connections.subscriber;
    subscriber.on('ready', listener);
    return () => subscriber.off('ready', listener);
  }
}
