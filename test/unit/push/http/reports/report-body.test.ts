import { describe, expect, it } from 'vitest';
import { HeraldError } from '../../../../../src/errors.js';
import { MAX_REPORT_ID_LENGTH, parseReport, reportKindOf } from '../../../../../src/push/http/reports/report-body.js';

const INSTANCE = '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10';
const valid = { event: 'delivery', publishId: 'pubid-1', deviceId: 'fcm-abc', timestampSecs: 1_700_000_000 };

function failure(body: Record<string, unknown>): { code: string; message: string } {
  try {
    parseReport(INSTANCE, body);
  } catch (err) {
    expect(err).toBeInstanceOf(HeraldError);
    const { code, message } = err as HeraldError;
    return { code, message };
  }
  throw new Error('parseReport accepted the body');
}

describe('reportKindOf', () => {
  it('accepts delivery and open in any letter case', () => {
    for (const e of ['delivery', 'Delivery', 'DELIVERY', 'dElIvErY']) expect(reportKindOf(e)).toBe('delivery');
    for (const e of ['open', 'Open', 'OPEN']) expect(reportKindOf(e)).toBe('open');
  });
  it('refuses anything else', () => {
    for (const e of ['', 'opened', 'delivered', ' open', 'click']) expect(reportKindOf(e)).toBeUndefined();
  });
});

describe('parseReport', () => {
  it('returns the report with the instance id and the normalised kind', () => {
    expect(parseReport(INSTANCE, { ...valid, event: 'Open', userId: 'alice' })).toEqual({
      instanceId: INSTANCE, publishId: 'pubid-1', deviceId: 'fcm-abc', kind: 'open', timestampSecs: 1_700_000_000, userId: 'alice',
    });
  });

  it('names each missing required field in its own error, null counting as missing', () => {
    for (const field of ['event', 'publishId', 'deviceId', 'timestampSecs']) {
      const without: Record<string, unknown> = { ...valid };
      delete without[field];
      expect(failure(without)).toEqual({ code: 'REPORT_FIELD_MISSING', message: `Missing required field ${field}` });
      expect(failure({ ...valid, [field]: null })).toEqual({ code: 'REPORT_FIELD_MISSING', message: `Missing required field ${field}` });
    }
  });

  it('reports the first missing field in the order event, publishId, deviceId, timestampSecs', () => {
    expect(failure({ timestampSecs: 1 }).message).toContain('event');
    expect(failure({ event: 'open', timestampSecs: 1 }).message).toContain('publishId');
  });

  it('refuses wrong types, naming the field', () => {
    const cases: [string, unknown][] = [
      ['event', 'click'], ['event', 1], ['publishId', 42], ['publishId', ''], ['deviceId', ['x']], ['deviceId', {}],
      ['timestampSecs', '1700000000'], ['timestampSecs', -1], ['timestampSecs', -0.5], ['timestampSecs', Infinity], ['timestampSecs', NaN],
      ['userId', 7], ['userId', ''],
      ['appInBackground', 'true'], ['hasDisplayableContent', 1], ['hasData', 'no'],
    ];
    for (const [field, value] of cases) {
      const { code, message } = failure({ ...valid, [field]: value });
      expect(code, `${field}=${JSON.stringify(value)}`).toBe('REPORT_FIELD_INVALID');
      expect(message).toContain(field);
    }
  });

  it('takes a fractional timestampSecs (web SDKs send Date.now() / 1000) and drops the fraction', () => {
    expect(parseReport(INSTANCE, { ...valid, timestampSecs: 1_700_000_000.789 }).timestampSecs).toBe(1_700_000_000);
    expect(parseReport(INSTANCE, { ...valid, timestampSecs: 0.25 }).timestampSecs).toBe(0);
  });

  it('caps id lengths and refuses text that cannot be stored', () => {
    expect(parseReport(INSTANCE, { ...valid, deviceId: 'd'.repeat(MAX_REPORT_ID_LENGTH) }).deviceId).toHaveLength(MAX_REPORT_ID_LENGTH);
    expect(failure({ ...valid, deviceId: 'd'.repeat(MAX_REPORT_ID_LENGTH + 1) }).code).toBe('REPORT_FIELD_INVALID');
    expect(failure({ ...valid, publishId: 'a\uD800b' }).code).toBe('REPORT_FIELD_INVALID');
  });

  it('keeps the delivery flags on a delivery and drops them from an open; null optional fields are absent', () => {
    const flags = { appInBackground: true, hasDisplayableContent: false, hasData: true };
    expect(parseReport(INSTANCE, { ...valid, ...flags })).toMatchObject(flags);
    const open = parseReport(INSTANCE, { ...valid, event: 'OPEN', ...flags, userId: null });
    expect(open).toEqual({ instanceId: INSTANCE, publishId: 'pubid-1', deviceId: 'fcm-abc', kind: 'open', timestampSecs: 1_700_000_000 });
  });

  it('ignores unknown fields', () => {
    expect(parseReport(INSTANCE, { ...valid, extra: { nested: true } })).not.toHaveProperty('extra');
  });
});
