import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { RootDatabase } from 'lmdb';
import ts from 'typescript';
import { afterEach, describe, expect, it } from 'vitest';
import type { Platform } from '../../../../../src/push/platform.js';
import { decodeInterestCursor, encodeInterestCursor } from '../../../../../src/push/shard/devices/cursor.js';
import { LmdbDevices, openShardStore } from '../../../../../src/push/shard/devices/lmdb-devices.js';
import { SCAN_BATCH } from '../../../../../src/push/shard/devices/device-scan.js';
import { normaliseScanList, type ScanPosition, type ScannedDevice, type ScanProgress } from '../../../../../src/push/store/device-store.js';
import { isValidInterestName, MAX_INTERESTS_PER_DEVICE } from '../../../../../src/push/interest-name.js';
import {
  decodeKey,
  encodeKey,
  isEncodableKeyPart,
  joinKeys,
  keyAfter,
  keyPartBetween,
  lastKeyPart,
  lastPartOffset,
  prefixRange,
  writeKeyPart,
} from '../../../../../src/push/keys.js';

const projectRoot = fileURLToPath(new URL('../../../../../', import.meta.url));

const tempDirs: string[] = [];
const openRoots = new Set<RootDatabase>();

afterEach(async () => {
  for (const root of openRoots) await root.close();
  openRoots.clear();
  for (const dir of tempDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-device-store-'));
  tempDirs.push(dir);
  return dir;
}

function openAt(path: string): { root: RootDatabase; store: LmdbDevices } {
  const root = openShardStore(path);
  openRoots.add(root);
  return { root, store: new LmdbDevices(root) };
}

async function closeRoot(root: RootDatabase): Promise<void> {
  openRoots.delete(root);
  await root.close();
}

function freshStore(): { path: string; root: RootDatabase; store: LmdbDevices } {
  const path = join(tempDir(), 'shard-0');
  return { path, ...openAt(path) };
}

/** Every interest of a device, following cursors page by page. */
function allInterests(store: LmdbDevices, instanceId: string, deviceId: string, limit = 100): string[] {
  const names: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = store.listInterests(instanceId, deviceId, limit, cursor);
    if (page === 'not-found' || page === 'bad-cursor') throw new Error(`listInterests: ${page}`);
    names.push(...page.interests);
    if (page.nextCursor === undefined) return names;
    cursor = page.nextCursor;
  }
}

function scannedIds(scan: Iterable<ScannedDevice>): string[] {
  return Array.from(scan, ({ device }) => device.id);
}

function names(count: number, prefix = 'interest-'): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${String(i).padStart(5, '0')}`);
}

/** Small seeded PRNG (mulberry32) so a failing random run can be replayed. */
function rng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('keys', () => {
  const utf8Compare = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));
  const tupleCompare = (a: string[], b: string[]): number => {
    for (let i = 0; i < Math.min(a.length, b.length); i++) {
      const c = utf8Compare(a[i]!, b[i]!);
      if (c !== 0) return c;
    }
    return Math.sign(a.length - b.length);
  };
  const parts = ['', 'a', 'ab', 'a\u0000', 'a\u0001', 'a\u0002', '\u0000', '\u0001b', 'b', 'ü', '日本', 'a.b', 'z'.repeat(200), '😀'];

  it('round-trips tuples, including separator and escape characters', () => {
    for (const a of parts) {
      for (const b of parts) {
        expect(decodeKey(encodeKey([a, b]))).toEqual([a, b]);
        expect(lastKeyPart(encodeKey(['x', a, b]))).toBe(b);
      }
    }
  });

  it('orders keys as tuples of UTF-8 strings', () => {
    const random = rng(7);
    const pick = (): string[] => Array.from({ length: 1 + Math.floor(random() * 3) }, () => parts[Math.floor(random() * parts.length)]!);
    for (let i = 0; i < 3000; i++) {
      const a = pick();
      const b = pick();
      expect(Math.sign(Buffer.compare(encodeKey(a), encodeKey(b)))).toBe(tupleCompare(a, b));
    }
  });

  it('gives exact prefix ranges: `a` does not cover `ab` or `a\\0`', () => {
    for (const prefix of parts) {
      const { start, end } = prefixRange(['i', prefix]);
      for (const other of parts) {
        const key = encodeKey(['i', other, 'device']);
        const inside = Buffer.compare(key, start) >= 0 && Buffer.compare(key, end) < 0;
        expect(inside, `${JSON.stringify(other)} in range of ${JSON.stringify(prefix)}`).toBe(other === prefix);
      }
      // The prefix tuple itself (fewer parts) is outside its own range.
      expect(Buffer.compare(encodeKey(['i', prefix]), start)).toBeLessThan(0);
    }
  });

  it('keyAfter sorts after the key and before every greater key', () => {
    for (const a of parts) {
      const after = keyAfter(['i', a]);
      for (const b of parts) {
        const key = encodeKey(['i', b]);
        expect(Buffer.compare(key, after) > 0).toBe(utf8Compare(b, a) > 0);
      }
    }
  });

  it('joins encoded keys and reuses the encoded bytes of a key\'s last part', () => {
    for (const a of parts) {
      for (const b of parts) {
        expect(joinKeys(encodeKey(['i', a]), encodeKey([b, 'x']))).toEqual(encodeKey(['i', a, b, 'x']));
        const indexKey = encodeKey(['i', a, b]);
        const start = lastPartOffset(indexKey);
        // A plain Uint8Array, as lmdb-js returns keys.
        const asRead = new Uint8Array(indexKey);
        expect(joinKeys(encodeKey(['i']), asRead, start)).toEqual(encodeKey(['i', b]));
        expect(keyPartBetween(Buffer.from(asRead), start, asRead.length)).toBe(b);
      }
    }
  });

  it('writes and reads one part in place, as key encoders do in lmdb-js\'s key buffer', () => {
    const target = Buffer.alloc(1024, 0xee);
    for (const a of parts) {
      for (const b of parts) {
        const head = encodeKey(['i', a]);
        target.set(head, 3);
        target[3 + head.length] = 0x00;
        const end = writeKeyPart(b, target, 4 + head.length);
        expect(target.subarray(3, end)).toEqual(encodeKey(['i', a, b]));
        expect(keyPartBetween(target, 4 + head.length, end)).toBe(b);
      }
    }
    // No room: an error, never a truncated key.
    expect(() => writeKeyPart('abcdef', Buffer.alloc(8), 4)).toThrow(RangeError);
    expect(() => writeKeyPart('bad \ud800', target, 0)).toThrow(RangeError);
  });

  it('rejects lone surrogates instead of storing U+FFFD', () => {
    expect(isEncodableKeyPart('ok 😀')).toBe(true);
    expect(isEncodableKeyPart('bad \ud800')).toBe(false);
    expect(() => encodeKey(['i', 'bad \udc00'])).toThrow(RangeError);
  });
});

describe('interest names and cursors', () => {
  it('accepts 1 to 164 characters of A-Za-z0-9_-=@,.;', () => {
    expect(isValidInterestName('hello')).toBe(true);
    expect(isValidInterestName('A-z_0=9@,.;')).toBe(true);
    expect(isValidInterestName('x'.repeat(164))).toBe(true);
    expect(isValidInterestName('x'.repeat(165))).toBe(false);
    expect(isValidInterestName('')).toBe(false);
    expect(isValidInterestName('with space')).toBe(false);
    expect(isValidInterestName('slash/')).toBe(false);
    expect(isValidInterestName('ü')).toBe(false);
    expect(isValidInterestName(42)).toBe(false);
  });

  it('round-trips a cursor and rejects anything else', () => {
    expect(decodeInterestCursor(encodeInterestCursor('news.sport'))).toBe('news.sport');
    const foreign = (body: unknown): string => Buffer.from(JSON.stringify(body)).toString('base64url');
    for (const bad of [
      '',
      'not a cursor',
      '!!!',
      'e30',
      foreign({ v: 2, after: 'a' }),
      foreign({ v: 1, after: 'bad name' }),
      foreign({ v: 1 }),
      foreign(['a']),
      'x'.repeat(600),
    ]) {
      expect(decodeInterestCursor(bad), bad).toBeUndefined();
    }
  });
});

describe('LmdbDevices', () => {
  it('registers, reads, re-registers and deletes a device', async () => {
    const { store } = freshStore();
    const before = Date.now();
    const first = await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'apns', token: 'tok-1', bundleIdentifier: 'com.example', metadata: { sdkVersion: '1', iosVersion: '17' } });
    expect(first).toEqual({ id: 'd1', initialInterestSet: [], created: true });
    const device = store.get('inst', 'd1')!;
    expect(device).toEqual({
      id: 'd1',
      instanceId: 'inst',
      platform: 'apns',
      token: 'tok-1',
      bundleIdentifier: 'com.example',
      metadata: { sdkVersion: '1', iosVersion: '17' },
      createdAt: device.createdAt,
      interestCount: 0,
    });
    expect(device.createdAt).toBeGreaterThanOrEqual(before);
    expect(store.get('inst', 'nope')).toBeUndefined();

    await store.replaceInterests('inst', 'd1', ['b', 'a']);
    expect(await store.setUser('inst', 'd1', 'alice')).toBe('ok');

    const again = await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'apns', token: 'tok-2' });
    expect(again).toEqual({ id: 'd1', initialInterestSet: ['a', 'b'], created: false });
    // Interests survive a re-registration; the user association does not.
    expect(store.get('inst', 'd1')).toEqual({ ...device, token: 'tok-2', interestCount: 2 });
    expect(store.countUserDevices('inst', 'alice')).toBe(0);
    expect(await store.setUser('inst', 'd1', 'alice')).toBe('ok');

    expect(await store.delete('inst', 'd1')).toBe(true);
    expect(await store.delete('inst', 'd1')).toBe(false);
    expect(store.get('inst', 'd1')).toBeUndefined();
    expect(store.countUserDevices('inst', 'alice')).toBe(0);
    expect(store.listInterests('inst', 'd1', 100)).toBe('not-found');
    expect(store.counts('inst')).toEqual({ devices: 0, subscriptions: 0, devicesWithUser: 0 });
    expect(store.checkConsistency()).toEqual([]);

    const reborn = await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 'tok-3' });
    expect(reborn).toEqual({ id: 'd1', initialInterestSet: [], created: true });
    expect(store.get('inst', 'd1')).not.toHaveProperty('bundleIdentifier');
    expect(store.get('inst', 'd1')).not.toHaveProperty('userId');
  });

  it('re-registering a device clears its user (record and user index) and keeps its interests', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'shared-phone', platform: 'fcm', token: 'tok' });
    await store.replaceInterests('inst', 'shared-phone', ['news']);
    expect(await store.setUser('inst', 'shared-phone', 'alice')).toBe('ok');
    expect(scannedIds(store.scanUsers('inst', ['alice']))).toEqual(['shared-phone']);

    // Another person signs in on the same phone: the app registers the same token again.
    expect(await store.register({ instanceId: 'inst', deviceId: 'shared-phone', platform: 'fcm', token: 'tok' })).toEqual({ id: 'shared-phone', initialInterestSet: ['news'], created: false });
    expect(store.get('inst', 'shared-phone')).not.toHaveProperty('userId');
    expect(store.countUserDevices('inst', 'alice')).toBe(0);
    expect(scannedIds(store.scanUsers('inst', ['alice']))).toEqual([]);
    expect(scannedIds(store.scanInterests('inst', ['news']))).toEqual(['shared-phone']);
    expect(await store.setUser('inst', 'shared-phone', 'bob')).toBe('ok');
    expect(scannedIds(store.scanUsers('inst', ['bob']))).toEqual(['shared-phone']);
    expect(store.checkConsistency()).toEqual([]);
  });

  it('deleteIfToken deletes only while the device still has that token', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'apns', token: 'old-token', bundleIdentifier: 'b' });
    await store.addInterest('inst', 'd1', 'news');
    await store.setUser('inst', 'd1', 'alice');
    await store.setToken('inst', 'd1', 'new-token');
    expect(await store.deleteIfToken('inst', 'd1', 'old-token')).toBe(false);
    expect(store.get('inst', 'd1')).toMatchObject({ token: 'new-token', userId: 'alice', interestCount: 1 });
    expect(await store.deleteIfToken('inst', 'd1', 'new-token')).toBe(true);
    expect(store.get('inst', 'd1')).toBeUndefined();
    expect(await store.deleteIfToken('inst', 'd1', 'new-token')).toBe(false);
    expect(store.counts('inst')).toEqual({ devices: 0, subscriptions: 0, devicesWithUser: 0 });
    expect(store.checkConsistency()).toEqual([]);
  });

  it('sets metadata and token only on existing devices', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 'old', metadata: { sdkVersion: '1' } });
    expect(await store.setMetadata('inst', 'd1', { sdkVersion: '2', androidVersion: '14' })).toBe(true);
    expect(await store.setToken('inst', 'd1', 'new')).toBe(true);
    expect(store.get('inst', 'd1')).toMatchObject({ token: 'new', metadata: { sdkVersion: '2', androidVersion: '14' } });
    expect(await store.setMetadata('inst', 'missing', {})).toBe(false);
    expect(await store.setToken('inst', 'missing', 'x')).toBe(false);
    expect(store.get('inst', 'missing')).toBeUndefined();
  });

  it('associates users, counts their devices and deletes them', async () => {
    const { store } = freshStore();
    for (const id of ['d1', 'd2', 'd3', 'd4']) await store.register({ instanceId: 'inst', deviceId: id, platform: 'fcm', token: `t-${id}` });
    await store.replaceInterests('inst', 'd1', ['news', 'sport']);
    expect(await store.setUser('inst', 'd1', 'alice')).toBe('ok');
    expect(await store.setUser('inst', 'd1', 'alice')).toBe('ok');
    expect(await store.setUser('inst', 'd1', 'bob')).toBe('already-associated');
    expect(await store.setUser('inst', 'missing', 'alice')).toBe('not-found');
    expect(await store.setUser('inst', 'd2', 'alice')).toBe('ok');
    expect(await store.setUser('inst', 'd3', 'alice2')).toBe('ok');
    expect(store.get('inst', 'd1')?.userId).toBe('alice');

    expect(store.countUserDevices('inst', 'alice')).toBe(2);
    expect(store.countUserDevices('inst', 'alice2')).toBe(1);
    expect(store.countUserDevices('inst', 'ali')).toBe(0);
    expect(store.countUserDevices('other', 'alice')).toBe(0);

    expect(await store.deleteUser('inst', 'alice')).toBe(2);
    expect(store.get('inst', 'd1')).toBeUndefined();
    expect(store.get('inst', 'd2')).toBeUndefined();
    expect(store.get('inst', 'd3')?.userId).toBe('alice2');
    expect(store.get('inst', 'd4')).toBeDefined();
    expect(store.countUserDevices('inst', 'alice')).toBe(0);
    expect(scannedIds(store.scanInterests('inst', ['news', 'sport']))).toEqual([]);
    expect(await store.deleteUser('inst', 'alice')).toBe(0);
    expect(store.checkConsistency()).toEqual([]);
  });

  it('pages 250 interests 100 at a time', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'web', token: 'sub' });
    const all = names(250);
    await store.replaceInterests('inst', 'd1', [...all].reverse());

    const pages: string[][] = [];
    let cursor: string | undefined;
    do {
      const page = store.listInterests('inst', 'd1', 100, cursor);
      if (typeof page === 'string') throw new Error(page);
      pages.push(page.interests);
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    expect(pages.map((p) => p.length)).toEqual([100, 100, 50]);
    expect(pages.flat()).toEqual(all);

    // Exactly `limit` left: no cursor on the page that ends the list.
    const twoHundred = store.listInterests('inst', 'd1', 100, encodeInterestCursor(all[149]!));
    expect(twoHundred).toEqual({ interests: all.slice(150, 250) });
    expect(store.listInterests('inst', 'd1', 1)).toEqual({ interests: [all[0]], nextCursor: encodeInterestCursor(all[0]!) });
  });

  it('keeps cursors correct while interests are added and removed between pages', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 't' });
    const current = new Set(names(250, 'n'));
    await store.replaceInterests('inst', 'd1', [...current]);

    const page1 = store.listInterests('inst', 'd1', 100);
    if (typeof page1 === 'string' || page1.nextCursor === undefined) throw new Error('expected a full first page');
    const last = page1.interests.at(-1)!;

    // Remove the last name returned and some after it; add names before and after the cursor.
    const changes = {
      remove: [last, page1.interests[0]!, 'n00100', 'n00101', 'n00200'],
      add: ['a-before', 'n00099a', 'n00150a', 'zzz'],
    };
    for (const name of changes.remove) {
      expect(await store.removeInterest('inst', 'd1', name)).toBe('removed');
      current.delete(name);
    }
    for (const name of changes.add) {
      expect(await store.addInterest('inst', 'd1', name)).toBe('added');
      current.add(name);
    }

    const rest: string[] = [];
    let cursor: string | undefined = page1.nextCursor;
    while (cursor !== undefined) {
      const page = store.listInterests('inst', 'd1', 100, cursor);
      if (typeof page === 'string') throw new Error(page);
      rest.push(...page.interests);
      cursor = page.nextCursor;
    }
    expect(rest).toEqual([...current].filter((name) => name > last).sort());
    expect(rest).toContain('n00099a');
    expect(rest).not.toContain('a-before');
    expect(new Set([...page1.interests, ...rest]).size).toBe(page1.interests.length + rest.length);
  });

  it('answers bad-cursor and not-found', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 't' });
    expect(store.listInterests('inst', 'd1', 100, 'garbage!')).toBe('bad-cursor');
    expect(store.listInterests('inst', 'd1', 100, Buffer.from('{"v":1}').toString('base64url'))).toBe('bad-cursor');
    expect(store.listInterests('inst', 'missing', 100)).toBe('not-found');
    expect(store.listInterests('inst', 'd1', 100)).toEqual({ interests: [] });
    expect(() => store.listInterests('inst', 'd1', 0)).toThrow(RangeError);
  });

  it('replaces 5000 interests in a fraction of a second and enforces the maximum', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 't' });
    const first = names(MAX_INTERESTS_PER_DEVICE, 'a');
    let started = performance.now();
    expect(await store.replaceInterests('inst', 'd1', first)).toBe('ok');
    const createMs = performance.now() - started;

    // Half overlapping: 2500 removed, 2500 kept, 2500 added.
    const second = [...first.slice(2500), ...names(2500, 'b')];
    started = performance.now();
    expect(await store.replaceInterests('inst', 'd1', second)).toBe('ok');
    const swapMs = performance.now() - started;

    expect(createMs).toBeLessThan(1000);
    expect(swapMs).toBeLessThan(1000);
    expect(store.get('inst', 'd1')?.interestCount).toBe(5000);
    expect(allInterests(store, 'inst', 'd1')).toEqual([...second].sort());
    expect(store.counts('inst').subscriptions).toBe(5000);

    expect(await store.addInterest('inst', 'd1', 'one-too-many')).toBe('too-many');
    expect(await store.addInterest('inst', 'd1', second[0]!)).toBe('unchanged');
    expect(() => store.replaceInterests('inst', 'd1', names(5001))).toThrow(RangeError);
    // Duplicates do not count towards the limit.
    expect(await store.replaceInterests('inst', 'd1', [...second, ...second])).toBe('ok');
    expect(store.checkConsistency()).toEqual([]);
  });

  it('adds and removes interests idempotently', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 't' });
    expect(await store.addInterest('inst', 'd1', 'news')).toBe('added');
    expect(await store.addInterest('inst', 'd1', 'news')).toBe('unchanged');
    expect(store.get('inst', 'd1')?.interestCount).toBe(1);
    expect(await store.removeInterest('inst', 'd1', 'news')).toBe('removed');
    expect(await store.removeInterest('inst', 'd1', 'news')).toBe('unchanged');
    expect(store.get('inst', 'd1')?.interestCount).toBe(0);
    expect(await store.addInterest('inst', 'missing', 'news')).toBe('not-found');
    expect(await store.removeInterest('inst', 'missing', 'news')).toBe('not-found');
    expect(await store.replaceInterests('inst', 'missing', ['news'])).toBe('not-found');
    expect(store.checkConsistency()).toEqual([]);
  });

  describe('fan-out scans', () => {
    // 700 devices over three interests with every overlap; more than one batch per interest.
    const interestsOf = (i: number): string[] => {
      const subscribed: string[] = [];
      if (i % 2 === 0) subscribed.push('even');
      if (i % 3 === 0) subscribed.push('three');
      if (i % 5 === 0) subscribed.push('five');
      if (i % 7 !== 0) subscribed.push('all-but');
      if (i % 11 === 0) subscribed.push('a');
      return subscribed;
    };
    const deviceIds = Array.from({ length: 700 }, (_, i) => `dev-${String(i).padStart(4, '0')}`);

    async function populated(): Promise<LmdbDevices> {
      const { store } = freshStore();
      await Promise.all(
        deviceIds.map(async (id, i) => {
          await store.register({ instanceId: 'inst', deviceId: id, platform: 'fcm', token: `t-${i}` });
          await store.replaceInterests('inst', id, interestsOf(i));
        }),
      );
      // The prefix `a` must not pick up `ab`, nor another instance's devices.
      await store.register({ instanceId: 'inst', deviceId: 'ab-only', platform: 'fcm', token: 't' });
      await store.addInterest('inst', 'ab-only', 'ab');
      await store.register({ instanceId: 'inst2', deviceId: 'dev-0000', platform: 'fcm', token: 't' });
      await store.replaceInterests('inst2', 'dev-0000', ['even', 'a', 'three']);
      return store;
    }

    function expected(interests: string[]): string[] {
      return deviceIds.filter((_, i) => interestsOf(i).some((name) => interests.includes(name))).sort();
    }

    it('yields each subscribed device once, for overlapping interests', async () => {
      const store = await populated();
      for (const list of [['even'], ['even', 'three'], ['five', 'three', 'even'], ['all-but', 'even', 'three', 'five'], ['a'], ['a', 'nobody', 'a']]) {
        const ids = scannedIds(store.scanInterests('inst', list));
        expect(new Set(ids).size, list.join()).toBe(ids.length);
        expect([...ids].sort(), list.join()).toEqual(expected(list));
      }
      expect(scannedIds(store.scanInterests('inst', []))).toEqual([]);
      expect(scannedIds(store.scanInterests('inst', ['ab']))).toEqual(['ab-only']);
      expect(scannedIds(store.scanInterests('inst2', ['even', 'three', 'a']))).toEqual(['dev-0000']);
      const first = store.scanInterests('inst', ['even']).next();
      expect(first.done).toBe(false);
      expect(first.value).toMatchObject({ device: { id: 'dev-0000', instanceId: 'inst', token: 't-0', interestCount: 4 } });
    });

    it('resumes from any yielded position without skipping or repeating', async () => {
      const store = await populated();
      const list = ['three', 'even', 'five', 'all-but'];
      const full: ScannedDevice[] = [...store.scanInterests('inst', list)];
      expect(full.map((s) => s.position.listIndex)).toEqual([...full.map((s) => s.position.listIndex)].sort());
      for (const cut of [0, 1, 255, 256, 257, full.length - 2, full.length - 1]) {
        // Positions are plain data: persist and restore them as JSON.
        const position = JSON.parse(JSON.stringify(full[cut]!.position)) as ScanPosition;
        const resumed = scannedIds(store.scanInterests('inst', [...list].reverse(), position));
        expect(resumed, `cut at ${cut}`).toEqual(full.slice(cut + 1).map((s) => s.device.id));
      }
      for (const listIndex of [0, 1, 2, 3]) {
        const resumed = scannedIds(store.scanInterests('inst', list, { listIndex, afterDeviceId: null }));
        expect(resumed).toEqual(full.filter((s) => s.position.listIndex >= listIndex).map((s) => s.device.id));
      }
      expect(scannedIds(store.scanInterests('inst', list, { listIndex: 9, afterDeviceId: null }))).toEqual([]);
      expect(() => store.scanInterests('inst', list, { listIndex: -1, afterDeviceId: null }).next()).toThrow(RangeError);
      expect(normaliseScanList(list)).toEqual(['all-but', 'even', 'five', 'three']);
    });

    it('scans the devices of users, each once, and resumes', async () => {
      const { store } = freshStore();
      const owners = ['u1', 'u2', 'u', 'u10'];
      await Promise.all(
        Array.from({ length: 600 }, async (_, i) => {
          await store.register({ instanceId: 'inst', deviceId: `d${i}`, platform: 'apns', token: 't', bundleIdentifier: 'b' });
          await store.setUser('inst', `d${i}`, owners[i % owners.length]!);
        }),
      );
      const full = [...store.scanUsers('inst', ['u2', 'u1', 'u2', 'nobody'])];
      const ids = full.map((s) => s.device.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect([...ids].sort()).toEqual(
        Array.from({ length: 600 }, (_, i) => `d${i}`)
          .filter((_, i) => i % 4 < 2)
          .sort(),
      );
      expect(full.every((s) => ['u1', 'u2'].includes(s.device.userId!))).toBe(true);
      for (const cut of [0, 150, 299]) {
        // The same users in another order: positions index the normalised list.
        expect(scannedIds(store.scanUsers('inst', ['nobody', 'u1', 'u2'], full[cut]!.position))).toEqual(ids.slice(cut + 1));
      }
    });

    it('scans named devices it holds, each once, passing over unknown ones, and resumes', async () => {
      const { store } = freshStore();
      for (const id of ['a', 'b', 'c']) await store.register({ instanceId: 'inst', deviceId: id, platform: 'fcm', token: `t-${id}` });
      await store.register({ instanceId: 'inst2', deviceId: 'z', platform: 'fcm', token: 't-z' });
      const devicesOf = (ids: string[], from?: ScanPosition) =>
        [...store.scanDeviceSteps('inst', ids, from)].filter((s): s is ScannedDevice => s.device !== null);
      const full = devicesOf(['c', 'nope', 'a', 'c', 'z']);
      expect(full.map((s) => s.device.id)).toEqual(['a', 'c']);
      expect(full[0]!.device.token).toBe('t-a');
      expect(devicesOf(['c', 'nope', 'a', 'z'], full[0]!.position).map((s) => s.device.id)).toEqual(['c']);
      expect(devicesOf(['a', 'c'], full[1]!.position)).toEqual([]);
      expect(devicesOf(['a', 'c'], { listIndex: 1, afterDeviceId: null }).map((s) => s.device.id)).toEqual(['c']);
      const misses = Array.from({ length: SCAN_BATCH + 1 }, (_, i) => `x${i}`);
      const steps = [...store.scanDeviceSteps('inst', misses)];
      expect(steps).toHaveLength(1);
      expect((steps[0] as ScanProgress).skipped).toBe(SCAN_BATCH);
    });

    it('step scans yield a progress step every SCAN_BATCH de-duplicated devices, and resume from it', async () => {
      const { store } = freshStore();
      const both = Array.from({ length: 1000 }, (_, i) => `both-${String(i).padStart(4, '0')}`);
      await Promise.all(both.map(async (id) => {
        await store.register({ instanceId: 'inst', deviceId: id, platform: 'fcm', token: `t-${id}` });
        await store.replaceInterests('inst', id, ['a', 'b']);
      }));
      await store.register({ instanceId: 'inst', deviceId: 'zz-b-only', platform: 'fcm', token: 't' });
      await store.addInterest('inst', 'zz-b-only', 'b');

      const steps = [...store.scanInterestSteps('inst', ['b', 'a'])];
      const devices = steps.filter((s): s is ScannedDevice => s.device !== null).map((s) => s.device.id);
      expect(devices).toEqual([...both, 'zz-b-only']);
      expect(devices).toEqual(scannedIds(store.scanInterests('inst', ['a', 'b'])));
      // Walking `b`, the 1000 devices also in `a` are skipped: never more than SCAN_BATCH of them without a step.
      const progress = steps.filter((s): s is ScanProgress => s.device === null);
      expect(progress.map((s) => s.skipped)).toEqual([SCAN_BATCH, SCAN_BATCH, SCAN_BATCH]);
      expect(progress.map((s) => s.position)).toEqual([255, 511, 767].map((n) => ({ listIndex: 1, afterDeviceId: both[n] })));

      for (const step of progress) {
        expect(scannedIds(store.scanInterests('inst', ['a', 'b'], JSON.parse(JSON.stringify(step.position)) as ScanPosition))).toEqual(['zz-b-only']);
      }
    });

    it('stops cleanly when the consumer stops early and sees later deletions', async () => {
      const store = await populated();
      const scan = store.scanInterests('inst', ['even']);
      const firstTwo = [scan.next().value, scan.next().value] as ScannedDevice[];
      scan.return(undefined);
      expect(firstTwo.map((s) => s.device.id)).toEqual(['dev-0000', 'dev-0002']);

      const live = store.scanInterests('inst', ['even']);
      live.next();
      await store.delete('inst', 'dev-0002');
      expect(live.next().value?.device.id).toBe('dev-0004');
      expect(store.checkConsistency()).toEqual([]);
    });
  });

  it('counts an instance\'s devices by platform (the dashboard\'s push view)', async () => {
    const { store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'a1', platform: 'apns', token: 'ta1', bundleIdentifier: 'com.x' });
    await store.register({ instanceId: 'inst', deviceId: 'f1', platform: 'fcm', token: 'tf1' });
    await store.register({ instanceId: 'inst', deviceId: 'f2', platform: 'fcm', token: 'tf2' });
    await store.register({ instanceId: 'inst2', deviceId: 'w1', platform: 'web', token: 'tw1' });
    expect(store.platformCounts('inst')).toEqual({ apns: 1, fcm: 2, web: 0 });
    expect(store.platformCounts('inst2')).toEqual({ apns: 0, fcm: 0, web: 1 });
    expect(store.platformCounts('in')).toEqual({ apns: 0, fcm: 0, web: 0 });
  });

  it('keeps instances apart, even when one id is a prefix of another', async () => {
    const { store } = freshStore();
    for (const instance of ['inst', 'inst2', 'in']) {
      await store.register({ instanceId: instance, deviceId: 'd1', platform: 'fcm', token: `t-${instance}` });
      await store.replaceInterests(instance, 'd1', [`only-${instance}`, 'shared']);
      await store.setUser(instance, 'd1', 'alice');
    }
    expect(store.get('inst2', 'd1')?.token).toBe('t-inst2');
    expect(allInterests(store, 'inst', 'd1')).toEqual(['only-inst', 'shared']);
    expect(store.counts('inst')).toEqual({ devices: 1, subscriptions: 2, devicesWithUser: 1 });
    expect(store.countUserDevices('in', 'alice')).toBe(1);
    expect([...store.scanInterests('in', ['shared', 'only-inst'])].map((s) => s.device.instanceId)).toEqual(['in']);

    expect(await store.deleteUser('inst', 'alice')).toBe(1);
    expect(store.get('inst', 'd1')).toBeUndefined();
    expect(store.get('inst2', 'd1')).toBeDefined();
    expect(store.get('in', 'd1')).toBeDefined();
    expect(store.countUserDevices('inst2', 'alice')).toBe(1);
    expect(store.checkConsistency('inst2')).toEqual([]);
    expect(store.checkConsistency()).toEqual([]);
  });

  it('reads a store written in the msgpack record format of earlier versions, and rewrites records as they change', async () => {
    const { path, root } = freshStore();
    // The records exactly as earlier versions wrote them: lmdb-js's default msgpack encoding.
    const legacyDevices = root.openDB<Record<string, unknown>, Uint8Array>('push/devices', { keyEncoding: 'binary', encoding: 'msgpack' });
    const index = { keyEncoding: 'binary', encoding: 'binary' } as const;
    const interests = root.openDB<Uint8Array, Uint8Array>('push/interests', index);
    const deviceInterests = root.openDB<Uint8Array, Uint8Array>('push/device-interests', index);
    const users = root.openDB<Uint8Array, Uint8Array>('push/users', index);
    const legacy = {
      'fcm-1': { platform: 'fcm', token: 'fcm-token-1', createdAt: 1_700_000_000_001, interestCount: 2, metadata: { sdkVersion: '2.0.0', androidVersion: '14' } },
      'apns-2': {
        platform: 'apns',
        token: 'apns-token-2',
        createdAt: 1_700_000_000_002,
        interestCount: 1,
        bundleIdentifier: 'com.example.app',
        metadata: { sdkVersion: '4.0.0', iosVersion: '17.4' },
        userId: 'alice ü',
      },
      'web-3': { platform: 'web', token: '{"endpoint":"https://push.example/x"}', createdAt: 1_700_000_000_003, interestCount: 0 },
    } as const;
    const subscriptions: Record<string, string[]> = { 'fcm-1': ['news', 'sport'], 'apns-2': ['news'], 'web-3': [] };
    await root.childTransaction(() => {
      for (const [id, record] of Object.entries(legacy)) {
        legacyDevices.putSync(encodeKey(['inst', id]), record);
        for (const name of subscriptions[id]!) {
          interests.putSync(encodeKey(['inst', name, id]), Buffer.alloc(0));
          deviceInterests.putSync(encodeKey(['inst', id, name]), Buffer.alloc(0));
        }
      }
      users.putSync(encodeKey(['inst', 'alice ü', 'apns-2']), Buffer.alloc(0));
    });
    await closeRoot(root);

    const checkAll = (store: LmdbDevices): void => {
      expect(store.checkConsistency()).toEqual([]);
      expect(store.counts('inst')).toEqual({ devices: 3, subscriptions: 3, devicesWithUser: 1 });
      expect(store.get('inst', 'apns-2')).toEqual({ id: 'apns-2', instanceId: 'inst', ...legacy['apns-2'] });
      expect(store.get('inst', 'web-3')).toEqual({ id: 'web-3', instanceId: 'inst', ...legacy['web-3'] });
      expect([...store.scanInterests('inst', ['sport', 'news'])].map((s) => s.device)).toEqual([
        { id: 'apns-2', instanceId: 'inst', platform: 'apns', token: 'apns-token-2', bundleIdentifier: 'com.example.app', userId: 'alice ü', interestCount: 1 },
        { id: 'fcm-1', instanceId: 'inst', platform: 'fcm', token: store.get('inst', 'fcm-1')!.token, bundleIdentifier: undefined, userId: undefined, interestCount: 2 },
      ]);
      expect(scannedIds(store.scanUsers('inst', ['alice ü']))).toEqual(['apns-2']);
      expect(allInterests(store, 'inst', 'fcm-1')).toEqual(['news', 'sport']);
    };
    const reopened = openAt(path);
    checkAll(reopened.store);
    expect(reopened.store.get('inst', 'fcm-1')).toEqual({ id: 'fcm-1', instanceId: 'inst', ...legacy['fcm-1'] });

    // A change rewrites that record in the current format; the others stay as they were.
    expect(await reopened.store.setToken('inst', 'fcm-1', 'fcm-token-1b')).toBe(true);
    const raw = reopened.root.openDB<Buffer, Uint8Array>('push/devices', { keyEncoding: 'binary', encoding: 'binary' });
    expect(raw.getBinary(encodeKey(['inst', 'fcm-1']))![0]).toBe(0xc1);
    expect(raw.getBinary(encodeKey(['inst', 'apns-2']))![0]).not.toBe(0xc1);
    expect(reopened.store.get('inst', 'fcm-1')).toEqual({ id: 'fcm-1', instanceId: 'inst', ...legacy['fcm-1'], token: 'fcm-token-1b' });
    checkAll(reopened.store);
    await closeRoot(reopened.root);
    checkAll(openAt(path).store);
  });

  it('reports index disagreements it is shown', async () => {
    const { root, store } = freshStore();
    await store.register({ instanceId: 'inst', deviceId: 'd1', platform: 'fcm', token: 't' });
    await store.replaceInterests('inst', 'd1', ['a', 'b']);
    // Corrupt on purpose: drop one interest-index entry and add an orphaned user entry.
    const interests = root.openDB<Uint8Array, Uint8Array>('push/interests', { keyEncoding: 'binary', encoding: 'binary' });
    const users = root.openDB<Uint8Array, Uint8Array>('push/users', { keyEncoding: 'binary', encoding: 'binary' });
    await root.childTransaction(() => {
      interests.removeSync(encodeKey(['inst', 'a', 'd1']));
      users.putSync(encodeKey(['inst', 'bob', 'ghost']), Buffer.alloc(0));
    });
    const problems = store.checkConsistency();
    expect(problems).toHaveLength(2);
    expect(problems.join('\n')).toMatch(/interest a missing from the interest index/);
    expect(problems.join('\n')).toMatch(/ghost: no such device/);
  });

  it('matches an in-memory model over 2000 random operations, before and after reopening', async () => {
    interface ModelDevice {
      platform: Platform;
      token: string;
      bundleIdentifier?: string;
      metadata?: Record<string, string>;
      userId?: string;
      interests: Set<string>;
    }
    const random = rng(20240611);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
    const instances = ['inst', 'inst2'];
    const deviceIds = [...Array.from({ length: 30 }, (_, i) => `d${i}`), 'd', 'd\u0000x', 'd\u0001', 'ü-device', 'a'.repeat(120)];
    const interestPool = ['a', 'ab', 'a.b', 'a-b', 'b', 'news', 'news.sport', 'x=1', '@home', ';', ',', 'Z9', 'z'.repeat(164)];
    const userPool = ['u', 'u1', 'u10', 'u\u0000', 'ユーザー', 'user with space'];
    const platforms: Platform[] = ['apns', 'fcm', 'web'];
    const model = new Map<string, Map<string, ModelDevice>>(instances.map((i) => [i, new Map()]));
    const devicesOf = (instance: string): Map<string, ModelDevice> => model.get(instance)!;

    /** Dispatches one random operation against the store and returns its result with the model's expectation. */
    function randomOperation(): Promise<{ op: string; actual: unknown; expected: unknown }> {
      const instance = pick(instances);
      const devices = devicesOf(instance);
      const id = pick(deviceIds);
      const device = devices.get(id);
      const roll = random();
      const run = async (op: string, promise: Promise<unknown>, expected: unknown) => ({ op, actual: await promise, expected });
      if (roll < 0.2) {
        const platform = pick(platforms);
        const token = `tok-${Math.floor(random() * 1e6)}`;
        const bundle = random() < 0.5 ? 'com.example' : undefined;
        const metadata = random() < 0.5 ? { sdkVersion: String(Math.floor(random() * 9)) } : undefined;
        const expected = { id, initialInterestSet: device ? [...device.interests].sort() : [], created: !device };
        const next: ModelDevice = device ?? { platform, token, interests: new Set() };
        next.platform = platform;
        next.token = token;
        delete next.userId; // a re-registration clears the user association
        if (bundle !== undefined) next.bundleIdentifier = bundle;
        if (metadata !== undefined) next.metadata = metadata;
        devices.set(id, next);
        return run('register', store.register({ instanceId: instance, deviceId: id, platform, token, bundleIdentifier: bundle, metadata }), expected);
      }
      if (roll < 0.28) {
        devices.delete(id);
        return run('delete', store.delete(instance, id), device !== undefined);
      }
      if (roll < 0.48) {
        const interest = pick(interestPool);
        let expected = 'not-found';
        if (device) expected = device.interests.has(interest) ? 'unchanged' : 'added';
        device?.interests.add(interest);
        return run('addInterest', store.addInterest(instance, id, interest), expected);
      }
      if (roll < 0.63) {
        const interest = pick(interestPool);
        let expected = 'not-found';
        if (device) expected = device.interests.has(interest) ? 'removed' : 'unchanged';
        device?.interests.delete(interest);
        return run('removeInterest', store.removeInterest(instance, id, interest), expected);
      }
      if (roll < 0.71) {
        const wanted = Array.from({ length: Math.floor(random() * 14) }, () => pick(interestPool));
        if (device) device.interests = new Set(wanted);
        return run('replaceInterests', store.replaceInterests(instance, id, wanted), device ? 'ok' : 'not-found');
      }
      if (roll < 0.83) {
        const userId = pick(userPool);
        let expected = 'not-found';
        if (device) {
          expected = device.userId === undefined || device.userId === userId ? 'ok' : 'already-associated';
          device.userId ??= userId;
        }
        return run('setUser', store.setUser(instance, id, userId), expected);
      }
      if (roll < 0.87) {
        const userId = pick(userPool);
        let count = 0;
        for (const [deviceId, d] of devices) {
          if (d.userId === userId) {
            devices.delete(deviceId);
            count++;
          }
        }
        return run('deleteUser', store.deleteUser(instance, userId), count);
      }
      if (roll < 0.94) {
        const token = `tok-${Math.floor(random() * 1e6)}`;
        if (device) device.token = token;
        return run('setToken', store.setToken(instance, id, token), device !== undefined);
      }
      const metadata = { sdkVersion: String(Math.floor(random() * 9)), androidVersion: '14' };
      if (device) device.metadata = metadata;
      return run('setMetadata', store.setMetadata(instance, id, metadata), device !== undefined);
    }

    function verify(store: LmdbDevices): void {
      expect(store.checkConsistency()).toEqual([]);
      for (const instance of instances) {
        const devices = devicesOf(instance);
        for (const id of deviceIds) {
          const expected = devices.get(id);
          const actual = store.get(instance, id);
          if (!expected) {
            expect(actual, `${instance}/${id}`).toBeUndefined();
            continue;
          }
          const { interests, ...fields } = expected;
          expect(actual, `${instance}/${id}`).toEqual({
            id,
            instanceId: instance,
            ...fields,
            createdAt: actual?.createdAt,
            interestCount: interests.size,
          });
          expect(allInterests(store, instance, id, 3)).toEqual([...interests].sort());
        }
        for (const userId of userPool) {
          const owned = [...devices].filter(([, d]) => d.userId === userId).map(([id]) => id);
          expect(store.countUserDevices(instance, userId)).toBe(owned.length);
          expect(scannedIds(store.scanUsers(instance, [userId])).sort()).toEqual(owned.sort());
        }
        for (let i = 0; i < 20; i++) {
          const list = Array.from({ length: 1 + Math.floor(random() * 4) }, () => pick(interestPool));
          const subscribed = [...devices].filter(([, d]) => list.some((name) => d.interests.has(name))).map(([id]) => id);
          const ids = scannedIds(store.scanInterests(instance, list));
          expect(new Set(ids).size).toBe(ids.length);
          expect(ids.sort()).toEqual(subscribed.sort());
        }
        const subscriptions = [...devices.values()].reduce((sum, d) => sum + d.interests.size, 0);
        const withUser = [...devices.values()].filter((d) => d.userId !== undefined).length;
        expect(store.counts(instance)).toEqual({ devices: devices.size, subscriptions, devicesWithUser: withUser });
      }
    }

    const { path, root, store } = freshStore();
    let done = 0;
    while (done < 2000) {
      // A few operations per event turn, so lmdb-js batches them into one transaction.
      const group = Array.from({ length: 1 + Math.floor(random() * 4) }, randomOperation);
      done += group.length;
      for (const { op, actual, expected } of await Promise.all(group)) expect(actual, op).toEqual(expected);
    }
    verify(store);

    await closeRoot(root);
    verify(openAt(path).store);
  }, 120_000);

  it('keeps every acknowledged write after the writing process is killed with SIGKILL', async () => {
    const dir = tempDir();
    const storeModule = transpileStoreForChild(join(dir, 'code'));
    const dbPath = join(dir, 'shard-0');
    const child = spawn(process.execPath, [join(projectRoot, 'test/fixtures/push/durable-writer.mjs'), storeModule, dbPath], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));

    const committed = await new Promise<number[]>((resolve, reject) => {
      const seen: number[] = [];
      let buffered = '';
      child.stdout.on('data', (chunk: Buffer) => {
        buffered += chunk.toString();
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) seen.push(Number(/^committed (\d+)$/.exec(line)?.[1]));
        if (seen.length >= 60 && !child.killed) {
          child.kill('SIGKILL');
          resolve(seen);
        }
      });
      void exited.then(() => reject(new Error(`writer exited early: ${stderr}`)));
    });
    expect(await exited).toBe('SIGKILL');
    expect(committed.every(Number.isInteger)).toBe(true);

    const { store } = openAt(dbPath);
    for (const n of committed) {
      expect(store.get('durable', `device-${n}`)).toMatchObject({ token: `token-${n}`, userId: `user-${n % 7}`, interestCount: 2 });
      expect(allInterests(store, 'durable', `device-${n}`)).toEqual(['all', `only-${n}`]);
    }
    // Writes that were in flight at the kill are either wholly there or wholly absent.
    expect(store.checkConsistency()).toEqual([]);
    expect(store.counts('durable').devices).toBeGreaterThanOrEqual(committed.length);
  }, 60_000);
});

/**
 * Writes the store's sources as plain ESM under `codeDir` (typescript's transpileModule, no
 * type check) so a child `node` can import them; node_modules is linked in for `lmdb`.
 * Returns the file URL of the transpiled lmdb-devices.js.
 */
function transpileStoreForChild(codeDir: string): string {
  const sources = [
    ...readdirSync(join(projectRoot, 'src/push/shard/devices'))
      .filter((file) => file.endsWith('.ts'))
      .map((file) => `src/push/shard/devices/${file}`),
    'src/push/store/device-store.ts',
    'src/push/keys.ts',
    'src/push/interest-name.ts',
    'src/shards/storage.ts',
    'src/shards/hash.ts',
  ];
  for (const source of sources) {
    const output = ts.transpileModule(readFileSync(join(projectRoot, source), 'utf8'), {
      compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 },
    }).outputText;
    const target = join(codeDir, source.replace(/\.ts$/, '.js'));
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, output);
  }
  writeFileSync(join(codeDir, 'package.json'), '{ "type": "module" }\n');
  symlinkSync(join(projectRoot, 'node_modules'), join(codeDir, 'node_modules'), 'dir');
  return pathToFileURL(join(codeDir, 'src/push/shard/devices/lmdb-devices.js')).href;
}
