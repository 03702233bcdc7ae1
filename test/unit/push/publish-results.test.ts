import { describe, expect, it } from 'vitest';
import { MAX_ERROR_REASONS, addErrorReason, addGatewayCounts, emptyGatewayCounts, failureReasonKey, webhookResults } from '../../../src/push/publish-results.js';

describe('failure reasons in publish counts', () => {
  it('merge over shards', () => {
    const total = emptyGatewayCounts();
    const a = emptyGatewayCounts();
    a.fcm = { recipients: 2, sent: 0, failed: 2, removed: 1, errors: { UNREGISTERED: 1, 'oauth: token endpoint answered 404': 1 } };
    const b = emptyGatewayCounts();
    b.fcm = { recipients: 1, sent: 0, failed: 1, removed: 1, errors: { UNREGISTERED: 1 } };
    addGatewayCounts(total, a);
    addGatewayCounts(total, b);
    expect(total.fcm).toEqual({ recipients: 3, sent: 0, failed: 3, removed: 2, errors: { UNREGISTERED: 2, 'oauth: token endpoint answered 404': 1 } });
    expect(total.apns.errors).toBeUndefined();
  });

  it(`keep at most ${MAX_ERROR_REASONS} reasons per gateway, the rest under "other"`, () => {
    const counts = emptyGatewayCounts().web;
    for (let i = 0; i < MAX_ERROR_REASONS + 5; i++) addErrorReason(counts, `HTTP ${400 + i}`);
    addErrorReason(counts, 'HTTP 400');
    expect(Object.keys(counts.errors!)).toHaveLength(MAX_ERROR_REASONS + 1);
    expect(counts.errors!['other']).toBe(5);
    expect(counts.errors!['HTTP 400']).toBe(2);
  });

  it('stay out of the FINISHED webhook results (the hosted service sends four counts)', () => {
    const gateways = emptyGatewayCounts();
    gateways.fcm = { recipients: 1, sent: 0, failed: 1, removed: 0, errors: { x: 1 } };
    expect(webhookResults(['fcm'], gateways)).toEqual({ fcm: { recipients: 1, sent: 0, failed: 1, removed: 0 } });
  });
});

describe('failureReasonKey', () => {
  it('turns varying durations into N s so one cause counts under one reason', () => {
    expect(failureReasonKey("oauth: token endpoint answered 400 (an earlier fetch's answer; the token endpoint is asked again in 27 s)")).toBe(
      "oauth: token endpoint answered 400 (an earlier fetch's answer; the token endpoint is asked again in N s)",
    );
    expect(failureReasonKey('HTTP 429 (Retry-After 120 s exceeds the 60 s pause limit)')).toBe('HTTP 429 (Retry-After N s exceeds the N s pause limit)');
    expect(failureReasonKey('HTTP 410')).toBe('HTTP 410');
    expect(failureReasonKey('UNREGISTERED')).toBe('UNREGISTERED');
  });
});
