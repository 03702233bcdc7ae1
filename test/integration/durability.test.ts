/**
 * The engine's kill -9 test: a 200 for a write means it is durable. Writes go to the built
 * server over HTTP; the process is killed with SIGKILL (first after a settled batch, then with
 * writers still in flight), restarted on the same data dir, and everything acknowledged is read
 * back through the device API (D3, D12). The shards' indexes are cross-checked with the
 * debug-only `device.checkConsistency` shard request while the server is down.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { DEFAULT_PUSH, startHerald, type HeraldProcess } from '../helpers/herald-process.js';
import { checkShardConsistency, DeviceApi, tokenFor, userToken, type Platform } from './device-api-helpers.js';
import { until } from '../helpers/wait.js';

const PLATFORMS: Platform[] = ['apns', 'fcm', 'web'];

/** What the test knows a device must (and may) look like after the crash. */
interface Expected {
  platform: Platform;
  id: string;
  /** Acknowledged with 200. */
  interests: Set<string>;
  /** Sent, maybe applied: acknowledged ones plus the one in flight at the kill. */
  mayHaveInterests: Set<string>;
  userId?: string;
  mayHaveUserId?: string;
  metadata?: Record<string, string>;
}

let herald: HeraldProcess | undefined;
afterAll(() => herald?.dispose());

describe('durability under kill -9', () => {
  it('keeps every acknowledged device, interest and user across SIGKILL and restart', async () => {
    herald = await startHerald({ config: { push: [{ ...DEFAULT_PUSH, web: null }] } });
    let api = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
    const expected = new Map<string, Expected>();

    // 1. A settled batch: 45 devices with metadata, interests (D13 then D14) and users, in parallel.
    await Promise.all(
      Array.from({ length: 45 }, async (_, n) => {
        const platform = PLATFORMS[n % 3]!;
        const metadata = { sdkVersion: `9.${n}` };
        const id = await api.registerOk(platform, tokenFor(platform, `settled-${n}`), { metadata });
        const interests = [`batch-${n % 5}`, `device-${n}`];
        expect((await api.replaceInterests(platform, id, interests)).status).toBe(200);
        expect((await api.addInterest(platform, id, 'everyone')).status).toBe(200);
        const device: Expected = { platform, id, interests: new Set([...interests, 'everyone']), mayHaveInterests: new Set(), metadata };
        if (n % 2 === 0) {
          device.userId = `settled-user-${n % 4}`;
          const jwt = await userToken(DEFAULT_PUSH.secretKey, DEFAULT_PUSH.instanceId, { sub: device.userId });
          expect((await api.setUser(platform, id, jwt)).status).toBe(200);
        }
        expected.set(id, device);
      }),
    );

    // 2. Writers still running when the process dies: only what was acknowledged must survive.
    let stop = false;
    const writer = async (w: number) => {
      const jwt = await userToken(DEFAULT_PUSH.secretKey, DEFAULT_PUSH.instanceId, { sub: `writer-${w}` });
      for (let n = 0; !stop; n++) {
        const platform = PLATFORMS[(w + n) % 3]!;
        let device: Expected | undefined;
        try {
          const id = await api.registerOk(platform, tokenFor(platform, `inflight-${w}-${n}`));
          device = { platform, id, interests: new Set(), mayHaveInterests: new Set() };
          expected.set(id, device);
          for (const interest of [`writer-${w}`, `n-${n}`]) {
            device.mayHaveInterests.add(interest);
            if ((await api.addInterest(platform, id, interest)).status === 200) device.interests.add(interest);
          }
          if (n % 3 === 0) {
            device.mayHaveUserId = `writer-${w}`;
            if ((await api.setUser(platform, id, jwt)).status === 200) device.userId = `writer-${w}`;
          }
        } catch {
          return; // the connection died with the server
        }
      }
    };
    const writers = Array.from({ length: 4 }, (_, w) => writer(w));
    const writtenByWriters = (): number => [...expected.values()].filter((d) => d.mayHaveInterests.size > 0).length;
    // The kill comes once the writers are well under way (each one is always in the middle of a write).
    await until(() => writtenByWriters() >= 12, () => `the writers to write (devices so far: ${writtenByWriters()})`, 15_000);
    expect(await herald.kill9()).toBeNull();
    stop = true;
    await Promise.all(writers);
    expect(writtenByWriters()).toBeGreaterThan(4); // the writers really were writing when the process died

    // 3. Indexes agree with the records on every shard.
    expect(await checkShardConsistency(herald.dataDir)).toEqual([]);

    // 4. Restart and read everything back through the API.
    await herald.restart();
    api = new DeviceApi(herald.baseUrl, DEFAULT_PUSH.instanceId);
    await Promise.all(
      [...expected.values()].map(async (device) => {
        const got = await api.get(device.platform, device.id);
        expect(got.status, device.id).toBe(200);
        if (device.userId !== undefined) expect(got.body.userId).toBe(device.userId);
        else expect(['', device.mayHaveUserId ?? '']).toContain(got.body.userId);
        if (device.metadata) expect(got.body.metadata).toEqual(device.metadata);
        const interests = await api.allInterests(device.platform, device.id);
        for (const name of device.interests) expect(interests, device.id).toContain(name);
        for (const name of interests) expect(device.interests.has(name) || device.mayHaveInterests.has(name), `${device.id} ${name}`).toBe(true);
      }),
    );
  }, 45_000);
});
