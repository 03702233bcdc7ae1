/**
 * Microseconds of the machine's monotonic clock (CLOCK_MONOTONIC, what process.hrtime reads),
 * so a timestamp written by the trigger sender can be subtracted from the receive time in
 * another process. performance.now() reads the same clock; anchoring it once to hrtime
 * keeps the per-frame cost to one call and no BigInt.
 */
import { performance } from 'node:perf_hooks';

const hrtimeUs = (): number => Number(process.hrtime.bigint() / 1000n);

/**
 * hrtime − performance.now(), µs. Read naively once, it is off by whatever happens between the
 * two reads: ~1 ms on a first call (lazy set-up), several ms when the process is preempted
 * there on a busy machine, and every latency this process records is off by as much. So it is
 * read as a pair of hrtime readings around a performance.now(), many times, and the pair that
 * brackets most tightly wins.
 */
function anchor(): number {
  let best = Number.POSITIVE_INFINITY;
  let anchorUs = 0;
  for (let i = 0; i < 200; i++) {
    const before = hrtimeUs();
    const now = performance.now() * 1000;
    const after = hrtimeUs();
    if (after - before < best) {
      best = after - before;
      anchorUs = (before + after) / 2 - now;
    }
  }
  return anchorUs;
}

const anchorUs = anchor();

/** Monotonic time in microseconds, comparable across processes on this machine. */
export function monotonicUs(): number {
  return performance.now() * 1000 + anchorUs;
}

/** Whole-number microseconds as written into event data. */
export function stampUs(): number {
  return Math.round(monotonicUs());
}
