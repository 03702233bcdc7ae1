import { describe, expect, it } from 'vitest';
import { MAX_RETRY_DELAY_MS, parseRetryAfter, redactUrl, retryDelayMs, splitCredentials } from '../../../src/webhooks/http-sender.js';
import { beamsTimestamp } from '../../../src/webhooks/signing.js';

describe('retry delay', () => {
  it('doubles per attempt with jitter between half and all of the step', () => {
    expect(retryDelayMs(1, 100, () => 0)).toBe(50);
    expect(retryDelayMs(1, 100, () => 0.999999)).toBe(100);
    expect(retryDelayMs(3, 100, () => 0)).toBe(200);
    expect(retryDelayMs(3, 100, () => 0.999999)).toBe(400);
  });

  it('is capped and honours a longer Retry-After', () => {
    expect(retryDelayMs(40, 1000, () => 0.999999)).toBe(MAX_RETRY_DELAY_MS);
    expect(retryDelayMs(1, 100, () => 0, 5000)).toBe(5000);
    expect(retryDelayMs(1, 100, () => 0, 10 * MAX_RETRY_DELAY_MS)).toBe(MAX_RETRY_DELAY_MS);
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(parseRetryAfter('3', 0)).toBe(3000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfter('soon', 0)).toBeUndefined();
    expect(parseRetryAfter(null, 0)).toBeUndefined();
  });
});

describe('Beams timestamp', () => {
  it('is UTC with whole seconds and a +0000 offset', () => {
    expect(beamsTimestamp(Date.UTC(2019, 2, 11, 10, 42, 16, 562))).toBe('2019-03-11T10:42:16+0000');
  });
});

describe('receiver URLs with credentials', () => {
  it('become a bare URL plus Basic authorization, and are logged without the password', () => {
    expect(splitCredentials('https://hooks.example.com/x?y=1')).toEqual({ url: 'https://hooks.example.com/x?y=1' });
    expect(splitCredentials('https://us%40r:p%3Ass@hooks.example.com/x')).toEqual({
      url: 'https://hooks.example.com/x',
      authorization: `Basic ${Buffer.from('us@r:p:ss').toString('base64')}`,
    });
    expect(redactUrl('https://user:secret@hooks.example.com/x')).toBe('https://user:***@hooks.example.com/x');
    expect(redactUrl('https://hooks.example.com/x')).toBe('https://hooks.example.com/x');
  });
});
