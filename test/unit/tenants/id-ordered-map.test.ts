import { describe, expect, it } from 'vitest';
import { IdOrderedMap } from '../../../src/tenants/id-ordered-map.js';

/** Every page of `limit` after another, as the admin API's cursor walks them. */
function walk(map: IdOrderedMap<string>, limit: number, matches?: (v: string) => boolean): string[][] {
  const pages: string[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const { items, nextCursor } = map.pageAfter(cursor, limit, matches);
    pages.push(items);
    if (nextCursor === null) return pages;
    cursor = nextCursor;
  }
}

describe('IdOrderedMap', () => {
  it('pages its values in id order through any sequence of sets and deletes, each once', () => {
    const map = new IdOrderedMap<string>();
    const reference = new Map<string, string>();
    let seed = 7;
    const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let step = 0; step < 3000; step++) {
      const id = `id-${Math.floor(random() * 500)}`;
      if (random() < 0.3) {
        expect(map.delete(id)).toBe(reference.delete(id));
      } else {
        map.set(id, `v-${id}-${step}`);
        reference.set(id, `v-${id}-${step}`);
      }
    }
    const sorted = [...reference.keys()].sort().map((id) => reference.get(id)!);
    expect(map.size).toBe(reference.size);
    expect(walk(map, 1000).flat()).toEqual(sorted);
    const pages = walk(map, 7);
    expect(pages.flat()).toEqual(sorted);
    expect(pages.slice(0, -1).every((p) => p.length === 7)).toBe(true);
  });

  it('starts after a cursor that is not an id, and filters without losing its place', () => {
    const map = new IdOrderedMap<string>([['b', 'B'], ['d', 'D'], ['a', 'A'], ['c', 'C'], ['e', 'E']]);
    expect(map.pageAfter('bb', 2)).toEqual({ items: ['C', 'D'], nextCursor: 'd' });
    expect(map.pageAfter('d', 2)).toEqual({ items: ['E'], nextCursor: null });
    expect(map.pageAfter(undefined, 5)).toEqual({ items: ['A', 'B', 'C', 'D', 'E'], nextCursor: null });
    const vowels = (v: string) => 'AE'.includes(v);
    expect(map.pageAfter(undefined, 1, vowels)).toEqual({ items: ['A'], nextCursor: 'a' });
    expect(map.pageAfter('a', 1, vowels)).toEqual({ items: ['E'], nextCursor: null });
    map.clear();
    expect(map.pageAfter(undefined, 5)).toEqual({ items: [], nextCursor: null });
  });
});
