import { describe, expect, it } from 'vitest';
import { mergeHandlers } from '../../../src/shards/context.js';

describe('shard worker runtime', () => {
  it('joins the handler maps of every area', () => {
    const merged = mergeHandlers([{ 'core.ping': () => 1 }, { 'a.one': () => 2, 'a.two': () => 3 }, { 'b.one': () => 4 }]);
    expect(Object.keys(merged)).toEqual(['core.ping', 'a.one', 'a.two', 'b.one']);
    expect(merged['b.one']?.(undefined)).toBe(4);
    expect(merged['constructor']).toBeUndefined();
  });

  it('refuses two areas answering the same request type', () => {
    expect(() => mergeHandlers([{ 'a.one': () => 1 }, { 'b.one': () => 2, 'a.one': () => 3 }])).toThrow('shard request type a.one is answered by two areas');
  });
});
