import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { constantTimeEqual, constantTimeEqualBytes, hmacSha1Hex, hmacSha256Hex, md5Hex, sha256Hex } from '../../src/crypto.js';

const KEYS = [
  '',
  'secret',
  'b2c3d4e5f6a7b8c9d0e1f2a3',
  'k'.repeat(64), // exactly one block
  'k'.repeat(65), // longer than a block: hashed first
  'x'.repeat(200),
  'clé-ünïcode-🔑',
];
const MESSAGES = [
  '',
  'POST\n/apps/1/events\nauth_key=k&auth_timestamp=1&auth_version=1.0&body_md5=d41d8cd98f00b204e9800998ecf8427e',
  'naïve ☃ 🎉 text',
  'lone surrogate \ud800 here',
  'm'.repeat(6_000), // 18 KB worst case: bigger than the shared scratch
  'é'.repeat(60_000), // 120 KB of UTF-8
];

describe('crypto primitives', () => {
  it('computes the same HMAC-SHA256 and HMAC-SHA1 as createHmac for keys and messages of every size', () => {
    for (const key of KEYS) {
      for (const message of MESSAGES) {
        expect(hmacSha256Hex(key, message)).toBe(createHmac('sha256', key).update(message, 'utf8').digest('hex'));
        expect(hmacSha1Hex(key, message)).toBe(createHmac('sha1', key).update(message, 'utf8').digest('hex'));
      }
    }
  });

  it('keeps HMACs right when calls alternate between keys and algorithms', () => {
    for (let i = 0; i < 50; i++) {
      const key = KEYS[i % KEYS.length]!;
      const message = `message ${i} ${'y'.repeat(i * 37)}`;
      expect(hmacSha256Hex(key, message)).toBe(createHmac('sha256', key).update(message).digest('hex'));
      expect(hmacSha1Hex(key, message)).toBe(createHmac('sha1', key).update(message).digest('hex'));
    }
  });

  it('computes MD5 and SHA-256 of bytes and of strings', () => {
    for (const message of MESSAGES) {
      const bytes = Buffer.from(message, 'utf8');
      expect(md5Hex(bytes)).toBe(createHash('md5').update(bytes).digest('hex'));
      expect(md5Hex(message)).toBe(createHash('md5').update(message, 'utf8').digest('hex'));
      expect(sha256Hex(message)).toBe(createHash('sha256').update(message, 'utf8').digest('hex'));
    }
  });

  it('compares strings exactly, whatever their length or characters', () => {
    const sig = hmacSha256Hex('secret', 'x');
    const other = (c: string): string => (c === '0' ? '1' : '0');
    expect(constantTimeEqual(sig, `${sig}`)).toBe(true);
    expect(constantTimeEqual(sig, `${sig.slice(0, -1)}${other(sig.at(-1)!)}`)).toBe(false);
    expect(constantTimeEqual(sig, `${other(sig[0]!)}${sig.slice(1)}`)).toBe(false);
    expect(constantTimeEqual('0a1b', '0A1B')).toBe(false);
    expect(constantTimeEqual(sig, sig.slice(0, -1))).toBe(false);
    expect(constantTimeEqual('', '')).toBe(true);
    // Same UTF-16 length, different UTF-8 lengths.
    expect(constantTimeEqual('ab', 'aé')).toBe(false);
    // A character whose low byte is 'a' is not 'a'.
    expect(constantTimeEqual('a', '\u0161')).toBe(false);
    expect(constantTimeEqual('\u0161', '\u0161')).toBe(true);
    // Longer than the scratch buffers.
    const long = 'z'.repeat(1_000);
    expect(constantTimeEqual(long, 'z'.repeat(1_000))).toBe(true);
    expect(constantTimeEqual(long, `${'z'.repeat(999)}y`)).toBe(false);
    // Reusing the scratch for a shorter string after a longer one.
    expect(constantTimeEqual('abc', 'abc')).toBe(true);
    expect(constantTimeEqual('abc', 'abd')).toBe(false);
  });

  it('compares byte strings, unequal when their lengths differ', () => {
    expect(constantTimeEqualBytes(Buffer.from('abc'), Buffer.from('abc'))).toBe(true);
    expect(constantTimeEqualBytes(Buffer.from('abc'), Buffer.from('abd'))).toBe(false);
    expect(constantTimeEqualBytes(Buffer.from('abc'), Buffer.from('ab'))).toBe(false);
  });
});
