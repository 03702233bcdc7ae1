/**
 * Binary keys for the device store's LMDB databases.
 *
 * A key is a tuple of strings. Each part is written as UTF-8 with the bytes 0x00 and 0x01 escaped
 * as 0x01 0x01 and 0x01 0x02, and parts are joined by 0x00. Two properties follow:
 * - byte order is tuple order: the separator sorts below every content byte, so a part sorts
 *   before any longer part it is a prefix of (`a` < `a.b` < `ab`);
 * - prefix ranges are exact: every key whose leading parts are P lies in
 *   [encode(P) + 0x00, encode(P) + 0x01), so the range of interest `a` never holds `ab`.
 * Any string is safe as a part (user ids are arbitrary text), except lone UTF-16 surrogates,
 * which UTF-8 cannot carry; those are rejected rather than silently merged into U+FFFD.
 */

const SEPARATOR = 0x00;
const ESCAPE = 0x01;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** True when `part` can be stored in a key without loss (it has no lone UTF-16 surrogate). */
export function isEncodableKeyPart(part: string): boolean {
  return !LONE_SURROGATE.test(part);
}

function partBytes(part: string): Buffer {
  const bytes = Buffer.from(part, 'utf8');
  // Only non-ASCII text can hold a surrogate; skip the regex for the common ASCII case.
  if (bytes.length !== part.length && !isEncodableKeyPart(part)) {
    throw new RangeError('key part contains a lone UTF-16 surrogate');
  }
  return bytes;
}

function escapedLength(bytes: Buffer): number {
  let length = bytes.length;
  for (let i = 0; i < bytes.length; i++) if (bytes[i]! <= ESCAPE) length++;
  return length;
}

/** Encodes a tuple as one key, with `trailer` bytes (a range bound) appended. */
function encode(parts: readonly string[], trailer: number[]): Buffer {
  const encoded = parts.map(partBytes);
  let length = trailer.length + Math.max(0, parts.length - 1);
  for (const bytes of encoded) length += escapedLength(bytes);
  const key = Buffer.allocUnsafe(length);
  let at = 0;
  encoded.forEach((bytes, index) => {
    if (index > 0) key[at++] = SEPARATOR;
    for (let i = 0; i < bytes.length; i++) {
      const byte = bytes[i]!;
      if (byte <= ESCAPE) {
        key[at++] = ESCAPE;
        key[at++] = byte + 1;
      } else {
        key[at++] = byte;
      }
    }
  });
  for (const byte of trailer) key[at++] = byte;
  return key;
}

/** The key for the tuple `parts`. Throws a RangeError for a part with a lone surrogate. */
export function encodeKey(parts: readonly string[]): Buffer {
  return encode(parts, []);
}

/** Bounds (start inclusive, end exclusive) of every key whose leading parts are `prefix`. */
export function prefixRange(prefix: readonly string[]): { start: Buffer; end: Buffer } {
  return { start: encode(prefix, [SEPARATOR]), end: encode(prefix, [ESCAPE]) };
}

/**
 * The first possible key after every key that starts with the tuple `parts`: with `parts` a
 * full key, the start of a range that continues strictly after it.
 */
export function keyAfter(parts: readonly string[]): Buffer {
  return encode(parts, [ESCAPE]);
}

function decodePart(key: Buffer, start: number, end: number): string {
  let escapes = 0;
  for (let i = start; i < end; i++) {
    if (key[i] === ESCAPE) {
      escapes++;
      i++; // the escaped byte may itself be 0x01
    }
  }
  if (escapes === 0) return key.toString('utf8', start, end);
  const bytes = Buffer.allocUnsafe(end - start - escapes);
  let at = 0;
  for (let i = start; i < end; i++) {
    const byte = key[i]!;
    bytes[at++] = byte === ESCAPE ? key[++i]! - 1 : byte;
  }
  return bytes.toString('utf8');
}

function asBuffer(key: Uint8Array): Buffer {
  return Buffer.isBuffer(key) ? key : Buffer.from(key.buffer, key.byteOffset, key.byteLength);
}

/** The tuple a key was encoded from. */
export function decodeKey(key: Uint8Array): string[] {
  const bytes = asBuffer(key);
  const parts: string[] = [];
  let start = 0;
  for (let i = 0; i <= bytes.length; i++) {
    if (i === bytes.length || bytes[i] === SEPARATOR) {
      parts.push(decodePart(bytes, start, i));
      start = i + 1;
    }
  }
  return parts;
}

/** Where the last part of a key begins, in bytes (separators are the only 0x00 bytes). */
export function lastPartOffset(key: Uint8Array): number {
  return key.lastIndexOf(SEPARATOR) + 1;
}

/** The last part of a key, without decoding the others. */
export function lastKeyPart(key: Uint8Array): string {
  return decodePart(asBuffer(key), lastPartOffset(key), key.length);
}

/** The key part in bytes [start, end) of `key` (a whole part, start and end at part boundaries). */
export function keyPartBetween(key: Buffer, start: number, end: number): string {
  return decodePart(key, start, end);
}

/**
 * Writes the encoded bytes of one key part (encodeKey([part])) into `target` at `at` and returns
 * where they end: for lmdb-js key encoders, which write keys straight into lmdb-js's key buffer.
 * ASCII without 0x00/0x01 is written as is; anything else goes through encodeKey (escaping, and
 * the lone-surrogate check). Throws a RangeError when `target` has no room.
 */
export function writeKeyPart(part: string, target: Buffer, at: number): number {
  const end = at + part.length;
  if (end <= target.length) {
    let i = 0;
    for (; i < part.length; i++) {
      const code = part.charCodeAt(i);
      if (code <= ESCAPE || code > 0x7f) break;
      target[at + i] = code;
    }
    if (i === part.length) return end;
  }
  const encoded = encodeKey([part]);
  target.set(encoded, at);
  return at + encoded.length;
}

/**
 * encodeKey([...a, ...b]) from `head` = encodeKey(a) and the bytes of encodeKey(b) that start at
 * `tailStart` in `tail` (at a part boundary), copied as they are: no decoding and re-encoding.
 * With tailStart = lastPartOffset(tail), b is the last part of `tail`.
 */
export function joinKeys(head: Uint8Array, tail: Uint8Array, tailStart = 0): Buffer {
  const key = Buffer.allocUnsafe(head.length + 1 + tail.length - tailStart);
  key.set(head, 0);
  let at = head.length;
  key[at++] = SEPARATOR;
  for (let i = tailStart; i < tail.length; i++) key[at++] = tail[i]!;
  return key;
}
