/**
 * Push instances through the admin API in a cluster whose devices are in a shared PostgreSQL
 * (`cluster.postgresUrl`): created through node A, an instance serves the device API and the
 * Beams SDK on node B within a second; its rotated secret key and its deletion reach both nodes.
 * Created again with the same id, it sees none of the deleted instance's devices (on either
 * node), its publishes reach none of them, and the purge leaves no row of the deleted instance
 * in PostgreSQL. Without `postgresUrl` the API refuses with a 409 naming it (cluster-tenants.test.ts).
 */
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until, untilBackToBack } from '../helpers/wait.js';
import { TEST_CA_FILE } from '../fakes/tls.js';
import { DeviceApi, fcmToken, userToken } from './device-api-helpers.js';

const TOKEN = 'cluster-push-tenants-token-0123';
const APP = { id: 'push-tenants-app', key: 'push-tenants-key', secret: 'push-tenants-secret' };
const INSTANCE = '5b0e7d3c-1f2a-4c6b-9d8e-7a6b5c4d3e2f';
const bed = pushClusterBed('push-tenants');

function admin(node: HeraldProcess, path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${node.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

function fcmDelivered(publishId: string): string[] {
  return bed.fakes.deliveredFor(publishId).fcm;
}

describe.skipIf(ONE_PROCESS)('push instances of the admin API in a cluster with a shared PostgreSQL', () => {
  it('created through A, an instance takes devices and publishes through B within a second; rotation and deletion reach both', async () => {
    // No push instance at start: it is created through the admin API, which takes no file path
    // (no caFile): the nodes trust the fakes' CA through NODE_EXTRA_CA_CERTS.
    const cluster = await bed.start({ apps: [APP], config: { admin: { token: TOKEN } }, database: 'cluster_push_tenants', push: [], env: { NODE_EXTRA_CA_CERTS: TEST_CA_FILE } });
    const { fcm } = bed.fakes.apiInstanceConfig();
    const res = await admin(cluster.a, '/push', { method: 'POST', body: { fcm, instanceId: INSTANCE } });
    expect(res.status, await res.clone().text()).toBe(201);
    const created = (await res.json()) as { instanceId: string; secretKey: string };
    const createdAt = Date.now();

    // B learns it from the notice: a device registers there within a second.
    const onB = new DeviceApi(cluster.b.baseUrl, INSTANCE);
    let last = '';
    const registered = await untilBackToBack(
      async () => {
        const answer = await onB.register('fcm', { token: fcmToken('tenant-1') });
        last = `${answer.status} ${JSON.stringify(answer.body)}`;
        return answer.status === 200 && answer;
      },
      () => `a registration on B (last answer: ${last})`,
      1000,
    );
    expect(Date.now() - createdAt).toBeLessThan(1000);
    const deviceId = registered.body.id as string;
    expect((await onB.replaceInterests('fcm', deviceId, ['news'])).status).toBe(200);
    // The device is in the shared store: A reads it.
    expect((await new DeviceApi(cluster.a.baseUrl, INSTANCE).get('fcm', deviceId)).status).toBe(200);

    // A publish through B with the secret key A answered reaches the device.
    const { publishId } = await beamsSdk(cluster.b.port, INSTANCE, created.secretKey).publishToInterests(['news'], { fcm: { notification: { title: 'via B' } } });
    await until(() => fcmDelivered(publishId).length >= 1, `publish ${publishId} through B`, 30_000);
    expect(fcmDelivered(publishId)).toEqual([fcmToken('tenant-1')]);

    // Rotated through B without grace: A refuses the old key and takes the new one.
    const rotated = await admin(cluster.b, `/push/${INSTANCE}/rotate-secret`, { method: 'POST', body: { graceSeconds: 0 } });
    expect(rotated.status).toBe(200);
    const { secretKey } = (await rotated.json()) as { secretKey: string };
    // Each try is a request: they run back to back.
    await untilBackToBack(() => beamsSdk(cluster.a.port, INSTANCE, created.secretKey).publishToInterests(['news'], { fcm: { notification: { title: 'old' } } }).then(() => false, () => true), 'the old key refused on A', 2000);
    const second = await beamsSdk(cluster.a.port, INSTANCE, secretKey).publishToInterests(['news'], { fcm: { notification: { title: 'via A' } } });
    await until(() => fcmDelivered(second.publishId).length >= 1, `publish ${second.publishId} through A`, 30_000);

    // Deleted through A: B no longer knows the instance.
    expect((await admin(cluster.a, `/push/${INSTANCE}`, { method: 'DELETE' })).status).toBe(204);
    await untilBackToBack(async () => (await onB.get('fcm', deviceId)).status === 404, 'the instance gone on B', 2000);
    expect((await onB.get('fcm', deviceId)).body).toMatchObject({ error: expect.any(String) });
  }, 120_000);

  it('created again with the same id after a deletion, an instance sees none of the old devices, and the purge leaves no row of them', async () => {
    const database = 'cluster_push_recreate';
    const cluster = await bed.start({ apps: [APP], config: { admin: { token: TOKEN } }, database, push: [], env: { NODE_EXTRA_CA_CERTS: TEST_CA_FILE } });
    const create = async (node: HeraldProcess) => {
      const res = await admin(node, '/push', { method: 'POST', body: { ...bed.fakes.apiInstanceConfig(), instanceId: INSTANCE } });
      expect(res.status, await res.clone().text()).toBe(201);
      return ((await res.json()) as { secretKey: string }).secretKey;
    };
    const oldKey = await create(cluster.a);
    const onA = new DeviceApi(cluster.a.baseUrl, INSTANCE);
    await untilBackToBack(async () => (await new DeviceApi(cluster.b.baseUrl, INSTANCE).register('fcm', { token: fcmToken('recreate-probe') })).status === 200, 'the instance on B', 2000);
    const jwt = await userToken(oldKey, INSTANCE, { sub: 'alice' });
    const oldIds: string[] = [];
    for (let start = 0; start < 200; start += 20) {
      await Promise.all(
        Array.from({ length: 20 }, async (_, k) => {
          const i = start + k;
          const id = await onA.registerOk('fcm', fcmToken(`recreate-old-${i}`));
          expect((await onA.replaceInterests('fcm', id, ['news', 'sports'])).status).toBe(200);
          if (i % 3 === 0) expect((await onA.setUser('fcm', id, jwt)).status).toBe(200);
          oldIds.push(id);
        }),
      );
    }
    const oldPublish = await beamsSdk(cluster.a.port, INSTANCE, oldKey).publishToInterests(['news'], { fcm: { notification: { title: 'old' } } });
    await until(() => fcmDelivered(oldPublish.publishId).length >= 200, 'the old publish delivered', 30_000);

    // Deleted through A, created again through B once B no longer has it.
    expect((await admin(cluster.a, `/push/${INSTANCE}`, { method: 'DELETE' })).status).toBe(204);
    const onB = new DeviceApi(cluster.b.baseUrl, INSTANCE);
    await untilBackToBack(async () => (await onB.get('fcm', oldIds[0]!)).status === 404, 'the instance gone on B', 2000);
    // The devices are gone from the shared store before B's registry hears of the deletion (a notice): create once B no longer lists it.
    await until(async () => (await admin(cluster.b, `/push/${INSTANCE}`)).status === 404, "the deletion in B's registry");
    const newKey = await create(cluster.b);
    for (const api of [onA, onB]) {
      await untilBackToBack(async () => (await api.register('fcm', { token: fcmToken('recreate-new') })).status === 200, 'the new instance on both nodes', 2000);
      for (const id of oldIds.slice(0, 10)) expect((await api.get('fcm', id)).status, `old device ${id} on ${api.baseUrl}`).toBe(404);
    }
    const newId = await onA.registerOk('fcm', fcmToken('recreate-new'));
    expect((await onA.replaceInterests('fcm', newId, ['news'])).status).toBe(200);
    const sdk = beamsSdk(cluster.b.port, INSTANCE, newKey);
    const byInterest = await sdk.publishToInterests(['news'], { fcm: { notification: { title: 'new' } } });
    const byUser = await sdk.publishToUsers(['alice'], { fcm: { notification: { title: 'new' } } });
    for (const { publishId } of [byInterest, byUser]) {
      await until(async () => {
        const res = await fetch(`${cluster.b.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, { headers: { authorization: `Bearer ${newKey}` } });
        return res.status === 200 && ((await res.json()) as { state?: string }).state === 'finished';
      }, `publish ${publishId} finished`, 30_000);
    }
    expect([...fcmDelivered(byInterest.publishId), ...fcmDelivered(byUser.publishId)]).toEqual([fcmToken('recreate-new')]);

    // Purged: no row of the old namespace (the id itself) is left, only the new instance's.
    const client = new pg.Client(bed.postgres.url(database));
    await client.connect();
    try {
      const rows = async () => {
        const { rows: counts } = await client.query<{ n: string }>(
          `SELECT (SELECT count(*) FROM herald_push_devices WHERE instance_id = $1)
                + (SELECT count(*) FROM herald_push_device_interests WHERE instance_id = $1)
                + (SELECT count(*) FROM herald_push_publishes WHERE instance_id = $1)
                + (SELECT count(*) FROM herald_push_usage WHERE instance_id = $1)
                + (SELECT count(*) FROM herald_push_reports WHERE instance_id = $1)
                + (SELECT count(*) FROM herald_push_purges) AS n`,
          [INSTANCE],
        );
        return Number(counts[0]!.n);
      };
      await until(async () => (await rows()) === 0, 'no row of the deleted instance in PostgreSQL', 30_000);
      const { rows: left } = await client.query<{ instance_id: string }>('SELECT DISTINCT instance_id FROM herald_push_devices WHERE instance_id LIKE $1', [`${INSTANCE}%`]);
      expect(left).toHaveLength(1);
      expect(left[0]!.instance_id).not.toBe(INSTANCE);
    } finally {
      await client.end();
    }
  }, 180_000);
});
