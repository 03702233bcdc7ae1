import { describe, expect, it } from 'vitest';
import { codeOf } from '../../../helpers/error-code.js';
import {
  isValidInstanceId, parseJsonObject, pushRouteOptions, readAuthorization, requireInstance, requireJsonContentType, requireSecretKey, secretEquals,
} from '../../../../src/push/http/common.js';
import type { PushInstanceConfig } from '../../../../src/config/schema.js';
import { IdOrderedMap } from '../../../../src/tenants/id-ordered-map.js';

const INSTANCE = { instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'push-secret', enabled: true } as PushInstanceConfig;
const DISABLED = { instanceId: '1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0', secretKey: 'push-secret', enabled: false } as PushInstanceConfig;
const ctx = { pushInstances: new IdOrderedMap([[INSTANCE.instanceId, INSTANCE], [DISABLED.instanceId, DISABLED]]) };

describe('push API common checks', () => {
  it('finds instances by UUID-shaped id', () => {
    expect(requireInstance(ctx, INSTANCE.instanceId)).toBe(INSTANCE);
    expect(codeOf(() => requireInstance(ctx, ''))).toBe('INSTANCE_ID_MISSING');
    expect(codeOf(() => requireInstance(ctx, undefined))).toBe('INSTANCE_ID_MISSING');
    expect(codeOf(() => requireInstance(ctx, 'instance-1'))).toBe('INSTANCE_ID_INVALID');
    expect(codeOf(() => requireInstance(ctx, '00000000-0000-4000-8000-000000000000'))).toBe('INSTANCE_NOT_FOUND');
    expect(codeOf(() => requireInstance(ctx, DISABLED.instanceId))).toBe('INSTANCE_DISABLED');
    expect(isValidInstanceId(INSTANCE.instanceId.toUpperCase())).toBe(true);
    expect(isValidInstanceId(`${INSTANCE.instanceId}0`)).toBe(false);
  });

  it('checks Content-Type: application/json, parameters and case allowed', () => {
    for (const ok of ['application/json', 'Application/JSON; charset=utf-8', ' application/json ;charset=UTF-8']) {
      expect(codeOf(() => requireJsonContentType({ 'content-type': ok })), ok).toBeUndefined();
    }
    for (const bad of ['text/plain', 'application/jsonx', 'application/x-www-form-urlencoded']) {
      expect(codeOf(() => requireJsonContentType({ 'content-type': bad })), bad).toBe('INVALID_CONTENT_TYPE');
    }
    expect(codeOf(() => requireJsonContentType({}))).toBe('INVALID_CONTENT_TYPE');
    expect(codeOf(() => requireJsonContentType({}, { allowMissing: true }))).toBeUndefined();
    expect(codeOf(() => requireJsonContentType({ 'content-type': 'text/plain' }, { allowMissing: true }))).toBe('INVALID_CONTENT_TYPE');
  });

  it('parses JSON objects only, from valid UTF-8', () => {
    expect(parseJsonObject(Buffer.from('{"a":"é"}'))).toEqual({ a: 'é' });
    expect(parseJsonObject(Buffer.from('\ufeff{"a":1}'))).toEqual({ a: 1 });
    for (const bad of ['', '[]', 'null', '"s"', '1', '{', '{"a":1}x']) expect(codeOf(() => parseJsonObject(Buffer.from(bad))), bad).toBe('INVALID_JSON');
    let message = '';
    try {
      parseJsonObject(Buffer.from([0x7b, 0x22, 0xc3, 0x22, 0x3a, 0x31, 0x7d]));
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toContain('UTF-8');
  });

  it('reads Bearer tokens and checks the secret key in constant time', () => {
    expect(readAuthorization({})).toEqual({ kind: 'missing' });
    expect(readAuthorization({ authorization: 'Bearer' })).toEqual({ kind: 'missing' });
    expect(readAuthorization({ authorization: 'bearer  abc ' })).toEqual({ kind: 'bearer', token: 'abc' });
    expect(readAuthorization({ authorization: 'Basic abc' })).toEqual({ kind: 'other' });
    expect(codeOf(() => requireSecretKey({ authorization: 'Bearer push-secret' }, INSTANCE))).toBeUndefined();
    expect(codeOf(() => requireSecretKey({}, INSTANCE))).toBe('SECRET_KEY_MISSING');
    expect(codeOf(() => requireSecretKey({ authorization: 'Bearer push-secre' }, INSTANCE))).toBe('SECRET_KEY_INVALID');
    expect(codeOf(() => requireSecretKey({ authorization: 'push-secret' }, INSTANCE))).toBe('SECRET_KEY_INVALID');
    expect(secretEquals('a', 'a')).toBe(true);
    expect(secretEquals('a', 'a'.repeat(1000))).toBe(false);
  });

  it('builds push route options', () => {
    expect(pushRouteOptions({ bodyLimit: 10 })).toEqual({ errorStyle: 'push', bodyLimit: 10 });
    expect(pushRouteOptions({ bodyLimit: 10, bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE', cors: true })).toEqual({
      errorStyle: 'push',
      bodyLimit: 10,
      bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE',
      extraHeaders: { 'access-control-allow-origin': '*' },
    });
  });
});
