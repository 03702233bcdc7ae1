/**
 * Interest names and the per-device interest limit.
 * The device API validates with these before calling the store; the store re-checks only the
 * count, as a guard against a caller bug writing an unbounded set in one transaction.
 */

/** Longest interest name, in characters (all allowed characters are ASCII, so also bytes). */
export const MAX_INTEREST_NAME_LENGTH = 164;

/** Most interests one device may be subscribed to (D13). */
export const MAX_INTERESTS_PER_DEVICE = 5000;

const INTEREST_NAME = new RegExp(`^[A-Za-z0-9_\\-=@,.;]{1,${MAX_INTEREST_NAME_LENGTH}}$`);

/** True when `name` is a non-empty interest name of at most 164 characters from `A-Za-z0-9_-=@,.;`. */
export function isValidInterestName(name: unknown): name is string {
  return typeof name === 'string' && INTEREST_NAME.test(name);
}
