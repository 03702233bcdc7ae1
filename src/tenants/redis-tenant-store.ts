/**
 * The tenant store of a cluster: two Redis HASHes under the cluster's key prefix
 * (`tenants:app`, `tenants:push`: id → JSON record), shared by every node, and a control
 * notice on the cluster's pub/sub bus after each change, on which every other node reads the
 * record and applies it (well within a second). Durable as far as the Redis deployment is
 * (AOF, replicas: docs/scaling.md).
 */
import type { ClusterNode } from '../channels/adapter/redis/cluster-node.js';
import { whenAvailable } from '../channels/adapter/redis/connection.js';
import type { TenantKind, TenantRecord } from './tenant-record.js';
import type { TenantStore } from './tenant-store.js';

export class RedisTenantStore implements TenantStore {
  constructor(private readonly node: ClusterNode) {}

  private key(kind: TenantKind): string {
    return `${this.node.keys.prefix}tenants:${kind}`;
  }

  private get redis() {
    return this.node.connections.commands;
  }

  async list(): Promise<TenantRecord[]> {
    const [apps, push] = await whenAvailable(() => Promise.all([this.redis.hvals(this.key('app')), this.redis.hvals(this.key('push'))]));
    return [...apps, ...push].map((json) => JSON.parse(json) as TenantRecord);
  }

  async put(record: TenantRecord): Promise<void> {
    const id = record.kind === 'app' ? record.config.id : record.config.instanceId;
    await whenAvailable(() => this.redis.hset(this.key(record.kind), id, JSON.stringify(record)));
  }

  async delete(kind: TenantKind, id: string): Promise<void> {
    await whenAvailable(() => this.redis.hdel(this.key(kind), id));
  }

  async get(kind: TenantKind, id: string): Promise<TenantRecord | undefined> {
    const json = await whenAvailable(() => this.redis.hget(this.key(kind), id));
    return json === null ? undefined : (JSON.parse(json) as TenantRecord);
  }

  async notify(kind: TenantKind, id: string): Promise<void> {
    await this.node.bus.sendControl('all', { type: 'tenantChanged', kind, id });
  }
}
