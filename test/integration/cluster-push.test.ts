/**
 * Push on a cluster (issue 23, phase 1): three real Herald nodes with the same config (the same
 * push instance on every node, one private redis-server, one private PostgreSQL), no push
 * lease. Any node serves any device: a device registered through node A is read, changed and
 * deleted through B and C, its interests paged through any node; a publish to interests or to
 * users through any node reaches every device once (the fake gateways count). Driven by raw
 * device-API HTTP (what the mobile SDKs send) and the official Beams server SDK.
 */
import type PushNotifications from '@pusher/push-notifications-server';
import { describe, expect, it } from 'vitest';
import { ONE_PROCESS, type HeraldCluster } from '../helpers/herald-cluster.js';
import { DEFAULT_PUSH } from '../helpers/herald-process.js';
import { pushClusterBed } from '../helpers/push-cluster.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';
import { DeviceApi, fcmToken } from './device-api-helpers.js';

const APP = { id: 'push-cluster-app', key: 'push-cluster-key', secret: 'push-cluster-secret' };
const INSTANCE = DEFAULT_PUSH.instanceId;
const bed = pushClusterBed('push');

let cluster: HeraldCluster;

function api(node: { baseUrl: string }): DeviceApi {
  return new DeviceApi(node.baseUrl, INSTANCE);
}

/** The tokens the fake FCM accepted for one publish (each occurrence, so duplicates show). */
function fcmDelivered(publishId: string): string[] {
  return bed.fakes.deliveredFor(publishId).fcm;
}

function apnsDelivered(publishId: string): string[] {
  return bed.fakes.deliveredFor(publishId).apns;
}

const sorted = (values: string[]) => [...values].sort();

/** Three nodes with the same config: the same instance, the same PostgreSQL (a fresh database per test). */
function startCluster(database: string): Promise<HeraldCluster> {
  return bed.start({ nodes: 3, shards: 2, apps: [APP], database });
}

describe.skipIf(ONE_PROCESS)('push served by every node of a cluster (shared PostgreSQL)', () => {
  it('a device registered through node A is read, updated and deleted through B and C; interests paged through any node', async () => {
    cluster = await startCluster('cluster_push_devices');
    const [a, b, c] = [api(cluster.a), api(cluster.b), api(cluster.c)];
    const id = await a.registerOk('fcm', fcmToken('roaming'), { metadata: { sdkVersion: '1.0.0' } });

    const onB = await b.get('fcm', id);
    expect(onB.status, JSON.stringify(onB.body)).toBe(200);
    const onA = await a.get('fcm', id);
    expect(onB.body).toEqual(onA.body);
    expect(onB.body).toMatchObject({ id, metadata: { sdkVersion: '1.0.0' } });

    expect((await c.setMetadata('fcm', id, { sdkVersion: '2.0.0', androidVersion: '14' })).status).toBe(200);
    expect((await a.get('fcm', id)).body).toMatchObject({ metadata: { sdkVersion: '2.0.0', androidVersion: '14' } });

    const interests = Array.from({ length: 25 }, (_, k) => `topic-${String(k).padStart(2, '0')}`);
    expect((await b.replaceInterests('fcm', id, interests)).status).toBe(200);
    expect((await c.addInterest('fcm', id, 'zz-last')).status).toBe(200);
    expect((await a.removeInterest('fcm', id, 'topic-00')).status).toBe(200);
    const expected = [...interests.slice(1), 'zz-last'];
    for (const node of [a, b, c]) expect(await node.allInterests('fcm', id, 10)).toEqual(expected);
    // A page's cursor from one node continues on another.
    const first = await a.listInterests('fcm', id, '?limit=7');
    const cursor = first.body.responseMetadata.nextCursor as string;
    const second = await c.listInterests('fcm', id, `?limit=7&cursor=${encodeURIComponent(cursor)}`);
    expect([...first.body.interests, ...second.body.interests]).toEqual(expected.slice(0, 14));

    // Re-registration through C keeps the interests (answered as the initial interest set).
    const again = await c.register('fcm', { token: fcmToken('roaming') });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ id, initialInterestSet: expected });

    expect((await c.remove('fcm', id)).status).toBe(200);
    for (const node of [a, b, c]) expect((await node.get('fcm', id)).status).toBe(404);
  }, 120_000);

  it('a publish to interests and to users through any node reaches every device once', async () => {
    cluster = await startCluster('cluster_push_publish');
    const [a, b, c] = [api(cluster.a), api(cluster.b), api(cluster.c)];
    const nodes = [a, b, c];
    const sdks: PushNotifications[] = [beamsSdk(cluster.a.port), beamsSdk(cluster.b.port), beamsSdk(cluster.c.port)];
    const fcmDevices: string[] = [];
    const apnsDevices: string[] = [];
    const userOf = new Map<string, string>();
    for (let k = 0; k < 24; k++) {
      const via = nodes[k % 3]!;
      if (k % 4 === 3) {
        const token = Buffer.from(`apns-cluster-${k}`.padEnd(32, '.')).toString('hex');
        const id = await via.registerOk('apns', token);
        expect((await nodes[(k + 1) % 3]!.replaceInterests('apns', id, ['news', 'sport'])).status).toBe(200);
        apnsDevices.push(token);
      } else {
        const token = fcmToken(`cluster-${k}`);
        const id = await via.registerOk('fcm', token);
        expect((await nodes[(k + 1) % 3]!.replaceInterests('fcm', id, k % 2 ? ['news'] : ['news', 'sport'])).status).toBe(200);
        userOf.set(token, `user-${k % 5}`);
        const { token: jwt } = sdks[(k + 2) % 3]!.generateToken(`user-${k % 5}`);
        expect((await nodes[(k + 2) % 3]!.setUser('fcm', id, jwt)).status).toBe(200);
        fcmDevices.push(token);
      }
    }

    for (const [n, sdk] of sdks.entries()) {
      const { publishId } = await sdk.publishToInterests(['news', 'sport'], {
        fcm: { notification: { title: `interests via node ${n}` } },
        apns: { aps: { alert: { title: `interests via node ${n}`, body: 'news' } } },
      });
      await until(() => fcmDelivered(publishId).length >= fcmDevices.length && apnsDelivered(publishId).length >= apnsDevices.length, `publish ${publishId} via node ${n}`, 30_000);
      expect(sorted(fcmDelivered(publishId))).toEqual(sorted(fcmDevices));
      expect(sorted(apnsDelivered(publishId))).toEqual(sorted(apnsDevices));
    }

    const users = ['user-0', 'user-1', 'user-2', 'user-3', 'user-4'];
    for (const [n, sdk] of sdks.entries()) {
      const { publishId } = await sdk.publishToUsers(users, { fcm: { notification: { title: `users via node ${n}` } } });
      await until(() => fcmDelivered(publishId).length >= fcmDevices.length, `user publish ${publishId} via node ${n}`, 30_000);
      expect(sorted(fcmDelivered(publishId))).toEqual(sorted(fcmDevices));
    }

    // Deleting a user through one node removes its devices for every node.
    await sdks[1]!.deleteUser('user-0');
    const user1 = fcmDevices.filter((token) => userOf.get(token) === 'user-1');
    const { publishId } = await sdks[2]!.publishToUsers(['user-0', 'user-1'], { fcm: { notification: { title: 'after delete' } } });
    await until(() => fcmDelivered(publishId).length >= user1.length, `user publish ${publishId} after delete`, 30_000);
    expect(sorted(fcmDelivered(publishId))).toEqual(sorted(user1));
  }, 180_000);
});
