/**
 * The contract every push device store passes (one suite, every implementation): run against
 * the LMDB shard store (lmdb-device-store.test.ts) and PostgreSQL (postgres-device-store.test.ts).
 * `open(n)` gives the stores of the n shards of one node on a fresh, empty state; tests write
 * each device through the store of its shard (deviceShardFor), as the main thread routes them,
 * and ask the per-shard questions (scans, counts, a user's devices) of every shard.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { encodeInterestCursor } from '../../../../src/push/shard/devices/cursor.js';
import { inScanPartition, partitionBounds, type PushDeviceStore, type ScanDevice, type ScanPartition, type ScanPosition, type ScanSteps } from '../../../../src/push/store/device-store.js';
import { MAX_INTERESTS_PER_DEVICE } from '../../../../src/push/interest-name.js';
import { deviceShardFor, fnv1a32 } from '../../../../src/shards/hash.js';

export interface DeviceStoreHarness {
  stores: PushDeviceStore[];
  close(): Promise<void>;
  /** Which shard's per-shard questions include a device; default deviceShardFor (where the main thread routes it). */
  scopeOf?: (deviceId: string, shardCount: number) => number;
  /**
   * One store shared by every shard (PostgreSQL): a scan given a partition answers for the whole
   * partition whichever shard asks, as a cluster publish's partitions are claimed by any shard.
   * Otherwise (LMDB) a shard answers for the partition's devices it holds.
   */
  sharedPartitions?: boolean;
}

const I = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const OTHER = '1f0e2d3c-4b5a-4978-8695-a4b3c2d1e0f9';

/** Every device step of a scan (progress steps left out), with its position. */
async function drain(scan: ScanSteps): Promise<{ id: string; position: ScanPosition }[]> {
  const out: { id: string; position: ScanPosition }[] = [];
  for (;;) {
    const step = scan.next();
    const next = step instanceof Promise ? await step : step;
    if (next.done) return out;
    if (next.value.device !== null) out.push({ id: next.value.device.id, position: next.value.position });
  }
}

/** What a scan hands a gateway send for each device (nothing else the store may add). */
async function sent(scan: ScanSteps): Promise<Omit<ScanDevice, 'instanceId'>[]> {
  const out: Omit<ScanDevice, 'instanceId'>[] = [];
  for (;;) {
    const step = scan.next();
    const next = step instanceof Promise ? await step : step;
    if (next.done) return out;
    const device = next.value.device;
    if (device !== null) out.push({ id: device.id, platform: device.platform, token: device.token, bundleIdentifier: device.bundleIdentifier, userId: device.userId });
  }
}

export function deviceStoreContract(name: string, open: (shardCount: number) => Promise<DeviceStoreHarness>): void {
  describe(`push device store contract: ${name}`, () => {
    let h: DeviceStoreHarness | undefined;
    afterEach(async () => {
      await h?.close();
      h = undefined;
    });

    async function shards(n: number): Promise<{ all: PushDeviceStore[]; at: (deviceId: string) => PushDeviceStore; scope: (deviceId: string) => number }> {
      h = await open(n);
      for (const store of h.stores) await store.ready();
      const all = h.stores;
      const scopeOf = h.scopeOf ?? deviceShardFor;
      return { all, at: (deviceId) => all[deviceShardFor(deviceId, n)]!, scope: (deviceId) => scopeOf(deviceId, n) };
    }

    it('registers, reads, and re-registers a device: interests kept, user dropped, unspecified fields kept', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      expect(await s.get(I, 'd1')).toBeUndefined();
      expect(await s.register({ instanceId: I, deviceId: 'd1', platform: 'apns', token: 'tok1', bundleIdentifier: 'com.example', metadata: { sdk: '1', os: 'ios' } })).toEqual({ id: 'd1', initialInterestSet: [], created: true });
      const first = await s.get(I, 'd1');
      expect(first).toMatchObject({ id: 'd1', instanceId: I, platform: 'apns', token: 'tok1', bundleIdentifier: 'com.example', metadata: { sdk: '1', os: 'ios' }, interestCount: 0 });
      expect(Object.keys(first!.metadata!)).toEqual(['sdk', 'os']);
      expect(first!.userId).toBeUndefined();
      expect(typeof first!.createdAt).toBe('number');
      await s.addInterest(I, 'd1', 'b');
      await s.addInterest(I, 'd1', 'a');
      expect(await s.setUser(I, 'd1', 'alice')).toBe('ok');
      expect(await s.register({ instanceId: I, deviceId: 'd1', platform: 'apns', token: 'tok2' })).toEqual({ id: 'd1', initialInterestSet: ['a', 'b'], created: false });
      const again = await s.get(I, 'd1');
      expect(again).toMatchObject({ token: 'tok2', bundleIdentifier: 'com.example', metadata: { sdk: '1', os: 'ios' }, interestCount: 2, createdAt: first!.createdAt });
      expect(again!.userId).toBeUndefined();
      expect(await s.countUserDevices(I, 'alice')).toBe(0);
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok3', metadata: { sdk: '2' } });
      expect(await s.get(I, 'd1')).toMatchObject({ platform: 'fcm', token: 'tok3', metadata: { sdk: '2' } });
      expect(await s.checkConsistency(I)).toEqual([]);
    });

    it('answers registrations in flight at once as it would one at a time, the same device twice included', async () => {
      const { at } = await shards(1);
      const s = at('old');
      await s.register({ instanceId: I, deviceId: 'old', platform: 'fcm', token: 'tok0' });
      await s.replaceInterests(I, 'old', ['x', 'y']);
      const fresh = Array.from({ length: 40 }, (_, k) => `new-${k}`);
      const answers = await Promise.all([
        s.register({ instanceId: I, deviceId: 'twice', platform: 'fcm', token: 'tok1' }),
        ...fresh.map((id) => s.register({ instanceId: I, deviceId: id, platform: 'apns', token: `tok-${id}`, bundleIdentifier: 'com.example', metadata: { n: id } })),
        s.register({ instanceId: I, deviceId: 'old', platform: 'fcm', token: 'tok2' }),
        s.register({ instanceId: I, deviceId: 'twice', platform: 'web', token: 'tok3' }),
        s.register({ instanceId: OTHER, deviceId: 'old', platform: 'fcm', token: 'tok4' }),
      ]);
      expect(answers[0]).toEqual({ id: 'twice', initialInterestSet: [], created: true });
      for (const [k, id] of fresh.entries()) expect(answers[k + 1]).toEqual({ id, initialInterestSet: [], created: true });
      expect(answers.slice(-3)).toEqual([
        { id: 'old', initialInterestSet: ['x', 'y'], created: false },
        { id: 'twice', initialInterestSet: [], created: false },
        { id: 'old', initialInterestSet: [], created: true },
      ]);
      expect(await s.get(I, 'twice')).toMatchObject({ platform: 'web', token: 'tok3' });
      expect(await s.get(I, 'new-7')).toMatchObject({ platform: 'apns', token: 'tok-new-7', bundleIdentifier: 'com.example', metadata: { n: 'new-7' } });
      expect(await s.checkConsistency()).toEqual([]);
    });

    it('keeps instances apart', async () => {
      const { at } = await shards(1);
      await at('d1').register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      expect(await at('d1').get(OTHER, 'd1')).toBeUndefined();
      expect(await at('d1').delete(OTHER, 'd1')).toBe(false);
      expect(await at('d1').addInterest(OTHER, 'd1', 'a')).toBe('not-found');
      expect(await at('d1').get(I, 'd1')).toBeDefined();
    });

    it('deletes a device with its interests and user; deleteIfToken only while the token matches', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      await s.addInterest(I, 'd1', 'news');
      await s.setUser(I, 'd1', 'bob');
      expect(await s.deleteIfToken(I, 'd1', 'other-token')).toBe(false);
      expect(await s.get(I, 'd1')).toBeDefined();
      expect(await s.deleteIfToken(I, 'd1', 'tok')).toBe(true);
      expect(await s.get(I, 'd1')).toBeUndefined();
      expect(await s.delete(I, 'd1')).toBe(false);
      expect(await s.countUserDevices(I, 'bob')).toBe(0);
      expect(await drain(s.scanInterestSteps(I, ['news']))).toEqual([]);
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      expect(await s.delete(I, 'd1')).toBe(true);
      expect(await s.checkConsistency()).toEqual([]);
    });

    it('replaces metadata and token; false for an unknown device', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      expect(await s.setMetadata(I, 'd1', { a: '1' })).toBe(false);
      expect(await s.setToken(I, 'd1', 't')).toBe(false);
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'web', token: 'tok', metadata: { old: 'x' } });
      expect(await s.setMetadata(I, 'd1', { z: '1', a: '2' })).toBe(true);
      expect(await s.setToken(I, 'd1', 'new-token')).toBe(true);
      const device = await s.get(I, 'd1');
      expect(device).toMatchObject({ token: 'new-token', metadata: { z: '1', a: '2' } });
      expect(Object.keys(device!.metadata!)).toEqual(['z', 'a']);
    });

    it('scans a device as it is now, whatever changed since it joined the interest: token, platform, bundle, user', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'apns', token: 'tok1', bundleIdentifier: 'com.example' });
      await s.register({ instanceId: I, deviceId: 'd2', platform: 'web', token: 'tok-d2' });
      await s.addInterest(I, 'd1', 'early');
      await s.addInterest(I, 'd2', 'early');
      const d2 = { id: 'd2', platform: 'web', token: 'tok-d2', bundleIdentifier: undefined, userId: undefined };
      const d1 = { id: 'd1', platform: 'apns', token: 'tok2', bundleIdentifier: 'com.example', userId: undefined as string | undefined };
      const scanned = async (interest: string) => (await sent(s.scanInterestSteps(I, [interest]))).sort((a, b) => (a.id < b.id ? -1 : 1));

      expect(await s.setToken(I, 'd1', 'tok2')).toBe(true);
      expect(await scanned('early')).toEqual([d1, d2]);
      expect(await s.setUser(I, 'd1', 'alice')).toBe('ok');
      expect(await scanned('early')).toEqual([{ ...d1, userId: 'alice' }, d2]);
      // Re-registered: new platform and token, bundle kept (none given), user dropped.
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok3', metadata: { sdk: '2' } });
      Object.assign(d1, { platform: 'fcm', token: 'tok3' });
      expect(await scanned('early')).toEqual([d1, d2]);
      expect(await s.setUserWithinLimit(I, 'd1', 'bob', 0, 10)).toBe('ok');
      d1.userId = 'bob';
      expect(await scanned('early')).toEqual([d1, d2]);
      // Interests joined later carry the same, however they were joined.
      expect(await s.replaceInterests(I, 'd1', ['early', 'late'])).toBe('ok');
      expect(await s.addInterest(I, 'd1', 'added')).toBe('added');
      for (const interest of ['late', 'added']) expect(await scanned(interest)).toEqual([d1]);
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'apns', token: 'tok4', bundleIdentifier: 'com.other' });
      Object.assign(d1, { platform: 'apns', token: 'tok4', bundleIdentifier: 'com.other', userId: undefined });
      for (const interest of ['early', 'late', 'added']) expect(await scanned(interest)).toEqual(interest === 'early' ? [d1, d2] : [d1]);
      expect(await sent(s.scanInterestSteps(I, ['added', 'early', 'late']))).toHaveLength(2);
      expect(await s.checkConsistency()).toEqual([]);
      expect(await s.deleteIfToken(I, 'd1', 'tok4')).toBe(true);
      for (const interest of ['early', 'late', 'added']) expect(await scanned(interest)).toEqual(interest === 'early' ? [d2] : []);
    });

    it('associates a user once: ok again for the same user, already-associated for another, not-found for no device', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      expect(await s.setUser(I, 'd1', 'alice')).toBe('not-found');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      expect(await s.setUser(I, 'd1', 'alice')).toBe('ok');
      expect(await s.setUser(I, 'd1', 'alice')).toBe('ok');
      expect(await s.setUser(I, 'd1', 'bob')).toBe('already-associated');
      expect((await s.get(I, 'd1'))!.userId).toBe('alice');
      expect(await s.countUserDevices(I, 'alice')).toBe(1);
    });

    it('associates a user within the devices-per-user limit counted over every shard', async () => {
      const n = 2;
      const { all, at } = await shards(n);
      const ids = Array.from({ length: 6 }, (_, k) => `lim-${k}`);
      const outcomes: string[] = [];
      for (const id of ids) {
        await at(id).register({ instanceId: I, deviceId: id, platform: 'fcm', token: `tok-${id}` });
        // As the main thread asks: the user's devices on every other shard, then the device's own shard decides.
        const own = deviceShardFor(id, n);
        const elsewhere = (await Promise.all(all.map((s, shard) => (shard === own ? 0 : s.countUserDevices(I, 'erin'))))).reduce((a, b) => a + b, 0);
        outcomes.push(await at(id).setUserWithinLimit(I, id, 'erin', elsewhere, 4));
      }
      expect(outcomes).toEqual(['ok', 'ok', 'ok', 'ok', 'limit', 'limit']);
      expect(await at('lim-0').setUserWithinLimit(I, 'lim-0', 'erin', 3, 4)).toBe('ok');
      expect(await at('lim-0').setUserWithinLimit(I, 'lim-0', 'frank', 0, 4)).toBe('already-associated');
      expect(await at('nobody').setUserWithinLimit(I, 'nobody', 'erin', 0, 4)).toBe('not-found');
      expect((await at('lim-5').get(I, 'lim-5'))!.userId).toBeUndefined();
    });

    it('pages interests in byte order with opaque cursors; a bad cursor is refused before the device is looked up', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      expect(await s.listInterests(I, 'd1', 10)).toBe('not-found');
      expect(await s.listInterests(I, 'nobody', 10, 'not a cursor!')).toBe('bad-cursor');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      const names = ['b', 'B', 'a', '_x', '-y', '9', 'a.b', 'ab', '=@,;'];
      expect(await s.replaceInterests(I, 'd1', names)).toBe('ok');
      const sorted = [...names].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
      const seen: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      for (;;) {
        const page = await s.listInterests(I, 'd1', 2, cursor);
        if (typeof page === 'string') throw new Error(page);
        pages++;
        seen.push(...page.interests);
        if (page.nextCursor === undefined) break;
        cursor = page.nextCursor;
      }
      expect(seen).toEqual(sorted);
      expect(pages).toBe(5);
      expect(await s.listInterests(I, 'd1', 100)).toEqual({ interests: sorted });
      // A cursor continues strictly after its name, even a name since removed.
      expect(await s.listInterests(I, 'd1', 100, encodeInterestCursor('a'))).toEqual({ interests: sorted.slice(sorted.indexOf('a') + 1) });
      expect(await s.listInterests(I, 'd1', 100, encodeInterestCursor('aa'))).toEqual({ interests: ['ab', 'b'] });
      expect(await s.listInterests(I, 'd1', 100, encodeInterestCursor('b'))).toEqual({ interests: [] });
      expect(await s.listInterests(I, 'd1', 9)).toEqual({ interests: sorted });
    });

    it('adds, removes and replaces interests with their outcomes and keeps the count right', async () => {
      const { at } = await shards(1);
      const s = at('d1');
      expect(await s.replaceInterests(I, 'd1', ['a'])).toBe('not-found');
      expect(await s.removeInterest(I, 'd1', 'a')).toBe('not-found');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      expect(await s.addInterest(I, 'd1', 'a')).toBe('added');
      expect(await s.addInterest(I, 'd1', 'a')).toBe('unchanged');
      expect(await s.removeInterest(I, 'd1', 'b')).toBe('unchanged');
      expect(await s.replaceInterests(I, 'd1', ['c', 'b', 'c'])).toBe('ok');
      expect(await s.listInterests(I, 'd1', 10)).toEqual({ interests: ['b', 'c'] });
      expect((await s.get(I, 'd1'))!.interestCount).toBe(2);
      expect(await s.removeInterest(I, 'd1', 'b')).toBe('removed');
      expect((await s.get(I, 'd1'))!.interestCount).toBe(1);
      expect(await s.replaceInterests(I, 'd1', [])).toBe('ok');
      expect(await s.listInterests(I, 'd1', 10)).toEqual({ interests: [] });
      expect(await s.counts(I)).toEqual({ devices: 1, subscriptions: 0, devicesWithUser: 0 });
      expect(await s.checkConsistency(I)).toEqual([]);
    });

    it(`holds at most ${MAX_INTERESTS_PER_DEVICE} interests: too-many on add, RangeError on a larger replace, nothing changed`, async () => {
      const { at } = await shards(1);
      const s = at('d1');
      await s.register({ instanceId: I, deviceId: 'd1', platform: 'fcm', token: 'tok' });
      const full = Array.from({ length: MAX_INTERESTS_PER_DEVICE }, (_, k) => `i${k}`);
      expect(await s.replaceInterests(I, 'd1', full)).toBe('ok');
      expect(await s.addInterest(I, 'd1', 'one-more')).toBe('too-many');
      expect(await s.addInterest(I, 'd1', 'i7')).toBe('unchanged');
      await expect(Promise.resolve().then(() => s.replaceInterests(I, 'd1', [...full, 'one-more']))).rejects.toThrow(RangeError);
      expect((await s.get(I, 'd1'))!.interestCount).toBe(MAX_INTERESTS_PER_DEVICE);
      expect(await s.checkConsistency(I)).toEqual([]);
    });

    it('scans the devices of any of several interests once each, split over the shards, resumable from any position', async () => {
      const n = 3;
      const { all, at, scope } = await shards(n);
      const ids = Array.from({ length: 60 }, (_, k) => `dev-${String(k).padStart(2, '0')}`);
      for (const [k, id] of ids.entries()) {
        await at(id).register({ instanceId: I, deviceId: id, platform: k % 2 ? 'fcm' : 'apns', token: `tok-${id}`, bundleIdentifier: k % 2 ? undefined : 'com.example' });
        // Every device in `a` or `b`, a third in both; the odd fifth also in `c`.
        const interests = k % 3 === 0 ? ['a', 'b'] : k % 3 === 1 ? ['a'] : ['b'];
        if (k % 5 === 0) interests.push('c');
        await at(id).replaceInterests(I, id, interests);
      }
      await at('outsider').register({ instanceId: I, deviceId: 'outsider', platform: 'fcm', token: 'tok' });
      await at('outsider').addInterest(I, 'outsider', 'z');
      const perShard = await Promise.all(all.map((s) => drain(s.scanInterestSteps(I, ['c', 'b', 'a', 'b']))));
      const union = perShard.flatMap((part) => part.map((d) => d.id));
      expect([...union].sort()).toEqual(ids);
      for (const [shard, part] of perShard.entries()) {
        for (const d of part) expect(scope(d.id)).toBe(shard);
        // Sorted list order (a, b, c), then the store's own order; a device is yielded under its first interest.
        const listIndexes = part.map((d) => d.position.listIndex);
        expect(listIndexes).toEqual([...listIndexes].sort());
        // Resuming after any device yields exactly the rest.
        for (const cut of [0, Math.floor(part.length / 2), part.length - 1]) {
          if (part.length === 0) continue;
          const rest = await drain(all[shard]!.scanInterestSteps(I, ['a', 'b', 'c'], part[cut]!.position));
          expect(rest.map((d) => d.id)).toEqual(part.slice(cut + 1).map((d) => d.id));
        }
      }
      const scanned = await drain(at('dev-00').scanInterestSteps(I, ['a']));
      expect(scanned.find((d) => d.id === 'dev-00')).toBeDefined();
      // The fan-out's view of a device: what a gateway send needs.
      const step = at('dev-00').scanDeviceSteps(I, ['dev-00']).next();
      const first = step instanceof Promise ? await step : step;
      expect(first.value).toMatchObject({ device: { id: 'dev-00', instanceId: I, platform: 'apns', token: 'tok-dev-00', bundleIdentifier: 'com.example', userId: undefined } });
    });

    it('scans one partition of a fan-out: each device in exactly one partition, in the same order and positions, resumable', async () => {
      const n = 2;
      const P = 3;
      const { all, at } = await shards(n);
      const ids = Array.from({ length: 90 }, (_, k) => `part-${String(k).padStart(2, '0')}`);
      for (const [k, id] of ids.entries()) {
        await at(id).register({ instanceId: I, deviceId: id, platform: 'fcm', token: `tok-${id}` });
        await at(id).replaceInterests(I, id, k % 2 ? ['a'] : ['a', 'b']);
        await at(id).setUser(I, id, k % 3 ? 'ua' : 'ub');
      }
      const scans: [string, (s: PushDeviceStore, from?: ScanPosition, partition?: ScanPartition) => ScanSteps][] = [
        ['interests', (s, from, partition) => s.scanInterestSteps(I, ['b', 'a'], from, partition)],
        ['users', (s, from, partition) => s.scanUserSteps(I, ['ub', 'ua'], from, partition)],
        ['devices', (s, from, partition) => s.scanDeviceSteps(I, ids, from, partition)],
      ];
      // A shared store's partition covers every shard's devices, in scan order: list entry, then
      // device hash, then id.
      const scanOrder = (a: { id: string; position: ScanPosition }, b: { id: string; position: ScanPosition }): number =>
        a.position.listIndex - b.position.listIndex || fnv1a32(a.id) - fnv1a32(b.id) || (a.id < b.id ? -1 : 1);
      for (const [what, scan] of scans) {
        const everyShard = (await Promise.all(all.map((x) => drain(scan(x))))).flat().sort(scanOrder);
        for (const [shard, s] of all.entries()) {
          const whole = h!.sharedPartitions ? everyShard : await drain(scan(s));
          const parts = await Promise.all(Array.from({ length: P }, (_, index) => drain(scan(s, undefined, { index, count: P }))));
          for (const [index, part] of parts.entries()) {
            for (const d of part) expect(inScanPartition(d.id, { index, count: P }), `${what} ${d.id}`).toBe(true);
            // A partition is the whole scan's devices of that partition, with the same positions.
            expect(part, what).toEqual(whole.filter((d) => inScanPartition(d.id, { index, count: P })));
            if (part.length > 1) expect(await drain(scan(s, part[0]!.position, { index, count: P }))).toEqual(part.slice(1));
          }
          expect(parts.flat().length, `${what} on shard ${shard}`).toBe(whole.length);
        }
      }
      expect(ids.filter((id) => inScanPartition(id, { index: 0, count: 1 }))).toEqual(ids);
      expect(() => partitionBounds({ index: 3, count: 3 })).toThrow(RangeError);
      expect(() => partitionBounds({ index: 0, count: 0 })).toThrow(RangeError);
    });

    it('scans the devices of users and named devices per shard; per-shard user counts and user deletion', async () => {
      const n = 2;
      const { all, at, scope } = await shards(n);
      const ids = Array.from({ length: 30 }, (_, k) => `u-dev-${k}`);
      for (const [k, id] of ids.entries()) {
        await at(id).register({ instanceId: I, deviceId: id, platform: 'web', token: `tok-${id}` });
        await at(id).setUser(I, id, k < 20 ? 'carol' : 'dave');
      }
      const counts = await Promise.all(all.map((s) => s.countUserDevices(I, 'carol')));
      expect(counts.reduce((a, b) => a + b, 0)).toBe(20);
      for (const [shard, count] of counts.entries()) expect(count).toBe(ids.slice(0, 20).filter((id) => scope(id) === shard).length);

      const users = await Promise.all(all.map((s) => drain(s.scanUserSteps(I, ['dave', 'carol', 'nobody']))));
      expect(users.flatMap((p) => p.map((d) => d.id)).sort()).toEqual([...ids].sort());
      for (const [shard, part] of users.entries()) {
        if (part.length < 2) continue;
        const rest = await drain(all[shard]!.scanUserSteps(I, ['carol', 'dave'], part[0]!.position));
        expect(rest.map((d) => d.id)).toEqual(part.slice(1).map((d) => d.id));
      }

      const named = await Promise.all(all.map((s) => drain(s.scanDeviceSteps(I, ['u-dev-3', 'missing', 'u-dev-1', 'u-dev-2', 'u-dev-1']))));
      expect(named.flatMap((p) => p.map((d) => d.id)).sort()).toEqual(['u-dev-1', 'u-dev-2', 'u-dev-3']);
      for (const [shard, part] of named.entries()) {
        for (const d of part) expect(scope(d.id)).toBe(shard);
        if (part.length < 2) continue;
        const rest = await drain(all[shard]!.scanDeviceSteps(I, ['u-dev-1', 'u-dev-2', 'u-dev-3', 'missing'], part[0]!.position));
        expect(rest.map((d) => d.id)).toEqual(part.slice(1).map((d) => d.id));
      }

      const deleted = await Promise.all(all.map((s) => s.deleteUser(I, 'carol')));
      expect(deleted.reduce((a, b) => a + b, 0)).toBe(20);
      for (const id of ids.slice(0, 20)) expect(await at(id).get(I, id)).toBeUndefined();
      expect(await at('u-dev-25').get(I, 'u-dev-25')).toBeDefined();
      for (const s of all) expect(await s.checkConsistency()).toEqual([]);
    });

    it('counts devices, subscriptions, users and platforms of an instance per shard', async () => {
      const n = 2;
      const { all, at } = await shards(n);
      const platforms = ['apns', 'fcm', 'web', 'fcm', 'fcm'] as const;
      for (const [k, platform] of platforms.entries()) {
        const id = `c-${k}`;
        await at(id).register({ instanceId: I, deviceId: id, platform, token: 'tok' });
        await at(id).replaceInterests(I, id, ['x', 'y'].slice(0, k % 3));
        if (k < 2) await at(id).setUser(I, id, `user-${k}`);
      }
      await at('elsewhere').register({ instanceId: OTHER, deviceId: 'elsewhere', platform: 'apns', token: 'tok' });
      const counts = await Promise.all(all.map((s) => s.counts(I)));
      const total = counts.reduce((a, c) => ({ devices: a.devices + c.devices, subscriptions: a.subscriptions + c.subscriptions, devicesWithUser: a.devicesWithUser + c.devicesWithUser }));
      expect(total).toEqual({ devices: 5, subscriptions: 0 + 1 + 2 + 0 + 1, devicesWithUser: 2 });
      const byPlatform = await Promise.all(all.map((s) => s.platformCounts(I)));
      expect(byPlatform.reduce((a, c) => ({ apns: a.apns + c.apns, fcm: a.fcm + c.fcm, web: a.web + c.web }))).toEqual({ apns: 1, fcm: 3, web: 1 });
    });
  });
}
