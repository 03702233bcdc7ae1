/**
 * Push instances through the admin API in a cluster whose devices are in a shared PostgreSQL
 * (`cluster.postgresUrl`): created through node A, an instance serves the device API and the
 * Beams SDK on node B within a second; its rotated secret key and its deletion reach both nodes.
 * Without `postgresUrl` the API refuses with a 409 naming it (cluster-tenants.test.ts).
 */
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS } from '../helpers/herald-cluster.js';
import type { HeraldProcess } from '../helpers/herald-process.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until, untilBackToBack } from '../helpers/wait.js';
import { TEST_CA_FILE } from '../fakes/tls.js';
import { DeviceApi, fcmToken } from './device-api-helpers.js';

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
    const { fcm } = bed.fakes.instanceConfig() as { fcm: Record<string, unknown> };
    const { caFile: _ca, ...fcmKeyMaterial } = fcm;
    const res = await admin(cluster.a, '/push', { method: 'POST', body: { fcm: fcmKeyMaterial, instanceId: INSTANCE } });
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
});
