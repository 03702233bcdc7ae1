import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { open } from 'lmdb';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { benchDevice } from '../../../bench/push/dataset.js';
import { BulkDeviceWriter, type NewDevice } from '../../../bench/push/seed-bulk.js';
import { deviceIdFor } from '../../../src/push/http/devices/device-id.js';
import { LmdbDevices, openShardStore } from '../../../src/push/shard/devices/lmdb-devices.js';

const INSTANCE = 'bench-instance';
const SECRET = '00'.repeat(32);
const CREATED_AT = Date.UTC(2026, 10, 23, 5, 0, 0);

const tempDirs: string[] = [];

afterEach(() => {
  vi.useRealTimers();
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempShard(): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-seed-bulk-'));
  tempDirs.push(dir);
  return join(dir, 'shard-0');
}

/** 2,000 dataset devices in id order (as the seeder writes them), then odd ones: no options, duplicate and escaped names, no interests. */
function devices(): NewDevice[] {
  const dataset = Array.from({ length: 2000 }, (_, i) => {
    const device = benchDevice(i);
    return { ...device, id: deviceIdFor(SECRET, INSTANCE, device.platform, device.token) };
  }).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return [
    ...dataset,
    { id: 'web-plain', platform: 'web', token: '{"endpoint":"https://push.example/ü"}', interests: ['b', 'a', 'b'] },
    { id: 'z-\u0000-\u0001-日本', platform: 'fcm', token: 't', metadata: {}, interests: ['x=1', '@home'] },
    { id: 'z-none', platform: 'apns', token: 'ab'.repeat(32), bundleIdentifier: 'com.x', interests: [] },
  ];
}

/** Every named database of the environment at `path`: name → [key, value] pairs as hex, in key order. */
async function dump(path: string): Promise<Map<string, [string, string][]>> {
  const env = open<Buffer, Buffer>({ path, keyEncoding: 'binary', encoding: 'binary', readOnly: true });
  try {
    // lmdb-js stores a database's name with a trailing NUL.
    const names = Array.from(env.getKeys(), (key) => Buffer.from(key).toString('utf8').replace(/\0$/, ''));
    const out = new Map<string, [string, string][]>();
    for (const name of names) {
      const db = env.openDB<Buffer, Buffer>(name, { keyEncoding: 'binary', encoding: 'binary' });
      out.set(name, Array.from(db.getRange(), ({ key, value }) => [Buffer.from(key).toString('hex'), Buffer.from(value).toString('hex')]));
    }
    return out;
  } finally {
    await env.close();
  }
}

describe('seeder bulk path', () => {
  it('stores exactly what LmdbDevices.register and replaceInterests store', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: CREATED_AT });
    const list = devices();

    const viaStore = tempShard();
    const storeRoot = openShardStore(viaStore);
    const store = new LmdbDevices(storeRoot);
    // As the seeder did before: the store's own child transactions, nested in batches.
    for (let start = 0; start < list.length; start += 500) {
      storeRoot.transactionSync(() => {
        for (const device of list.slice(start, start + 500)) {
          void store.register({ instanceId: INSTANCE, deviceId: device.id, platform: device.platform, token: device.token, bundleIdentifier: device.bundleIdentifier, metadata: device.metadata });
          void store.replaceInterests(INSTANCE, device.id, device.interests);
        }
      });
    }
    expect(store.checkConsistency()).toEqual([]);
    await storeRoot.close();

    const viaBulk = tempShard();
    const bulkRoot = openShardStore(viaBulk);
    const writer = new BulkDeviceWriter(bulkRoot);
    for (let start = 0; start < list.length; start += 500) writer.writeNew(INSTANCE, list.slice(start, start + 500));
    expect(new LmdbDevices(bulkRoot).checkConsistency()).toEqual([]);
    await bulkRoot.close();

    const expected = await dump(viaStore);
    const actual = await dump(viaBulk);
    expect([...expected.keys()].sort()).toEqual(['push/device-interests', 'push/devices', 'push/interests', 'push/users']);
    expect(expected.get('push/devices')).toHaveLength(list.length);
    expect([...actual.keys()].sort()).toEqual([...expected.keys()].sort());
    for (const [name, entries] of expected) expect(actual.get(name), name).toEqual(entries);
  });

  it('refuses a device that exists already, writing nothing of its batch', async () => {
    const root = openShardStore(tempShard());
    const writer = new BulkDeviceWriter(root);
    const [first, second] = devices();
    writer.writeNew(INSTANCE, [first!]);
    expect(() => writer.writeNew(INSTANCE, [second!, first!])).toThrow(/exists already/);
    expect(new LmdbDevices(root).counts(INSTANCE).devices).toBe(1);
    await root.close();
  });
});
