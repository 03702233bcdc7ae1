import { describe, expect, it } from 'vitest';
import { SmallMap } from '../../../src/channels/small-map.js';

describe('SmallMap', () => {
  it('answers get, has, set, delete, size and keys as a Map does, whichever key came first', () => {
    const channels = new SmallMap<number>();
    const map = new Map<string, number>();
    const ops: [op: 'set' | 'delete', name: string, value?: number][] = [
      ['set', 'a', 1], ['set', 'b', 2], ['set', 'a', 3], ['delete', 'a'], ['set', 'c', 4], ['set', 'a', 5],
      ['delete', 'b'], ['delete', 'b'], ['delete', 'c'], ['set', 'b', 6], ['delete', 'a'], ['delete', 'b'], ['set', 'd', 7],
    ];
    for (const [op, name, value] of ops) {
      if (op === 'set') {
        expect(channels.set(name, value!)).toBe(channels);
        map.set(name, value!);
      } else {
        expect(channels.delete(name)).toBe(map.delete(name));
      }
      expect(channels.size).toBe(map.size);
      for (const key of ['a', 'b', 'c', 'd']) {
        expect(channels.get(key)).toBe(map.get(key));
        expect(channels.has(key)).toBe(map.has(key));
      }
      expect(new Map([...channels])).toEqual(map);
      expect(new Set(channels.keys())).toEqual(new Set(map.keys()));
    }
  });

  it('visits every entry once while entries are deleted during the iteration', () => {
    const channels = new SmallMap<string>();
    for (const name of ['first', 'second', 'third']) channels.set(name, name.toUpperCase());
    const seen: string[] = [];
    for (const [name, value] of channels) {
      seen.push(`${name}=${value}`);
      channels.delete(name);
    }
    expect(seen).toEqual(['first=FIRST', 'second=SECOND', 'third=THIRD']);
    expect(channels.size).toBe(0);
    expect([...channels]).toEqual([]);
  });
});
