import { describe, expect, it } from 'vitest';
import { HISTORY_DATABASE, HistoryStore, type HistoryBounds } from '../../../../src/channels/history/history-store.js';
import { formatSerial } from '../../../../src/channels/history/serial.js';
import { cacheEntryBytes } from '../../../../src/channels/state/channel-store.js';
import { temporaryShardDatabases } from '../../../helpers/shard-database.js';

const openRoot = temporaryShardDatabases('history');
const BOUNDS: HistoryBounds = { maxEvents: 100, ttlSeconds: 60, maxBytes: 1_000_000 };

function clock(start = 1_800_000_000_000): { now: () => number; advance: (ms: number) => void } {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

const datas = (read: { events: { data: string }[] }): string[] => read.events.map((e) => e.data);

/** Appends and waits for the commit (reads leave out events not committed yet); answers the serial. */
async function keep(store: HistoryStore, channel: string, data: string, bounds: HistoryBounds, userId?: string): Promise<string> {
  const { serial, written, answered } = store.append('app', channel, 'e', data, userId, bounds);
  await written;
  answered();
  return serial;
}

describe('HistoryStore', () => {
  it('gives serials in order and answers the events after one, complete only when nothing is missing', async () => {
    const store = new HistoryStore(openRoot(), () => BOUNDS, clock().now);
    const serials = [await keep(store, 'h', 'a', BOUNDS), await keep(store, 'h', 'b', BOUNDS), await keep(store, 'h', 'c', BOUNDS)];
    expect([...serials].sort()).toEqual(serials);
    expect(store.read('app', 'h', serials[0], 10, BOUNDS)).toMatchObject({ complete: true, events: [{ data: 'b' }, { data: 'c' }] });
    expect(store.read('app', 'h', serials[2], 10, BOUNDS)).toEqual({ complete: true, events: [] });
    expect(store.read('app', 'h', serials[0], 1, BOUNDS).complete).toBe(false);
    expect(datas(store.read('app', 'h', undefined, 2, BOUNDS))).toEqual(['b', 'c']);
    // Another app's channel of the same name is its own.
    expect(store.read('other', 'h', serials[0], 10, BOUNDS)).toEqual({ complete: false, events: [] });
  });

  it('keeps the last maxEvents, for ttlSeconds: a since before what was evicted is not complete', async () => {
    const c = clock();
    const bounds = { ...BOUNDS, maxEvents: 2 };
    const store = new HistoryStore(openRoot(), () => bounds, c.now);
    const s: string[] = [];
    for (const d of ['0', '1', '2', '3']) s.push(await keep(store, 'h', d, bounds));
    expect(datas(store.read('app', 'h', undefined, 10, bounds))).toEqual(['2', '3']);
    expect(store.read('app', 'h', s[1], 10, bounds)).toMatchObject({ complete: true, events: [{ data: '2' }, { data: '3' }] });
    expect(store.read('app', 'h', s[0], 10, bounds).complete).toBe(false);
    c.advance(61_000);
    expect(store.read('app', 'h', s[3], 10, bounds)).toEqual({ complete: true, events: [] });
    expect(store.read('app', 'h', s[2], 10, bounds).complete).toBe(false);
  });

  it('bounds the app by maxBytes, oldest kept evicted first across channels; too large an event drops its channel\'s older ones', async () => {
    const one = cacheEntryBytes('h1', 'e', 'x'.repeat(100));
    const bounds = { ...BOUNDS, maxBytes: 3 * one };
    const store = new HistoryStore(openRoot(), () => bounds, clock().now);
    const first = await keep(store, 'h1', 'x'.repeat(100), bounds);
    await keep(store, 'h2', 'x'.repeat(100), bounds);
    await keep(store, 'h1', 'x'.repeat(100), bounds);
    await keep(store, 'h2', 'x'.repeat(100), bounds);
    expect(store.keptBytes('app')).toBe(3 * one);
    expect(store.read('app', 'h1', undefined, 10, bounds).events).toHaveLength(1);
    expect(store.read('app', 'h1', first, 10, bounds)).toMatchObject({ complete: true, events: [{}] });
    const kept = store.read('app', 'h2', undefined, 10, bounds).events;
    await keep(store, 'h2', 'y'.repeat(4 * one), bounds);
    expect(store.read('app', 'h2', undefined, 10, bounds).events).toEqual([]);
    expect(store.read('app', 'h2', kept[1]!.serial, 10, bounds).complete).toBe(false);
  });

  it('reads back what it kept after a restart and goes on with later serials', async () => {
    const root = openRoot();
    const c = clock();
    const store = new HistoryStore(root, () => BOUNDS, c.now);
    const s = [await keep(store, 'h', '0', BOUNDS, 'u1'), await keep(store, 'h', '1', BOUNDS, 'u1')];
    c.advance(1000);
    const again = new HistoryStore(root, () => BOUNDS, c.now);
    expect(again.read('app', 'h', undefined, 10, BOUNDS).events).toEqual(store.read('app', 'h', undefined, 10, BOUNDS).events);
    const next = await keep(again, 'h', '2', BOUNDS);
    expect(next > s[1]!).toBe(true);
    expect(again.read('app', 'h', s[1], 10, BOUNDS)).toMatchObject({ complete: true, events: [{ data: '2', serial: next }] });
    // An app that no longer keeps history finds nothing after the next start.
    const without = new HistoryStore(root, (appId) => (appId === 'app' ? null : BOUNDS), c.now);
    expect(without.read('app', 'h', undefined, 10, BOUNDS).events).toEqual([]);
  });

  it('leaves out of reads an event not answered yet (committed, and its answer going out)', async () => {
    const store = new HistoryStore(openRoot(), () => BOUNDS, clock().now);
    const first = await keep(store, 'h', 'a', BOUNDS);
    const { written, answered } = store.append('app', 'h', 'e', 'b', undefined, BOUNDS);
    expect(store.read('app', 'h', first, 10, BOUNDS)).toEqual({ complete: true, events: [] });
    await written;
    expect(store.read('app', 'h', first, 10, BOUNDS)).toEqual({ complete: true, events: [] });
    answered();
    expect(datas(store.read('app', 'h', first, 10, BOUNDS))).toEqual(['b']);
  });

  it('keeps each event\'s except socket for readEnvelopes, across a restart; read() never shows it; a record without one excludes nobody', async () => {
    const root = openRoot();
    const c = clock();
    // Records as written before the except socket was kept: [event, data, publishedAt, userId?].
    const generation = c.now() - 1000;
    const old = root.openDB<unknown[], string[]>({ name: HISTORY_DATABASE });
    await old.put(['app', 'h', formatSerial(generation, 1)], ['e', 'old', c.now() - 1000]);
    await old.put(['app', 'h', formatSerial(generation, 2)], ['e', 'old-user', c.now() - 1000, 'u1']);
    const store = new HistoryStore(root, () => BOUNDS, c.now);
    const keepExcept = async (data: string, userId: string | undefined, except: string | undefined): Promise<void> => {
      const { written, answered } = store.append('app', 'h', 'e', data, userId, BOUNDS, except);
      await written;
      answered();
    };
    await keepExcept('mine', undefined, '1.1');
    await keepExcept('mine-user', 'u2', '2.2');
    await keepExcept('everyone', undefined, undefined);
    const expected = [
      { data: 'old', exceptSocketId: undefined, userId: undefined },
      { data: 'old-user', exceptSocketId: undefined, userId: 'u1' },
      { data: 'mine', exceptSocketId: '1.1', userId: undefined },
      { data: 'mine-user', exceptSocketId: '2.2', userId: 'u2' },
      { data: 'everyone', exceptSocketId: undefined, userId: undefined },
    ];
    const envelopes = (s: HistoryStore) => s.readEnvelopes('app', 'h', undefined, 10, BOUNDS).envelopes.map((e) => ({ data: e.kept.data, exceptSocketId: e.exceptSocketId, userId: e.kept.userId }));
    expect(envelopes(store)).toEqual(expected);
    for (const e of store.read('app', 'h', undefined, 10, BOUNDS).events) expect(Object.keys(e).sort()).toEqual(e.userId === undefined ? ['data', 'event', 'publishedAt', 'serial'] : ['data', 'event', 'publishedAt', 'serial', 'userId']);
    expect(envelopes(new HistoryStore(root, () => BOUNDS, c.now))).toEqual(expected);
    // A Herald from before reads [event, data, publishedAt, userId?] and ignores the rest: an
    // event with an except socket and no user must read as one with no user there.
    const records = [...old.getRange({})].map(({ value }) => value);
    expect(records.map((r) => r[3])).toEqual([undefined, 'u1', undefined, 'u2', undefined]);
  });

  it('drops a removed app\'s events', async () => {
    const store = new HistoryStore(openRoot(), () => BOUNDS, clock().now);
    await keep(store, 'h', 'd', BOUNDS);
    store.removeApp('app');
    expect(store.keptBytes('app')).toBe(0);
    expect(store.read('app', 'h', undefined, 10, BOUNDS).events).toEqual([]);
  });
});
