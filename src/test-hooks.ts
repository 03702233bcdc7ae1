/**
 * Test hooks read from the environment: honoured only with HERALD_TEST_HOOKS=1, so that a
 * user's environment can never reach the states they exist to test.
 */

/** The whole number `name` holds, when test hooks are on and it is at least `min`; else undefined. */
export function testHookNumber(name: string, min = 1): number | undefined {
  if (process.env.HERALD_TEST_HOOKS !== '1') return undefined;
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value >= min ? value : undefined;
}
