/**
 * Stateless push nodes (real processes: Herald nodes with the same config, one private
 * redis-server, one private PostgreSQL):
 * - PostgreSQL restarted during device-API traffic: while it is away the device API answers
 *   503 PUSH_STORE_UNAVAILABLE with Retry-After (what the Beams SDKs retry on), never another
 *   failure; once it is back every registration that was acknowledged (200) is there, through
 *   every node.
 * - PostgreSQL frozen (SIGSTOP of its postmaster and every backend: connections open, nothing
 *   answers, as behind a partition that drops packets): device-API writes and reads and
 *   publishes answer 503 PUSH_STORE_UNAVAILABLE with Retry-After within seconds, whether they
 *   find the pool's open connections or must open new ones; once it goes on, everything
 *   acknowledged is there, a refused registration retried answers the same device, and a
 *   refused publish is never sent.
 * - A node started with an empty data dir joins a running cluster and at once serves the
 *   device API for devices registered elsewhere and publishes to them.
 */
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH } from '../helpers/herald-process.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { sleep, until } from '../helpers/wait.js';
import { call, DeviceApi, fcmToken, type ApiResponse } from './device-api-helpers.js';

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

  it('answers 503 PUSH_STORE_UNAVAILABLE with Retry-After within seconds while PostgreSQL is frozen, and loses or sends nothing it refused', async () => {
    const cluster = await bed.start({ nodes: 1, apps: [APP], database: 'stateless_frozen' });
    const node = cluster.nodes[0]!;
    const api = new DeviceApi(node.baseUrl, INSTANCE);
    const interest = 'frozen';
    const tokens = Array.from({ length: 6 }, (_, k) => fcmToken(`frozen-${k}`));
    const ids: string[] = [];
    for (const token of tokens) {
      const id = await api.registerOk('fcm', token);
      expect((await api.addInterest('fcm', id, interest)).status).toBe(200);
      ids.push(id);
    }
    const before = await beamsSdk(node.port).publishToInterests([interest], { fcm: { notification: { title: 'before' } } });
    await until(() => fcmDelivered(before.publishId).length === tokens.length, 'the publish before the freeze');

    const publish = (): Promise<ApiResponse> =>
      call(node.baseUrl, 'POST', `/publish_api/v1/instances/${INSTANCE}/publishes/interests`, {
        headers: { authorization: `Bearer ${DEFAULT_PUSH.secretKey}` },
        body: { interests: [interest], fcm: { notification: { title: 'refused' } } },
      });
    const refusedTokens: string[] = [];
    bed.postgres.pause();
    try {
      // The first round finds the pool's open connections, which never answer (the query
      // bound); the second needs new connections, which never open (the connect bound).
      for (const round of [1, 2]) {
        const token = fcmToken(`frozen-during-${round}`);
        refusedTokens.push(token);
        const requests: [string, () => Promise<ApiResponse>][] = [
          ['register', () => api.register('fcm', { token })],
          ['add interest', () => api.addInterest('fcm', ids[round]!, `${interest}-${round}`)],
          ['read', () => api.get('fcm', ids[0]!)],
          ['publish', publish],
        ];
        const answers = await Promise.all(
          requests.map(async ([what, request]) => {
            const started = Date.now();
            const res = await request();
            return { what, res, ms: Date.now() - started };
          }),
        );
        for (const { what, res, ms } of answers) {
          const label = `${what}, round ${round}: ${res.status} after ${ms} ms ${JSON.stringify(res.body)}`;
          expect(res.status, label).toBe(503);
          expect(Number(res.headers.get('retry-after')), label).toBeGreaterThanOrEqual(1);
          expect(res.body, label).toMatchObject({ error: 'Service Unavailable', description: expect.stringMatching(/PostgreSQL/) });
          // A correctness bound (within seconds, not the shard request timeout), not a measurement.
          expect(ms, label).toBeLessThan(8_000);
        }
      }
    } finally {
      bed.postgres.resume();
    }

    // Service resumes: the refused registrations, retried as an SDK does, answer the same
    // device each time (the id derives from the token), and the refused interests apply.
    const retriedIds: string[] = [];
    for (const token of refusedTokens) {
      const res = await until(async () => {
        const r = await api.register('fcm', { token });
        return r.status === 200 && r;
      }, `registration of ${token} after PostgreSQL goes on`, 30_000);
      retriedIds.push(res.body.id as string);
      expect((await api.register('fcm', { token })).body).toMatchObject({ id: res.body.id });
    }
    expect(new Set(retriedIds).size).toBe(refusedTokens.length);
    for (const round of [1, 2]) expect((await api.addInterest('fcm', ids[round]!, `${interest}-${round}`)).status).toBe(200);
    // Everything acknowledged before the freeze is there.
    for (const [k, id] of ids.entries()) {
      expect((await api.get('fcm', id)).status).toBe(200);
      const refusedInterest = k === 1 || k === 2 ? [`${interest}-${k}`] : [];
      expect(await api.allInterests('fcm', id)).toEqual([interest, ...refusedInterest]);
    }
    // A publish accepted now reaches every device once; the refused ones (stored before it,
    // had they been) were never sent: each device got exactly the two publishes acknowledged.
    const after = await beamsSdk(node.port).publishToInterests([interest], { fcm: { notification: { title: 'after' } } });
    await until(() => fcmDelivered(after.publishId).length === tokens.length, 'the publish after the freeze', 30_000);
    for (const token of tokens) {
      expect(bed.fakes.fcm.delivered.filter((r) => r.token === token).length, token).toBe(2);
    }
  }, 120_000);

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
