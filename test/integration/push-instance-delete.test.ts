/**
 * Deleting a push instance removes its records: after `DELETE /admin/v1/push/<id>` (or the
 * instance gone from the config file on reload), an instance created again with the same id
 * sees none of the old devices (GET 404), a publish to the old interest or user reaches none of
 * the old tokens, and once the background purge is done no shard keeps a record of the old
 * instance (its devices, interests, users, publishes, usage and reports). The deletion is
 * durable before it is answered: a kill -9 right after it, mid-purge or not, brings nothing back.
 * The purge removes PURGE_BATCH (500) records per transaction: the devices here (300, each with
 * two interests and most with a user) are well over one batch per shard. The purged publish
 * records no longer count in herald_push_publish_records_bytes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { readFileSync } from 'node:fs';
import { TEST_CA_FILE } from '../fakes/tls.js';
import { startFakeGateways, type FakeGateways } from '../helpers/fake-gateways.js';
import { REPO_ROOT, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { parsePrometheus, series } from '../helpers/prometheus-text.js';
import { beamsSdk } from '../helpers/sdk-clients.js';
import { until } from '../helpers/wait.js';
import { DeviceApi, fcmToken, userToken } from './device-api-helpers.js';

const TOKEN = 'push-delete-admin-token-0123456789';
const INSTANCE = '3f6c2a1e-8b4d-4e7a-9c2b-1d0e5f6a7b8c';
const DEVICES = 300;
const SHARDS = 2;

let fakes: FakeGateways;
const started: HeraldProcess[] = [];

beforeAll(async () => {
  fakes = await startFakeGateways();
});

afterAll(async () => {
  for (const herald of started) await herald.dispose();
  await fakes?.stop();
});

function admin(herald: HeraldProcess, path: string, init: { method?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${herald.baseUrl}/admin/v1${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: `Bearer ${TOKEN}`, ...(init.body !== undefined && { 'content-type': 'application/json' }) },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
  });
}

async function createInstance(herald: HeraldProcess): Promise<string> {
  const res = await admin(herald, '/push', { method: 'POST', body: { ...fakes.apiInstanceConfig(), instanceId: INSTANCE } });
  expect(res.status, await res.clone().text()).toBe(201);
  return ((await res.json()) as { secretKey: string }).secretKey;
}

/** Registers DEVICES fcm devices with interests `news` and `sports`, all but every tenth with user `alice`; answers their ids and tokens. */
async function registerOldDevices(herald: HeraldProcess, secretKey: string, tag: string): Promise<{ ids: string[]; tokens: string[] }> {
  const api = new DeviceApi(herald.baseUrl, INSTANCE);
  const jwt = await userToken(secretKey, INSTANCE, { sub: 'alice' });
  const ids: string[] = [];
  const tokens: string[] = [];
  for (let start = 0; start < DEVICES; start += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, DEVICES - start) }, async (_, k) => {
        const i = start + k;
        const token = fcmToken(`${tag}-old-${i}`);
        const id = await api.registerOk('fcm', token);
        expect((await api.replaceInterests('fcm', id, ['news', 'sports'])).status).toBe(200);
        // At most 100 devices per user: a third of them get alice.
        if (i % 3 === 0) expect((await api.setUser('fcm', id, jwt)).status).toBe(200);
        ids.push(id);
        tokens.push(token);
      }),
    );
  }
  return { ids, tokens };
}

async function purgesPending(herald: HeraldProcess): Promise<number> {
  const text = await (await fetch(`${herald.baseUrl}/metrics`)).text();
  const metrics = parsePrometheus(text);
  expect([...metrics.keys()].some((k) => k.startsWith('herald_push_purges_pending')), 'herald_push_purges_pending in /metrics').toBe(true);
  return series(metrics, 'herald_push_purges_pending');
}

async function recordBytes(herald: HeraldProcess): Promise<number> {
  const metrics = parsePrometheus(await (await fetch(`${herald.baseUrl}/metrics`)).text());
  expect([...metrics.keys()].some((k) => k.startsWith('herald_push_publish_records_bytes')), 'herald_push_publish_records_bytes in /metrics').toBe(true);
  return series(metrics, 'herald_push_publish_records_bytes');
}

/** Publishes to `news` and to `alice` with the new instance's key; answers every fcm token the two reached once both finished. */
async function publishToOldTargets(herald: HeraldProcess, secretKey: string, newToken: string): Promise<string[]> {
  const sdk = beamsSdk(herald.port, INSTANCE, secretKey);
  const byInterest = await sdk.publishToInterests(['news'], { fcm: { notification: { title: 'new tenant' } } });
  const byUser = await sdk.publishToUsers(['alice'], { fcm: { notification: { title: 'new tenant' } } });
  for (const { publishId } of [byInterest, byUser]) {
    await until(async () => {
      const res = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, { headers: { authorization: `Bearer ${secretKey}` } });
      return res.status === 200 && ((await res.json()) as { state?: string }).state === 'finished';
    }, `publish ${publishId} finished`, 30_000);
  }
  await until(() => fakes.deliveredFor(byInterest.publishId).fcm.includes(newToken), 'the new device reached', 30_000);
  return [...fakes.deliveredFor(byInterest.publishId).fcm, ...fakes.deliveredFor(byUser.publishId).fcm];
}

/**
 * The keys of every push database of each shard of a stopped server whose first part is the
 * instance id or one of its namespaces (`<id>/...`), by namespace; plus the publish records
 * and usage counts of them and the purges still recorded.
 */
async function recordsOf(dataDir: string, instanceId: string): Promise<{ byNamespace: Record<string, number>; purges: number }> {
  const dist = (path: string) => pathToFileURL(join(REPO_ROOT, 'dist/src', path)).href;
  const { openShardDatabase } = (await import(dist('shards/storage.js'))) as typeof import('../../src/shards/storage.js');
  const { decodeKey } = (await import(dist('push/keys.js'))) as typeof import('../../src/push/keys.js');
  const identity = JSON.parse(readFileSync(join(dataDir, 'herald.json'), 'utf8')) as { shards: number };
  const byNamespace: Record<string, number> = {};
  let purges = 0;
  const ours = (part: string | undefined) => part !== undefined && (part === instanceId || part.startsWith(`${instanceId}/`));
  const count = (namespace: string) => (byNamespace[namespace] = (byNamespace[namespace] ?? 0) + 1);
  for (let shard = 0; shard < identity.shards; shard++) {
    const root = openShardDatabase(join(dataDir, `shard-${shard}`));
    try {
      for (const name of ['push/devices', 'push/interests', 'push/device-interests', 'push/users', 'push/reports', 'push/report-counts']) {
        const db = root.openDB<unknown, Uint8Array>(name, { keyEncoding: 'binary', encoding: 'binary' });
        for (const key of db.getKeys()) {
          const first = decodeKey(key)[0];
          if (ours(first)) count(first!);
        }
      }
      const publish = root.openDB<unknown, Uint8Array>('push/publish', { keyEncoding: 'binary', encoding: 'msgpack' });
      for (const { key, value } of publish.getRange()) {
        const parts = decodeKey(key);
        if (parts[0] === 'usage' && ours(parts[1])) count(parts[1]!);
        const owner = (value as { instanceId?: string } | undefined)?.instanceId;
        if (parts[0] === 'progress' && ours(owner)) count(owner!);
      }
      const namespaces = root.openDB<unknown, Uint8Array>('push/namespaces', { keyEncoding: 'binary', encoding: 'msgpack' });
      for (const key of namespaces.getKeys()) if (decodeKey(key)[0] === 'purge') purges++;
    } finally {
      await root.close();
    }
  }
  return { byNamespace, purges };
}


/**
 * Once the purge is done, stops the server and reads its shards: no purge left, and only the
 * new instance's records, under one namespace that is not the old one (the instance id).
 */
async function expectOnlyTheNewNamespace(herald: HeraldProcess, what: string): Promise<void> {
  await until(async () => (await purgesPending(herald)) === 0, what, 30_000);
  await herald.stop();
  const { byNamespace, purges } = await recordsOf(herald.dataDir, INSTANCE);
  expect(purges).toBe(0);
  expect(Object.keys(byNamespace)).toHaveLength(1);
  expect(byNamespace[INSTANCE]).toBeUndefined();
}

describe('deleting a push instance removes its records (one node, LMDB)', () => {
  it('an instance created again with the same id sees none of the old devices, interests or users, and the purge leaves nothing', async () => {
    const herald = await startHerald({ shards: SHARDS, config: { admin: { token: TOKEN }, push: [] }, env: { NODE_EXTRA_CA_CERTS: TEST_CA_FILE } });
    started.push(herald);
    const oldKey = await createInstance(herald);
    const old = await registerOldDevices(herald, oldKey, 'api');
    // The old instance publishes too: its publish records, usage and reports must go as well.
    const oldPublish = await beamsSdk(herald.port, INSTANCE, oldKey).publishToInterests(['news'], { fcm: { notification: { title: 'old tenant' } } });
    await until(() => fakes.deliveredFor(oldPublish.publishId).fcm.length === DEVICES, 'the old publish delivered', 30_000);
    const report = await fetch(`${herald.baseUrl}/reporting_api/v2/instances/${INSTANCE}/events`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ event: 'Delivery', deviceId: old.ids[0], publishId: oldPublish.publishId, timestampSecs: Math.floor(Date.now() / 1000) }),
    });
    expect(report.status, await report.clone().text()).toBeLessThan(300);

    expect((await admin(herald, `/push/${INSTANCE}`, { method: 'DELETE' })).status).toBe(204);
    const newKey = await createInstance(herald);

    // At once, whether or not the purge has finished: the old devices are unknown to the new instance.
    const api = new DeviceApi(herald.baseUrl, INSTANCE);
    for (const id of old.ids.slice(0, 20)) expect((await api.get('fcm', id)).status, `old device ${id}`).toBe(404);
    const oldStats = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${oldPublish.publishId}`, { headers: { authorization: `Bearer ${newKey}` } });
    expect(oldStats.status).toBe(404);

    // The new instance's publishes to the old interest and user reach its own device only.
    const newToken = fcmToken('api-new-0');
    const newId = await api.registerOk('fcm', newToken);
    expect((await api.replaceInterests('fcm', newId, ['news'])).status).toBe(200);
    const reached = await publishToOldTargets(herald, newKey, newToken);
    expect(reached).toEqual([newToken]);

    await expectOnlyTheNewNamespace(herald, 'the purge finished');
  }, 180_000);

  it('a deletion answered survives kill -9 at once: after the restart the old devices stay gone and the purge finishes', async () => {
    const herald = await startHerald({ shards: SHARDS, config: { admin: { token: TOKEN }, push: [] }, env: { NODE_EXTRA_CA_CERTS: TEST_CA_FILE } });
    started.push(herald);
    const oldKey = await createInstance(herald);
    const old = await registerOldDevices(herald, oldKey, 'kill');
    expect((await admin(herald, `/push/${INSTANCE}`, { method: 'DELETE' })).status).toBe(204);
    // Killed right after the answer: the purge is under way or not begun.
    await herald.kill9();
    // On a port of its own: the killed server's keep-alive connections (hundreds of device
    // requests) linger on the old port in FIN_WAIT until the kernel times them out.
    herald.port = 0;
    await herald.start();

    const newKey = await createInstance(herald);
    const api = new DeviceApi(herald.baseUrl, INSTANCE);
    for (const id of old.ids.slice(0, 20)) expect((await api.get('fcm', id)).status, `old device ${id}`).toBe(404);
    const newToken = fcmToken('kill-new-0');
    const newId = await api.registerOk('fcm', newToken);
    expect((await api.replaceInterests('fcm', newId, ['news'])).status).toBe(200);
    expect(await publishToOldTargets(herald, newKey, newToken)).toEqual([newToken]);

    await expectOnlyTheNewNamespace(herald, 'the purge finished after the restart');
  }, 180_000);

  it('the purge takes the deleted instance\'s finished publishes out of herald_push_publish_records_bytes', async () => {
    const herald = await startHerald({ shards: SHARDS, config: { admin: { token: TOKEN }, push: [] }, env: { NODE_EXTRA_CA_CERTS: TEST_CA_FILE } });
    started.push(herald);
    const key = await createInstance(herald);
    const api = new DeviceApi(herald.baseUrl, INSTANCE);
    const id = await api.registerOk('fcm', fcmToken('bytes-0'));
    expect((await api.replaceInterests('fcm', id, ['news'])).status).toBe(200);
    const sdk = beamsSdk(herald.port, INSTANCE, key);
    for (let i = 0; i < 3; i++) {
      const { publishId } = await sdk.publishToInterests(['news'], { fcm: { notification: { title: `counted ${i}` } } });
      await until(async () => {
        const res = await fetch(`${herald.baseUrl}/publish_api/v1/instances/${INSTANCE}/publishes/${publishId}`, { headers: { authorization: `Bearer ${key}` } });
        return res.status === 200 && ((await res.json()) as { state?: string }).state === 'finished';
      }, `publish ${publishId} finished`, 30_000);
    }
    await until(async () => (await recordBytes(herald)) > 0, 'the finished publishes counted in herald_push_publish_records_bytes', 30_000);

    expect((await admin(herald, `/push/${INSTANCE}`, { method: 'DELETE' })).status).toBe(204);
    await until(async () => (await purgesPending(herald)) === 0, 'the purge finished', 30_000);
    expect(await recordBytes(herald)).toBe(0);
  }, 120_000);

  it('a push instance removed from the config file on reload: the same id added back sees none of its devices', async () => {
    const file = (push: unknown[]) => ({ admin: { token: TOKEN }, push });
    const instance = { ...fakes.instanceConfig(), instanceId: INSTANCE, secretKey: 'file-secret-key-0123456789' };
    const herald = await startHerald({ shards: SHARDS, config: file([instance]) });
    started.push(herald);
    const old = await registerOldDevices(herald, instance.secretKey, 'file');

    herald.writeConfig(file([]));
    herald.signal('SIGHUP');
    const api = new DeviceApi(herald.baseUrl, INSTANCE);
    await until(async () => (await api.get('fcm', old.ids[0]!)).status === 404, 'the instance gone after the reload', 15_000);

    herald.writeConfig(file([instance]));
    herald.signal('SIGHUP');
    const newToken = fcmToken('file-new-0');
    const newId = await until(async () => {
      const res = await api.register('fcm', { token: newToken });
      return res.status === 200 && (res.body.id as string);
    }, 'the instance back after the reload', 15_000);
    for (const id of old.ids.slice(0, 20)) expect((await api.get('fcm', id)).status, `old device ${id}`).toBe(404);
    expect((await api.replaceInterests('fcm', newId, ['news'])).status).toBe(200);
    expect(await publishToOldTargets(herald, instance.secretKey, newToken)).toEqual([newToken]);
  }, 180_000);
});
