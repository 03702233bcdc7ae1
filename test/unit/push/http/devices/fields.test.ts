import { describe, expect, it } from 'vitest';
import { codeOf } from '../../../../helpers/error-code.js';
import { parseInterestLimit, parseInterestSet, parseMetadata } from '../../../../../src/push/http/devices/fields.js';

describe('device API fields', () => {
  it('keeps the platform metadata fields, strings only, null as absent', () => {
    expect(parseMetadata('apns', { sdkVersion: '1', iosVersion: '17', macosVersion: null, androidVersion: 'x', other: 5 })).toEqual({ sdkVersion: '1', iosVersion: '17' });
    expect(parseMetadata('fcm', { sdkVersion: '1', androidVersion: '14', iosVersion: 'x' })).toEqual({ sdkVersion: '1', androidVersion: '14' });
    expect(parseMetadata('web', { sdkVersion: '1', userAgent: 'x' })).toEqual({ sdkVersion: '1' });
    expect(codeOf(() => parseMetadata('fcm', { sdkVersion: 1 }))).toBe('INVALID_METADATA');
    expect(codeOf(() => parseMetadata('fcm', ['a']))).toBe('INVALID_METADATA');
    expect(codeOf(() => parseMetadata('fcm', 'a'))).toBe('INVALID_METADATA');
    expect(codeOf(() => parseMetadata('fcm', { sdkVersion: 'x'.repeat(257) }))).toBe('INVALID_METADATA');
  });

  it('validates, de-duplicates and sorts an interest set of at most 5000', () => {
    expect(parseInterestSet({ interests: ['b', 'a', 'b'] })).toEqual(['a', 'b']);
    expect(parseInterestSet({ interests: [] })).toEqual([]);
    const five = Array.from({ length: 5000 }, (_, i) => `n${i}`);
    expect(parseInterestSet({ interests: [...five, 'n1'] })).toHaveLength(5000);
    expect(codeOf(() => parseInterestSet({ interests: [...five, 'extra'] }))).toBe('TOO_MANY_INTERESTS');
    expect(codeOf(() => parseInterestSet({ interests: ['ok', 7] }))).toBe('INVALID_INTEREST_NAME');
    expect(codeOf(() => parseInterestSet({ interests: [''] }))).toBe('INVALID_INTEREST_NAME');
    expect(codeOf(() => parseInterestSet({ interests: ['a/b'] }))).toBe('INVALID_INTEREST_NAME');
    expect(codeOf(() => parseInterestSet({}))).toBe('DEVICE_FIELD_INVALID');
    expect(codeOf(() => parseInterestSet({ interests: { a: 1 } }))).toBe('DEVICE_FIELD_INVALID');
  });

  it('takes limit 1 to 100, default 100', () => {
    expect(parseInterestLimit(null)).toBe(100);
    expect(parseInterestLimit('1')).toBe(1);
    expect(parseInterestLimit('100')).toBe(100);
    expect(parseInterestLimit('007')).toBe(7);
    for (const bad of ['', '0', '101', '-1', '1.0', '1e2', ' 5', 'ten', '0x10']) expect(codeOf(() => parseInterestLimit(bad)), bad).toBe('INVALID_LIMIT');
  });
});
