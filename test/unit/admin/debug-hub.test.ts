import { afterEach, describe, expect, it } from 'vitest';
import { DebugHub, type DebugMessage } from '../../../src/admin/debug-hub.js';

let hub: DebugHub | undefined;
afterEach(() => hub?.close());

function newHub(now: () => number, maxEventsPerSecond = 10): DebugHub {
  hub = new DebugHub({ dataDir: `/tmp/debug-hub-test-${Math.random()}`, maxEventsPerSecond, now });
  return hub;
}

describe('DebugHub', () => {
  it('is off until a listener watches the app, and off again after it leaves', () => {
    const h = newHub(() => 0);
    expect(h.watching('a')).toBe(false);
    const got: DebugMessage[] = [];
    h.connectionOpened('a', '1.1');
    const stop = h.watch('a', (m) => got.push(m));
    expect(h.watching('a')).toBe(true);
    expect(h.watching('b')).toBe(false);
    h.connectionOpened('a', '1.2');
    h.connectionOpened('b', '1.3');
    h.apiEvent('a', ['c1', 'c2'], 'e', 'd');
    stop();
    h.connectionOpened('a', '1.4');
    expect(h.watching('a')).toBe(false);
    expect(got.map((m) => m.type === 'event' && m.event.kind)).toEqual(['connection', 'api_event']);
    // The overview's counters run whether watched or not.
    expect(h.connectionsOpened).toBe(4);
    expect(h.messages).toBe(2);
  });

  it('cuts long data to a preview and keeps its size', () => {
    const h = newHub(() => 0);
    const got: DebugMessage[] = [];
    h.watch('a', (m) => got.push(m));
    h.clientEvent('a', 'private-c', 'client-x', 'y'.repeat(5000), '1.1', 'u1');
    const m = got[0]!;
    expect(m.type === 'event' && m.event.kind === 'client_event' && m.event.data.length < 400 && m.event.dataBytes === 5000 && m.event.userId === 'u1').toBe(true);
  });

  it('samples over the per-second budget and says so, then stops sampling when the load is gone', () => {
    let now = 0;
    const h = newHub(() => now, 10);
    const got: DebugMessage[] = [];
    h.watch('a', (m) => got.push(m));
    for (let i = 0; i < 40; i++) h.apiEvent('a', ['c'], `e${i}`, '');
    const events = () => got.filter((m) => m.type === 'event').length;
    const notices = () => got.filter((m): m is Extract<DebugMessage, { type: 'sampling' }> => m.type === 'sampling');
    // 10 in full, then one in two of the rest of the burst (events 12, 14, ... 38).
    expect(events()).toBe(10 + 14);
    expect(notices().map((n) => n.every)).toEqual([2]);
    // The next second: 40 seen last second, budget 10 → one in 4.
    now = 1000;
    for (let i = 0; i < 40; i++) h.apiEvent('a', ['c'], 'e', '');
    expect(notices().at(-1)!.every).toBe(4);
    expect(events()).toBe(24 + 10);
    // A quiet gap: back to every event, and the page is told.
    now = 5000;
    h.apiEvent('a', ['c'], 'e', '');
    expect(notices().at(-1)!.every).toBe(1);
    expect(events()).toBe(35);
  });

  it('keeps the recent publishes of each instance, newest first, bounded', () => {
    const h = newHub(() => 0);
    for (let i = 0; i < 30; i++) {
      h.publishAccepted({ publishId: `p${i}`, instanceId: 'i1', kind: 'interests', targets: ['x'], payloads: {}, acceptedAt: i });
    }
    const recent = h.recentPublishes('i1');
    expect(recent).toHaveLength(20);
    expect(recent[0]!.publishId).toBe('p29');
    expect(h.recentPublishes('i2')).toEqual([]);
  });
});
