/**
 * Stateless push nodes (real processes: Herald nodes with the same config, one private
 * redis-server, one private PostgreSQL):
 * - PostgreSQL restarted during device-API traffic: while it is away the device API answers
 *   503 PUSH_STORE_UNAVAILABLE with Retry-After (what the Beams SDKs retry on), never another
 *   failure; once it is back every registration that was acknowledged (200) is there, through
 *   every node.
 * - A node started with an empty data dir joins a running cluster and at once serves the
 *   device API for devices registered elsewhere and publishes to them.
 */
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH } from '../helpers/herald-process.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { sleep, until } from '../helpers/wait.js';
import { DeviceApi, fcmToken } from './device-api-helpers.js';

const APP = { id: 'stateless-app', key: 'stateless-key', secret: 'stateless-secret' };
const INSTANCE = DEFAULT_PUSH.instanceId;
const bed = pushClusterBed('stateless');

function fcmDelivered(publishId: string): string[] {
  return bed.fakes.deliveredFor(publishId).fcm;
}

describe.skipIf(ONE_PROCESS)('stateless push nodes', () => {
  it('answers 503 PUSH_STORE_UNAVAILABLE with Retry-After while PostgreSQL restarts, and loses nothing it acknowledged', async () => {
    const cluster = await bed.start({ nodes: 2, apps: [APP], database: 'stateless_restart' });
    const nodes = cluster.nodes.map((n) => new DeviceApi(n.baseUrl, INSTANCE));
    const acknowledged: { id: string }[] = [];
    const refusals: { status: number; retryAfter: string | null; body: string }[] = [];
    let okAfterRestart = 0;
    let restarted = false;
    let stop = false;

    // Device-API traffic on both nodes, as SDKs send it, until told to stop.
    const traffic = Promise.all(
      nodes.map(async (api, n) => {
        for (let k = 0; !stop; k++) {
          const token = fcmToken(`restart-${n}-${k}`);
          const res = await fetch(`${api.baseUrl}/device_api/v1/instances/${INSTANCE}/devices/fcm`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ token, metadata: { sdkVersion: '2.0.0' } }),
          }).catch(() => undefined);
          if (!res) continue;
          const body = await res.text();
          if (res.status === 200) {
            acknowledged.push({ id: (JSON.parse(body) as { id: string }).id });
            if (restarted) okAfterRestart++;
          } else {
            refusals.push({ status: res.status, retryAfter: res.headers.get('retry-after'), body });
            // time: what an SDK does with a Retry-After, wait and then try again (shortened here).
            await sleep(50);
          }
        }
      }),
    );

    await until(() => acknowledged.length >= 20, 'registrations before the restart', 30_000);
    await bed.postgres.stop();
    await until(() => refusals.length >= 4, 'refusals while PostgreSQL is away', 30_000);
    await bed.postgres.start();
    restarted = true;
    await until(() => okAfterRestart >= 20, 'registrations after PostgreSQL is back', 60_000);
    stop = true;
    await traffic;

    for (const refusal of refusals) {
      expect(refusal.status, refusal.body).toBe(503);
      expect(Number(refusal.retryAfter), refusal.body).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(refusal.body)).toMatchObject({ error: 'Service Unavailable', description: expect.stringMatching(/PostgreSQL/) });
    }
    // Every acknowledged registration survived, and reads the same through each node.
    for (const { id } of acknowledged) {
      for (const api of nodes) {
        const got = await api.get('fcm', id);
        expect(got.status, `${id} through ${api.baseUrl}`).toBe(200);
        expect(got.body).toMatchObject({ id });
      }
    }
  });

  it('lets a node with an empty data dir join and serve the device API and publishes at once', async () => {
    const cluster = await bed.create({ nodes: 3, apps: [APP], database: 'stateless_join' });
    const [a, b, fresh] = cluster.nodes;
    await Promise.all([a!.start(), b!.start()]);
    const onA = new DeviceApi(a!.baseUrl, INSTANCE);
    const tokens = Array.from({ length: 12 }, (_, k) => fcmToken(`join-${k}`));
    const ids: string[] = [];
    for (const token of tokens) {
      const id = await onA.registerOk('fcm', token);
      expect((await onA.addInterest('fcm', id, 'joined')).status).toBe(200);
      ids.push(id);
    }

    // The new node: same config, its own empty data dir, nothing copied to it.
    await fresh!.start();
    const onFresh = new DeviceApi(fresh!.baseUrl, INSTANCE);
    for (const id of ids) {
      const got = await onFresh.get('fcm', id);
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ id });
    }
    expect(await onFresh.allInterests('fcm', ids[0]!, 10)).toEqual(['joined']);
    const late = await onFresh.registerOk('fcm', fcmToken('join-late'));
    expect((await onFresh.addInterest('fcm', late, 'joined')).status).toBe(200);

    const { publishId } = await beamsSdk(fresh!.port).publishToInterests(['joined'], { fcm: { notification: { title: 'from the new node' } } });
    const everyone = [...tokens, fcmToken('join-late')];
    await until(() => fcmDelivered(publishId).length >= everyone.length, `publish ${publishId} through the new node`, 30_000);
    expect([...fcmDelivered(publishId)].sort()).toEqual([...everyone].sort());
  });
});
