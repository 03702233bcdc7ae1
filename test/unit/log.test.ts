import { describe, expect, it } from 'vitest';
import { RateLimitedLog, isLogLevel, maskSecretParams } from '../../src/log.js';

describe('RateLimitedLog', () => {
  it('writes the first line per key per interval and reports the suppressed count with the next', () => {
    let now = 1000;
    const lines: { msg: string; fields: Record<string, unknown> | undefined }[] = [];
    const limited = new RateLimitedLog('error', 10_000, 1000, (msg, fields) => lines.push({ msg, fields }), () => now);
    for (let i = 0; i < 90_000; i++) limited.write('k', 'refused', { code: 4001 });
    limited.write('other', 'refused', { code: 4004 });
    expect(lines).toEqual([
      { msg: 'refused', fields: { code: 4001 } },
      { msg: 'refused', fields: { code: 4004 } },
    ]);
    now += 10_000;
    limited.write('k', 'refused', { code: 4001 });
    expect(lines[2]).toEqual({ msg: 'refused', fields: { code: 4001, suppressed: 89_999 } });
  });

  it('forgets the oldest keys beyond its bound', () => {
    const lines: string[] = [];
    const limited = new RateLimitedLog('error', 10_000, 2, (msg) => lines.push(msg), () => 0);
    limited.write('a', 'a');
    limited.write('b', 'b');
    limited.write('c', 'c');
    limited.write('a', 'a again');
    expect(lines).toEqual(['a', 'b', 'c', 'a again']);
  });
});

describe('log levels', () => {
  it('knows exactly debug, info, warn and error', () => {
    expect(['debug', 'info', 'warn', 'error'].every(isLogLevel)).toBe(true);
    expect(isLogLevel('verbose')).toBe(false);
    expect(isLogLevel('trace')).toBe(false);
  });
});

describe('maskSecretParams', () => {
  it('masks the value of token=, access_token=, secret=, password= and signature=, also URL-encoded, to the next white space', () => {
    expect(maskSecretParams('/session#token=abc&x=1')).toBe('/session#token=***');
    expect(maskSecretParams('No route for GET /a?TOKEN=abc def')).toBe('No route for GET /a?TOKEN=*** def');
    expect(maskSecretParams('/cb?access_token=abc')).toBe('/cb?access_token=***');
    expect(maskSecretParams("no app has key 'x%3Dy&token%3Dabc' (apps[].key)")).toBe("no app has key 'x%3Dy&token%3D*** (apps[].key)");
    expect(maskSecretParams('?auth_signature=f00&secret=s&password=p')).toBe('?auth_signature=***');
    expect(maskSecretParams('GET /apps/a/channels 404')).toBe('GET /apps/a/channels 404');
  });
});
