/**
 * Removing an app in a two-node cluster (Redis adapter), through the admin API of one node or
 * from every node's config file on a reload, with pusher-js members on both nodes and a real
 * webhook receiver: every socket of the app closes with 4001 on both nodes, every member is
 * removed and every channel vacated with their webhooks, each once, at the URL the app had and
 * signed with its key; and the app created again with the same id starts empty on both nodes
 * (no occupancy, member, count or cached event in Redis), with its whole daily message quota
 * (counted in Redis; triggers through the pusher SDK).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import Pusher from 'pusher';
import { closedWith4001, occupy, removalHook, removalWebhooks, startsEmpty } from '../helpers/app-removal.js';
import { ClientPool, servesKey } from '../helpers/channel-clients.js';
import { heraldClusterBed, NODE_IDS, ONE_PROCESS, type HeraldCluster } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { WebhookReceiver } from '../helpers/webhook-receiver.js';

const TOKEN = 'cluster-app-removal-token-0123456789';
const SEED = { id: 'seed-app', key: 'seed-key', secret: 'seed-secret' };
const USERS = ['u1', 'u2', 'u3', 'u4', 'u5', 'u6'];
const bed = heraldClusterBed('app-removal');
const pools: ClientPool[] = [];
let receiver: WebhookReceiver;

beforeAll(async () => {
  receiver = await WebhookReceiver.start();
});
afterEach(() => {
  for (const p of pools.splice(0)) p.disconnectAll();
});
afterAll(async () => {
  await receiver?.close();
});

function pool(creds: { id: string; key: string; secret: string }): ClientPool {
  const p = new ClientPool(creds);
  pools.push(p);
  return p;
}

function admin(node: HeraldProcess, path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${node.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

async function createApp(node: HeraldProcess, fields: Record<string, unknown>): Promise<{ id: string; key: string; secret: string }> {
  const res = await admin(node, '/apps', { method: 'POST', body: fields });
  expect(res.status, await res.clone().text()).toBe(201);
  return (await res.json()) as { id: string; key: string; secret: string };
}

/** Triggers one event on one channel (one message of the quota) through `node` with the pusher SDK; answers the HTTP status. */
async function triggerStatus(node: HeraldProcess, creds: { id: string; key: string; secret: string }): Promise<number> {
  const sdk = new Pusher({ appId: creds.id, key: creds.key, secret: creds.secret, host: '127.0.0.1', port: String(node.port), useTLS: false });
  try {
    return (await sdk.trigger('quota-channel', 'counted', { n: 1 })).status;
  } catch (err) {
    if (err instanceof Pusher.RequestError && err.status !== undefined) return err.status;
    throw err;
  }
}

/** Every node reloads a config file whose apps are `apps`. */
function reloadEverywhere(cluster: HeraldCluster, apps: Record<string, unknown>[]): void {
  cluster.nodes.forEach((node, i) => {
    node.writeConfig({ ...cluster.nodeConfig(NODE_IDS[i]!), apps });
    node.signal('SIGHUP');
  });
}

describe.skipIf(ONE_PROCESS)('a removed app in a cluster leaves nothing behind', () => {
  it('deleted through node A: sockets on both nodes closed 4001, member_removed and channel_vacated once each at the URL it had, the id re-created starts empty on both', async () => {
    const cluster = await bed.start({ apps: [SEED], config: { admin: { token: TOKEN } } });
    const old = await createApp(cluster.a, { id: 'doomed', key: 'doomed-key', subscriptionCount: true, webhooks: [removalHook(receiver.url('/doomed'))] });
    await servesKey(cluster.b, old.key);
    const clients = await occupy(pool(old), [cluster.a, cluster.b], USERS, receiver, '/doomed');

    expect((await admin(cluster.a, '/apps/doomed', { method: 'DELETE' })).status).toBe(204);
    await closedWith4001(clients);
    await removalWebhooks(receiver, '/doomed', USERS, old.key);

    const again = await createApp(cluster.a, { id: 'doomed', key: 'doomed-key-2', subscriptionCount: true });
    await servesKey(cluster.b, again.key);
    await startsEmpty(pool(again), [cluster.a, cluster.b]);
  }, 120_000);

  it('deleted through node A: the id re-created has its whole daily message quota on both nodes', async () => {
    const cluster = await bed.start({ apps: [SEED], config: { admin: { token: TOKEN } } });
    const old = await createApp(cluster.a, { id: 'quota-app', key: 'quota-key', messageQuota: 6 });
    await servesKey(cluster.b, old.key);
    for (const node of [cluster.a, cluster.b, cluster.b]) expect(await triggerStatus(node, old), 'old app trigger').toBe(200);

    expect((await admin(cluster.a, '/apps/quota-app', { method: 'DELETE' })).status).toBe(204);
    const again = await createApp(cluster.a, { id: 'quota-app', key: 'quota-key-2', messageQuota: 6 });
    await servesKey(cluster.b, again.key);
    for (const node of [cluster.a, cluster.b, cluster.a, cluster.b, cluster.a, cluster.b]) expect(await triggerStatus(node, again), 'new app trigger').toBe(200);
    expect(await triggerStatus(cluster.a, again), 'past the quota').toBe(403);
  }, 120_000);

  it('removed from every node\'s config file on a reload: the same; added back, it starts empty on both', async () => {
    const file = { id: 'file-app', key: 'file-key', secret: 'file-secret', subscriptionCount: true, webhooks: [removalHook(receiver.url('/file'))] };
    const cluster = await bed.start({ apps: [SEED, file] });
    const clients = await occupy(pool(file), [cluster.a, cluster.b], USERS, receiver, '/file');

    reloadEverywhere(cluster, [SEED]);
    await closedWith4001(clients);
    await removalWebhooks(receiver, '/file', USERS, file.key);

    reloadEverywhere(cluster, [SEED, { ...file, webhooks: [] }]);
    for (const node of cluster.nodes) await servesKey(node, file.key);
    await startsEmpty(pool(file), [cluster.a, cluster.b]);
  }, 120_000);
});
