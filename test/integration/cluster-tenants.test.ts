/**
 * Tenants in a cluster: the apps created through the admin API live in the cluster's Redis and
 * a change through any node takes effect on every node within a second (a pub/sub notice):
 * created through A, an app serves pusher-js and the SDK on B; disabled through B, its sockets
 * on A close with 4003; a node started later has it; deleted, it is gone everywhere (4001). A
 * node that misses a change notice (paused while its subscriber connection is killed) catches up
 * after it resumes.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClientPool, refusal, servesKey } from '../helpers/channel-clients.js';
import { heraldClusterBed, ONE_PROCESS } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { channelsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';

const TOKEN = 'cluster-tenants-token-0123456789';
const SEED = { id: 'seed-app', key: 'seed-key', secret: 'seed-secret' };
const bed = heraldClusterBed('tenants');
const pools: ClientPool[] = [];

afterEach(() => {
  for (const p of pools.splice(0)) p.disconnectAll();
});

function admin(node: HeraldProcess, path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${node.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

describe.skipIf(ONE_PROCESS)('tenants across nodes', () => {
  it('an app created through node A serves on node B within a second; changes through B reach A; deleted, it is gone on both', async () => {
    const cluster = await bed.start({ apps: [SEED], config: { admin: { token: TOKEN } } });
    const res = await admin(cluster.a, '/apps', { method: 'POST', body: { id: 'shared-app', key: 'shared-key' } });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; key: string; secret: string };
    const createdAt = Date.now();
    // B learns it from the notice: its first successful connection comes within a second.
    await servesKey(cluster.b, created.key, 1000);
    expect(Date.now() - createdAt).toBeLessThan(1000);

    const pool = new ClientPool(created);
    pools.push(pool);
    const onB = await pool.connect(cluster.b);
    const feed = await onB.subscribe('private-shared');
    await channelsSdk(cluster.b.port, created).trigger('private-shared', 'ev', 'via B');
    await channelsSdk(cluster.a.port, created).trigger('private-shared', 'ev', 'via A');
    await until(() => feed.data('ev').length === 2, 'both events on B');

    // Disabled through B: A's sockets of the app close with 4003.
    const onA = await pool.connect(cluster.a);
    expect((await admin(cluster.b, '/apps/shared-app', { method: 'PATCH', body: { enabled: false } })).status).toBe(200);
    await until(() => onA.errorCodes.includes(4003), 'the 4003 close on node A', 2000);
    expect((await admin(cluster.b, '/apps/shared-app', { method: 'PATCH', body: { enabled: true } })).status).toBe(200);
    await until(() => onB.errorCodes.includes(4003), 'the 4003 close on node B');

    // A node (re)started later reads it from Redis.
    await cluster.a.restart();
    const listed = (await (await admin(cluster.a, '/apps?filter=shared')).json()) as { apps: { id: string; enabled: boolean }[] };
    expect(listed.apps).toEqual([expect.objectContaining({ id: 'shared-app', enabled: true })]);
    const again = await pool.connect(cluster.a);

    // Deleted through B: gone on A too (sockets 4001, API 401).
    expect((await admin(cluster.b, '/apps/shared-app', { method: 'DELETE' })).status).toBe(204);
    await until(() => again.errorCodes.includes(4001), 'the 4001 close on node A', 2000);
    expect(await refusal(channelsSdk(cluster.a.port, created).trigger('c', 'e', {}))).toMatchObject({ status: 401, body: { code: 'AUTH_UNKNOWN_KEY' } });
    // Without a shared PostgreSQL a push instance lives on one node: the API says what is missing.
    const push = await admin(cluster.a, '/push', { method: 'POST', body: {} });
    expect(push.status).toBe(409);
    expect(((await push.json()) as { error: string }).error).toContain('cluster.postgresUrl');
  }, 90_000);

  it('a node that missed the change notice (paused, its subscriber connection killed meanwhile) applies the change after it resumes', async () => {
    // Long enough that the paused node is not reaped while it is stopped.
    const cluster = await bed.start({ apps: [SEED], config: { admin: { token: TOKEN } }, nodeTimeoutMs: 15_000 });
    const created = (await (await admin(cluster.a, '/apps', { method: 'POST', body: { id: 'missed-app', key: 'missed-key' } })).json()) as { id: string; key: string; secret: string };
    // B learns of the app from the notice; a pusher-js client refused with 4001 does not retry.
    await servesKey(cluster.b, created.key);
    const pool = new ClientPool(created);
    pools.push(pool);
    const onB = await pool.connect(cluster.b);

    const redis = cluster.redis.client();
    try {
      cluster.b.signal('SIGSTOP');
      // B's subscriber is gone while B cannot notice it: the notice of the change below is lost for B.
      const list = (await redis.client('LIST')) as string;
      const subscriber = list.split('\n').find((line) => line.includes(' name=herald-node-b-sub '));
      expect(subscriber, list).toBeDefined();
      await redis.client('KILL', 'ID', /\bid=(\d+)/.exec(subscriber!)![1]!);
      expect((await admin(cluster.a, '/apps/missed-app', { method: 'PATCH', body: { enabled: false } })).status).toBe(200);
    } finally {
      cluster.b.signal('SIGCONT');
      redis.disconnect();
    }
    await until(() => onB.errorCodes.includes(4003), 'the 4003 close on node B after it resumed', 15_000);
  }, 60_000);
});
