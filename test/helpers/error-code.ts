import { HeraldError } from '../../src/errors.js';

/**
 * The HeraldError code `f` throws, or undefined when it returns; any other error is rethrown,
 * so a test that expects a code fails on the wrong kind of failure.
 */
export function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (err) {
    if (err instanceof HeraldError) return err.code;
    throw err;
  }
  return undefined;
}
