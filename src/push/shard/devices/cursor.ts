/**
 * The opaque `nextCursor` of the interest listing (D12). It carries the last interest name
 * returned, so the next page continues strictly after that name and stays correct while
 * interests are added or removed between pages. Encoded as base64url of versioned JSON so the
 * format can change without misreading old cursors.
 */
import { isValidInterestName } from '../../interest-name.js';

const CURSOR_VERSION = 1;
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** Long enough for the version and a 164-character name; anything longer is not ours. */
const MAX_CURSOR_LENGTH = 512;

interface InterestCursorBody {
  v: typeof CURSOR_VERSION;
  after: string;
}

/** The cursor for the page that starts after the interest `lastName`. */
export function encodeInterestCursor(lastName: string): string {
  const body: InterestCursorBody = { v: CURSOR_VERSION, after: lastName };
  return Buffer.from(JSON.stringify(body), 'utf8').toString('base64url');
}

/** The interest name a cursor continues after, or undefined when the cursor is not one of ours. */
export function decodeInterestCursor(cursor: string): string | undefined {
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !BASE64URL.test(cursor)) return undefined;
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const { v, after } = body as Partial<Record<keyof InterestCursorBody, unknown>>;
  if (v !== CURSOR_VERSION || !isValidInterestName(after)) return undefined;
  return after;
}
