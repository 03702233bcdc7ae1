/**
 * The hashing primitives every signature in Herald uses (channel API requests, socket
 * authorisation, webhooks), in their fastest correct form on the main thread:
 *
 * - HMAC is computed per RFC 2104 from two one-shot `crypto.hash` calls over key pads derived
 *   once per key (cached), instead of a new `Hmac` object per call: about half the CPU of
 *   `createHmac` for a request-sized message (bench/crypto.bench.ts), identical output.
 * - Comparisons use `crypto.timingSafeEqual` on equal-length bytes, encoded into reusable
 *   scratch memory, so checking a signature allocates no buffer.
 *
 * Where `crypto.hash` is missing (Node < 20.12) the same functions fall back to
 * `createHmac` / `createHash`.
 */
import * as nodeCrypto from 'node:crypto';
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

type HashAlgorithm = 'sha256' | 'sha1' | 'md5';
/** `crypto.hash`'s signature, as used here. */
type OneShotHash = (algorithm: string, data: string | Uint8Array, outputEncoding: 'hex' | 'latin1') => string;

/** `crypto.hash` (Node ≥ 20.12 / 21.7), or undefined on older runtimes. */
const oneShot = (nodeCrypto as unknown as { hash?: OneShotHash }).hash;

/** Block sizes, bytes, and digest sizes, bytes, of the HMAC hash functions. */
const BLOCK_BYTES = 64;
const DIGEST_BYTES: Record<'sha256' | 'sha1', number> = { sha256: 32, sha1: 20 };

/** Keys kept with their pads; a bound so a caller signing with ever-new keys cannot grow it. */
const MAX_CACHED_KEYS = 256;

interface HmacPads {
  /** key ⊕ 0x36, BLOCK_BYTES long. */
  inner: Buffer;
  /** key ⊕ 0x5c followed by room for the inner digest. */
  outer: Buffer;
}

const padCache: Record<'sha256' | 'sha1', Map<string, HmacPads>> = { sha256: new Map(), sha1: new Map() };

function padsFor(algorithm: 'sha256' | 'sha1', key: string): HmacPads {
  const cache = padCache[algorithm];
  let pads = cache.get(key);
  if (pads === undefined) {
    let keyBytes = Buffer.from(key, 'utf8');
    if (keyBytes.length > BLOCK_BYTES) keyBytes = createHash(algorithm).update(keyBytes).digest();
    const inner = Buffer.alloc(BLOCK_BYTES, 0x36);
    const outer = Buffer.alloc(BLOCK_BYTES + DIGEST_BYTES[algorithm], 0);
    outer.fill(0x5c, 0, BLOCK_BYTES);
    for (let i = 0; i < keyBytes.length; i++) {
      inner[i]! ^= keyBytes[i]!;
      outer[i]! ^= keyBytes[i]!;
    }
    if (cache.size >= MAX_CACHED_KEYS) cache.clear();
    pads = { inner, outer };
    cache.set(key, pads);
  }
  return pads;
}

/**
 * The inner hash input (inner pad + message) for messages that fit; `scratchPads` says whose
 * inner pad its first BLOCK_BYTES hold, so a server with one app never copies it again.
 */
const innerScratch = Buffer.alloc(16 * 1024);
let scratchPads: HmacPads | undefined;
/** Views of the first n bytes of innerScratch, by n, made when first needed (n up to MAX_KEPT_VIEW_BYTES). */
const innerViews: Uint8Array[] = [];
const MAX_KEPT_VIEW_BYTES = 1024;

function innerView(length: number): Uint8Array {
  return new Uint8Array(innerScratch.buffer, innerScratch.byteOffset, length);
}

function hmacHex(algorithm: 'sha256' | 'sha1', key: string, data: string): string {
  if (oneShot === undefined) return createHmac(algorithm, key).update(data, 'utf8').digest('hex');
  const pads = padsFor(algorithm, key);
  let input: Uint8Array;
  // A UTF-16 unit is at most 3 UTF-8 bytes; a larger message gets its own buffer.
  if (BLOCK_BYTES + data.length * 3 <= innerScratch.length) {
    if (scratchPads !== pads) {
      pads.inner.copy(innerScratch, 0);
      scratchPads = pads;
    }
    const length = BLOCK_BYTES + innerScratch.write(data, BLOCK_BYTES, 'utf8');
    // A given route signs strings of the same length each time: one view per length, kept.
    input = length <= MAX_KEPT_VIEW_BYTES ? (innerViews[length] ??= innerView(length)) : innerView(length);
  } else {
    const own = Buffer.allocUnsafe(BLOCK_BYTES + Buffer.byteLength(data, 'utf8'));
    pads.inner.copy(own, 0);
    own.write(data, BLOCK_BYTES, 'utf8');
    input = own;
  }
  // The inner digest as latin1 (one char per byte) is cheaper to make than a Buffer.
  const innerDigest = oneShot(algorithm, input, 'latin1');
  pads.outer.write(innerDigest, BLOCK_BYTES, 'latin1');
  return oneShot(algorithm, pads.outer, 'hex');
}

/** Lower-case hex HMAC-SHA256 (64 characters) of `data` (UTF-8) keyed with `key` (UTF-8). */
export function hmacSha256Hex(key: string, data: string): string {
  return hmacHex('sha256', key, data);
}

/** Lower-case hex HMAC-SHA1 (40 characters) of `data` (UTF-8) keyed with `key` (UTF-8). */
export function hmacSha1Hex(key: string, data: string): string {
  return hmacHex('sha1', key, data);
}

function digestHex(algorithm: HashAlgorithm, data: Buffer | string): string {
  if (oneShot !== undefined) return oneShot(algorithm, data, 'hex');
  return createHash(algorithm).update(data).digest('hex');
}

/** Lower-case hex MD5 (32 characters) of bytes, or of a string's UTF-8 bytes. */
export function md5Hex(data: Buffer | string): string {
  return digestHex('md5', data);
}

/** Lower-case hex SHA-256 (64 characters) of bytes, or of a string's UTF-8 bytes. */
export function sha256Hex(data: Buffer | string): string {
  return digestHex('sha256', data);
}

/** Scratch for constantTimeEqual: strings up to SCRATCH_CHARS UTF-16 units compare without allocating. */
const SCRATCH_CHARS = 256;
const utf8Encoder = new TextEncoder();
const scratchA = new Uint8Array(SCRATCH_CHARS * 3);
const scratchB = new Uint8Array(SCRATCH_CHARS * 3);
/** Views of the first n bytes of scratchA / scratchB, by n, made when first needed. */
const viewsA: Uint8Array[] = [];
const viewsB: Uint8Array[] = [];

/**
 * Constant-time equality of two strings (e.g. an expected hex digest and a client-supplied
 * one) via crypto.timingSafeEqual on their equal-length UTF-8 bytes. Lengths are compared
 * first and are not secret (a hex digest's length is public); the time taken otherwise does
 * not depend on where the strings differ.
 */
export function constantTimeEqual(expected: string, given: string): boolean {
  if (expected.length !== given.length) return false;
  if (expected.length > SCRATCH_CHARS) {
    const a = Buffer.from(expected, 'utf8');
    const b = Buffer.from(given, 'utf8');
    return a.length === b.length && timingSafeEqual(a, b);
  }
  const n = utf8Encoder.encodeInto(expected, scratchA).written;
  if (utf8Encoder.encodeInto(given, scratchB).written !== n) return false;
  const a = (viewsA[n] ??= scratchA.subarray(0, n));
  const b = (viewsB[n] ??= scratchB.subarray(0, n));
  return timingSafeEqual(a, b);
}

/**
 * Constant-time equality of two secrets of any lengths (e.g. a presented API key): compares
 * their SHA-256 digests, so neither content nor length leaks through timing.
 */
export function secretEquals(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = createHash('sha256').update(expected, 'utf8').digest();
  return timingSafeEqual(a, b);
}

/** Constant-time equality of two byte strings; different lengths are unequal (and not secret). */
export function constantTimeEqualBytes(expected: Uint8Array, given: Uint8Array): boolean {
  return expected.byteLength === given.byteLength && timingSafeEqual(expected, given);
}
