import { describe, expect, it } from 'vitest';
import { HeraldError } from '../../../../src/errors.js';
import {
  batchEventSchema,
  parseInfo,
  parseJsonObjectBody,
  parseQueryPairs,
  parseWith,
  postParams,
  queryParams,
  triggerSchema,
} from '../../../../src/channels/http-api/params.js';

function codeAndMessage(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof HeraldError) return `${err.code}: ${err.message}`;
    throw err;
  }
  throw new Error('expected a HeraldError');
}

describe('channel API parameters', () => {
  it('reads array parameters from the query string and leaves out authentication keys', () => {
    const pairs = parseQueryPairs('name=ev&data=%7B%7D&channels[]=a&channels%5B%5D=b&auth_key=k&Body_MD5=x&socket_id=1.2');
    expect(queryParams(pairs)).toEqual({ name: 'ev', data: '{}', channels: ['a', 'b'], socket_id: '1.2' });
  });

  it('lets the JSON body override query parameters', () => {
    const params = postParams(parseQueryPairs('name=q&info=user_count'), Buffer.from('{"name":"b","data":"d","channel":"c"}'));
    expect(params).toEqual({ name: 'b', data: 'd', channel: 'c', info: 'user_count' });
  });

  it('refuses bodies that are not a UTF-8 JSON object', () => {
    expect(codeAndMessage(() => parseJsonObjectBody(Buffer.from('[1]')))).toMatch(/^INVALID_JSON: .*object/);
    expect(codeAndMessage(() => parseJsonObjectBody(Buffer.from('{"a":')))).toMatch(/^INVALID_JSON/);
    expect(codeAndMessage(() => parseJsonObjectBody(Buffer.from([0x7b, 0xff, 0x7d])))).toMatch(/^INVALID_UTF8/);
    expect(parseJsonObjectBody(Buffer.alloc(0))).toEqual({});
  });

  it('names the first bad field of a trigger', () => {
    expect(codeAndMessage(() => parseWith(triggerSchema, { data: 'x', channel: 'c' }))).toBe('INVALID_PARAMETERS: name is required');
    expect(codeAndMessage(() => parseWith(triggerSchema, { name: 'e', data: { a: 1 }, channel: 'c' }))).toBe('INVALID_PARAMETERS: data must be a string');
    expect(codeAndMessage(() => parseWith(triggerSchema, { name: 'x'.repeat(201), data: '', channel: 'c' }))).toMatch(/name must be at most 200/);
    expect(codeAndMessage(() => parseWith(triggerSchema, { name: 'e', data: '', channels: [] }))).toMatch(/channels must name at least one/);
    const many = Array.from({ length: 101 }, (_, i) => `c${i}`);
    expect(codeAndMessage(() => parseWith(triggerSchema, { name: 'e', data: '', channels: many }))).toMatch(/channels may name at most 100/);
    expect(codeAndMessage(() => parseWith(triggerSchema, { name: 'e', data: '', channels: ['a', 3] }))).toBe('INVALID_PARAMETERS: channels[1] must be a string');
    expect(codeAndMessage(() => parseWith(batchEventSchema, { name: 'e', data: '' }, 'batch[4]'))).toBe('INVALID_PARAMETERS: batch[4].channel is required');
    expect(parseWith(triggerSchema, { name: 'e', data: '', channels: 'solo' }).channels).toEqual(['solo']);
  });

  it('splits info and refuses attributes the endpoint does not offer', () => {
    expect([...parseInfo('user_count, subscription_count,', ['user_count', 'subscription_count'], 'info')]).toEqual(['user_count', 'subscription_count']);
    expect(parseInfo(undefined, ['user_count'], 'info').size).toBe(0);
    expect(codeAndMessage(() => parseInfo('cache', ['user_count'], 'info'))).toBe("INVALID_PARAMETERS: info: unknown info attribute 'cache'; accepted here: user_count");
  });
});
