import { describe, expect, it } from 'vitest';
import { InterestTable, TopicInterest, interestBytes } from '../../../src/front-end/interest.js';

describe('topic interest', () => {
  it('sets a thread cell on the first subscription of a topic and clears it on the last', () => {
    const table = new InterestTable(new SharedArrayBuffer(interestBytes(3)), 3);
    const t1 = new TopicInterest(table, 1);
    const t2 = new TopicInterest(table, 2);
    expect(table.maskFor('app:ch', 0)).toBe(0);
    t1.add('app:ch');
    t1.add('app:ch');
    t2.add('app:ch');
    expect(table.maskFor('app:ch', 0)).toBe(0b110);
    // The publishing thread is never addressed.
    expect(table.maskFor('app:ch', 1)).toBe(0b100);
    t1.remove('app:ch');
    expect(table.maskFor('app:ch', 0)).toBe(0b110);
    t1.remove('app:ch');
    t2.remove('app:ch');
    expect(table.maskFor('app:ch', 0)).toBe(0);
    // A topic never added is ignored.
    t2.remove('app:other');
    expect(table.maskFor('app:other', 0)).toBe(0);
    expect(t1.count('app:ch')).toBe(0);
  });

  it('clears a thread column', () => {
    const table = new InterestTable(new SharedArrayBuffer(interestBytes(2)), 2);
    new TopicInterest(table, 1).add('a:b');
    table.clearThread(1);
    expect(table.maskFor('a:b', 0)).toBe(0);
  });
});
