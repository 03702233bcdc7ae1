/**
 * The one way tests wait (test/unit/waiting-in-tests.test.ts keeps it so):
 * - `until(check, what, timeoutMs)`: polls a condition until it holds (`untilBackToBack` for a
 *   check that itself waits, such as a long poll);
 * - `nextEvent(emitter, name, what, timeoutMs)`: the next emission of an event;
 * - `flushedBy(sendMarker, markerArrived, what)`: proves that nothing more arrives by sending a
 *   marker after what is under test and waiting for the marker (instead of sleeping);
 * - `sleep(ms)`: only where time itself is what is tested, each call with a `// time:` comment
 *   saying why, on its line or the line above.
 * Bounds are generous: the machine running the suite is loaded.
 */
import { once, type EventEmitter } from 'node:events';

type Truthy<T> = Exclude<T, null | undefined | false | 0 | ''>;

/** Polling period of until(), ms. */
const POLL_MS = 10;

/** Waits `ms` milliseconds. Only where time itself is tested; say why in a `// time:` comment. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Resolves with the first truthy value `check` returns (it may be async); throws naming `what`
 * after `timeoutMs`. A check that throws counts as not yet, its last error is in the timeout's
 * message. `what` may be a function, read at the timeout (to report the last value seen).
 */
export function until<T>(check: () => T | Promise<T>, what: string | (() => string), timeoutMs = 10_000): Promise<Truthy<T>> {
  return tryUntil(check, what, timeoutMs, true);
}

/**
 * until() for a check that itself waits (a long poll the server holds until it has something):
 * the tries run back to back, with no pause between them.
 */
export function untilBackToBack<T>(check: () => T | Promise<T>, what: string | (() => string), timeoutMs = 10_000): Promise<Truthy<T>> {
  return tryUntil(check, what, timeoutMs, false);
}

async function tryUntil<T>(check: () => T | Promise<T>, what: string | (() => string), timeoutMs: number, pause: boolean): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const started = Date.now();
    try {
      const value = await check();
      if (value) return value as Truthy<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const described = typeof what === 'function' ? what() : what;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${described}${lastError ? `: ${String(lastError)}` : ''}`);
    }
    // A slow check (an HTTP query) is not run more than half the time.
    if (pause) await sleep(Math.max(POLL_MS, Date.now() - started));
  }
}

/** Resolves with the first argument of `emitter`'s next `name` event; throws naming `what` after `timeoutMs`. */
export async function nextEvent<T = unknown>(emitter: EventEmitter, name: string, what = `event '${name}'`, timeoutMs = 10_000): Promise<T> {
  try {
    const [value] = (await once(emitter, name, { signal: AbortSignal.timeout(timeoutMs) })) as [T];
    return value;
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    throw err;
  }
}

/**
 * For "nothing (more) arrives": sends a marker down the same ordered path as what is under test
 * (an event on the same channel, a request to the same receiver) and waits until it arrived.
 * Whatever was to arrive before it has arrived by then: assert on it afterwards.
 */
export async function flushedBy(sendMarker: () => unknown, markerArrived: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  await sendMarker();
  await until(markerArrived, what, timeoutMs);
}
