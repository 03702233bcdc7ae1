/**
 * Microseconds of the machine's monotonic clock (CLOCK_MONOTONIC, what process.hrtime reads),
 * so a timestamp written by the trigger sender can be subtracted from the receive time in
 * another process. performance.now() reads the same clock; anchoring it once to hrtime
 * keeps the per-frame cost to one call and no BigInt.
 */
import { performance } from 'node:perf_hooks';

const anchorUs = Number(process.hrtime.bigint() / 1000n) - performance.now() * 1000;

/** Monotonic time in microseconds, comparable across processes on this machine. */
export function monotonicUs(): number {
  return performance.now() * 1000 + anchorUs;
}

/** Whole-number microseconds as written into event data. */
export function stampUs(): number {
  return Math.round(monotonicUs());
}
