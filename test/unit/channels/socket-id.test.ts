/**
 * Socket ids carry their front-end thread: every thread's ids are valid Pusher socket ids and
 * give the thread back, whatever the length of their first number; ids that do not parse are
 * thread 0.
 */
import { describe, expect, it } from 'vitest';
import { isValidSocketId } from '../../../src/channels/names.js';
import { MAX_FRONT_END_THREADS, newSocketId, threadOf } from '../../../src/channels/socket-id.js';

describe('socket ids', () => {
  it('are valid Pusher socket ids that give their thread back, for every thread', () => {
    expect(MAX_FRONT_END_THREADS).toBe(64);
    for (let thread = 0; thread < MAX_FRONT_END_THREADS; thread++) {
      for (let i = 0; i < 20; i++) {
        const id = newSocketId(thread);
        expect(isValidSocketId(id), id).toBe(true);
        expect(threadOf(id), id).toBe(thread);
        // The first number stays an exact double.
        expect(Number.isSafeInteger(Number(id.split('.')[0])), id).toBe(true);
      }
    }
  });

  it('are not repeated', () => {
    const ids = new Set(Array.from({ length: 10_000 }, () => newSocketId(3)));
    expect(ids.size).toBe(10_000);
  });

  it('refuses a thread out of range', () => {
    for (const thread of [-1, MAX_FRONT_END_THREADS, 1.5, Number.NaN]) expect(() => newSocketId(thread)).toThrow(RangeError);
  });

  it('reads the thread of any first number exactly, long ones included', () => {
    for (const first of ['1', '63', '64', '130', '9999999', '9223372036854775807', '1234567890123456789']) {
      expect(threadOf(`${first}.5`), first).toBe(Number(BigInt(first) % 64n));
    }
  });

  it('answers 0 for an id that does not parse', () => {
    for (const id of ['', 'abc', '.5', '12', '12.', '-65.1', 'x65.1', '6 5.1', '0x41.1', '1e2.1']) {
      expect(threadOf(id), id).toBe(0);
    }
  });
});
