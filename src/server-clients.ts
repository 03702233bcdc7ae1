/**
 * The server context's fields a front end builds the same way on the main thread (one front-end
 * thread) and on each front-end thread: the running tenants' maps, and one client per area over
 * the shards (the pool, or the thread's ports to them).
 */
import type { ServerContext } from './server-context.js';
import type { ShardRequester } from './shards/requester.js';
import type { HeraldShardApi } from './shard-api.js';
import type { RunningTenants } from './tenants/running-tenants.js';
import { DevicesClient } from './push/clients/devices.js';
import { PublishesClient } from './push/clients/publishes.js';
import { ReportsClient } from './push/clients/reports.js';
import { WebhooksClient } from './webhooks/client.js';

export function tenantsAndClients(
  running: RunningTenants,
  shards: ShardRequester<HeraldShardApi>,
): Pick<ServerContext, 'appsById' | 'appsByKey' | 'pushInstances' | 'core' | 'devices' | 'publishes' | 'reports' | 'webhooks'> {
  return {
    appsById: running.appsById,
    appsByKey: running.appsByKey,
    pushInstances: running.pushInstances,
    core: shards,
    devices: new DevicesClient(shards),
    publishes: new PublishesClient(shards),
    reports: new ReportsClient(shards),
    webhooks: new WebhooksClient(shards),
  };
}
