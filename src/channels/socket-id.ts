/**
 * Socket ids that carry the front-end thread holding the connection. The Pusher format stays
 * `a.b` (digits.digits, names.ts isValidSocketId); the thread index is `a mod 64`, so any thread,
 * shard or the main thread can tell a socket's thread from its id alone. An id is unique in the
 * process when it is unique within its thread (the caller checks its own registry).
 */
import { randomInt } from 'node:crypto';
import { isValidSocketId } from './names.js';

/** Front-end threads a socket id can name (the modulus of its first number). */
export const MAX_FRONT_END_THREADS = 64;

/** 10^6 is a multiple of 64: the last six digits of a decimal number fix it mod 64. */
const DIGITS_MOD_64 = 6;

/**
 * A fresh socket id of front-end thread `thread` (0 ≤ thread < MAX_FRONT_END_THREADS): `a.b`
 * with `a = random × 64 + thread` below 2^53 (an exact double) and `b` random below 2^47.
 */
export function newSocketId(thread: number): string {
  if (!Number.isInteger(thread) || thread < 0 || thread >= MAX_FRONT_END_THREADS) throw new RangeError(`front-end thread ${thread} out of range`);
  return `${randomInt(1, 2 ** 46) * MAX_FRONT_END_THREADS + thread}.${randomInt(1, 2 ** 47)}`;
}

/** The front-end thread of a socket id: its first number mod 64; 0 for an id that does not parse. */
export function threadOf(socketId: string): number {
  if (!isValidSocketId(socketId)) return 0;
  const dot = socketId.indexOf('.');
  return Number(socketId.slice(Math.max(0, dot - DIGITS_MOD_64), dot)) % MAX_FRONT_END_THREADS;
}
