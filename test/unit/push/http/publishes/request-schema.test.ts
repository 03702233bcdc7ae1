import { describe, expect, it } from 'vitest';
import { HeraldError } from '../../../../../src/errors.js';
import { validatePublishRequest } from '../../../../../src/push/http/publishes/request-schema.js';

function schemaError(kind: 'interests' | 'users', body: Record<string, unknown>): string {
  try {
    validatePublishRequest(kind, body);
  } catch (err) {
    expect(err).toBeInstanceOf(HeraldError);
    expect((err as HeraldError).status).toBe(422);
    expect((err as HeraldError).code).toBe('PUBLISH_SCHEMA');
    return (err as HeraldError).message;
  }
  throw new Error('expected a 422');
}

const apns = { aps: { alert: 'hi' } };

describe('validatePublishRequest', () => {
  it('accepts P1 and P2 bodies and keeps only the known fields', () => {
    expect(validatePublishRequest('interests', { interests: ['a', 'b-c'], apns, webhookUrl: 'https://h.test/x', webhookLevel: 'INFO' })).toEqual({
      kind: 'interests', targets: ['a', 'b-c'], payloads: { apns }, webhookUrl: 'https://h.test/x',
    });
    expect(validatePublishRequest('users', { users: ['ü'.repeat(82)], fcm: {}, web: { notification: {} } })).toEqual({
      kind: 'users', targets: ['ü'.repeat(82)], payloads: { fcm: {}, web: { notification: {} } },
    });
  });

  it('names the bad field', () => {
    expect(schemaError('interests', { apns })).toMatch(/^JSON does not match the publish schema: interests: interests must be an array/);
    expect(schemaError('interests', { interests: [], apns })).toMatch(/interests: interests must name at least 1 interest/);
    expect(schemaError('interests', { interests: Array.from({ length: 101 }, (_, i) => `i${i}`), apns })).toMatch(/at most 100 interests/);
    expect(schemaError('interests', { interests: ['ok', 'not ok'], apns })).toMatch(/interests\[1\]: "not ok" is not a valid interest name/);
    expect(schemaError('interests', { interests: ['x'.repeat(165)], apns })).toMatch(/interests\[0\]: .* is not a valid interest name/);
    expect(schemaError('interests', { interests: ['a'] })).toMatch(/body: at least one of apns, fcm or web is required/);
    expect(schemaError('interests', { interests: ['a'], fcm: [] })).toMatch(/fcm: fcm must be a JSON object/);
    expect(schemaError('interests', { interests: ['a'], apns, webhookUrl: 'ftp://x.test' })).toMatch(/webhookUrl: webhookUrl must be an http or https URL/);
    expect(schemaError('users', { users: [], apns })).toMatch(/users: users must name at least 1 user/);
    expect(schemaError('users', { users: Array.from({ length: 1001 }, (_, i) => `u${i}`), apns })).toMatch(/at most 1000 users/);
    expect(schemaError('users', { users: ['a', 'é'.repeat(83)], apns })).toMatch(/users\[1\]: user id is 166 bytes of UTF-8; at most 164/);
    expect(schemaError('users', { users: [''], apns })).toMatch(/users\[0\]: a user id must not be empty/);
    expect(schemaError('users', { users: [7], apns })).toMatch(/users\[0\]: each user id must be a string/);
    expect(schemaError('users', { users: ['\ud800'], apns })).toMatch(/lone UTF-16 surrogate/);
  });
});
