/**
 * The hand-written fast paths of the channel API (trigger and batch shapes, query parsing,
 * string to sign, shared frame encoding) must answer exactly what the general path answers:
 * the same value for a valid request, the same error message for an invalid one, the same
 * frame bytes.
 */
import { describe, expect, it } from 'vitest';
import {
  batchEventSchema,
  batchSchema,
  parseBatchEventParams,
  parseBatchParams,
  parseJsonObjectBody,
  parseQueryPairs,
  parseTriggerParams,
  parseWith,
  postParams,
  queryParams,
  triggerSchema,
  type QueryPair,
} from '../../../../src/channels/http-api/params.js';
import { stringToSign } from '../../../../src/channels/http-api/signature.js';
import { publishEvent } from '../../../../src/channels/http-api/events.js';
import type { ChannelAdapter } from '../../../../src/channels/adapter/channel-adapter.js';

/** The outcome of a parse: its value, or the error message it threw. */
function outcome(parse: () => unknown): { value: unknown } | { error: string } {
  try {
    return { value: parse() };
  } catch (err) {
    return { error: `${(err as { code?: string }).code}: ${(err as Error).message}` };
  }
}

const TRIGGERS: unknown[] = [
  { name: 'e', data: 'd', channel: 'c' },
  { name: 'e', data: 'd', channels: ['a', 'b'], socket_id: '1.2', info: 'user_count' },
  { name: 'e', data: 'd', channels: 'from-query' },
  { name: 'e', data: 'd', channel: 'c', extra: 1 },
  { name: 'e', data: 'd' },
  { name: 'e'.repeat(200), data: '', channel: 'c' },
  { name: 'e'.repeat(201), data: 'd', channel: 'c' },
  { name: '', data: 'd', channel: 'c' },
  { data: 'd', channel: 'c' },
  { name: 1, data: 'd', channel: 'c' },
  { name: 'e', channel: 'c' },
  { name: 'e', data: { x: 1 }, channel: 'c' },
  { name: 'e', data: 'd', channel: 5 },
  { name: 'e', data: 'd', channels: [] },
  { name: 'e', data: 'd', channels: Array.from({ length: 100 }, (_, i) => `c${i}`) },
  { name: 'e', data: 'd', channels: Array.from({ length: 101 }, (_, i) => `c${i}`) },
  { name: 'e', data: 'd', channels: ['a', 2] },
  { name: 'e', data: 'd', channels: { 0: 'a' } },
  { name: 'e', data: 'd', channel: 'c', socket_id: 12 },
  { name: 'e', data: 'd', channel: 'c', info: ['user_count'] },
  { name: 'e', data: 'd', channel: 'c', socket_id: null },
  { name: ['e'], data: 'd', channel: 'c' },
];

const BATCH_EVENTS: unknown[] = [
  { name: 'e', data: 'd', channel: 'c' },
  { name: 'e', data: 'd', channel: 'c', socket_id: '1.2', info: 'subscription_count', other: true },
  { name: 'e', data: 'd' },
  { name: 'e', data: 'd', channels: ['c'] },
  { name: '', data: 'd', channel: 'c' },
  { name: 'e'.repeat(201), data: 'd', channel: 'c' },
  { name: 'e', data: 1, channel: 'c' },
  { name: 'e', data: 'd', channel: 'c', socket_id: 1 },
  { name: 'e', data: 'd', channel: 'c', info: false },
  null,
  'string',
  7,
  ['e', 'd', 'c'],
];

describe('channel API fast paths give what the general path gives', () => {
  it('C1 trigger bodies: the same parameters or the same error', () => {
    for (const body of TRIGGERS) {
      const value = body as Record<string, unknown>;
      expect(outcome(() => parseTriggerParams(value)), JSON.stringify(body)).toEqual(outcome(() => parseWith(triggerSchema, value)));
    }
  });

  it('C2 batch events: the same event or the same error, indexed', () => {
    BATCH_EVENTS.forEach((raw, i) => {
      expect(outcome(() => parseBatchEventParams(raw, i)), JSON.stringify(raw)).toEqual(outcome(() => parseWith(batchEventSchema, raw, `batch[${i}]`)));
    });
    for (const body of [{ batch: [] }, { batch: [1, 'x'] }, {}, { batch: 'x' }, { batch: { 0: 1 } }]) {
      expect(outcome(() => parseBatchParams(body)), JSON.stringify(body)).toEqual(outcome(() => parseWith(batchSchema, body)));
    }
  });

  it('POST parameters: the query ones overridden by the body, with or without query parameters', () => {
    const body = Buffer.from(JSON.stringify({ name: 'e', data: 'd', channel: 'c' }));
    const cases: QueryPair[][] = [
      [['auth_key', 'k'], ['AUTH_TIMESTAMP', '1'], ['body_md5', 'x']],
      [['auth_key', 'k'], ['channels[]', 'a'], ['channels[]', 'b'], ['Name', 'from-query']],
      [['name', 'q'], ['socket_id', '1.1']],
      [],
    ];
    for (const pairs of cases) {
      expect(postParams(pairs, body)).toEqual({ ...queryParams(pairs), ...parseJsonObjectBody(body) });
      expect(postParams(pairs, Buffer.alloc(0))).toEqual(queryParams(pairs));
    }
  });

  it('query strings: the same pairs as splitting on & and the first =', () => {
    const reference = (query: string): [string, string][] =>
      query
        .split('&')
        .filter((part) => part !== '')
        .map((part) => {
          const eq = part.indexOf('=');
          const decode = (s: string): string => {
            const spaced = s.replace(/\+/g, ' ');
            try {
              return decodeURIComponent(spaced);
            } catch {
              return spaced;
            }
          };
          return eq === -1 ? [decode(part), ''] : [decode(part.slice(0, eq)), decode(part.slice(eq + 1))];
        });
    for (const query of ['', '&', '&&a=1&&', 'a', 'a=', '=b', 'a=b=c', 'a&b=2', 'k=%zz', 'k=a+b%20c', 'channels%5B%5D=x&channels[]=y', 'a=1&a=2&', 'x=%E2%98%83']) {
      expect(parseQueryPairs(query), query).toEqual(reference(query));
    }
  });

  it('string to sign: sorted input in one pass, any other order sorted stably', () => {
    const reference = (method: string, path: string, query: readonly QueryPair[]): string =>
      `${method.toUpperCase()}\n${path}\n${query
        .map(([k, v]) => [k.toLowerCase(), v] as const)
        .filter(([k]) => k !== 'auth_signature')
        .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
        .map(([k, v]) => `${k}=${v}`)
        .join('&')}`;
    const cases: QueryPair[][] = [
      [['auth_key', 'k'], ['auth_timestamp', '1'], ['auth_version', '1.0'], ['body_md5', 'm'], ['auth_signature', 's']],
      [['auth_signature', 's'], ['auth_key', 'k'], ['AUTH_VERSION', '1.0'], ['auth_timestamp', '1']],
      [['channels[]', 'b'], ['auth_key', 'k'], ['channels[]', 'a'], ['Info', 'user_count']],
      [['b', '1'], ['a', '2'], ['b', '0']],
      [],
    ];
    for (const query of cases) {
      expect(stringToSign('get', '/apps/1/channels', query)).toBe(reference('get', '/apps/1/channels', query));
    }
  });
});

describe('channel API frames', () => {
  it('publishes to several channels the same bytes as JSON.stringify({ event, channel, data }) per channel', () => {
    const published: [string, string, string | undefined][] = [];
    const cached: string[] = [];
    const adapter = {
      publish: (_appId: string, channel: string, frame: string, except?: string) => void published.push([channel, frame, except]),
      storeCachedEvent: (_appId: string, channel: string) => void cached.push(channel),
    } as unknown as ChannelAdapter;
    const data = JSON.stringify({ text: 'quote " backslash \\ newline \n snowman ☃ lone \ud800', n: 1 });
    const channels = ['a', 'cache-b', 'private-encrypted-cache-c', '#server-to-user-ü'];
    publishEvent(adapter, { id: 'app', history: null }, { name: 'ev "x"', data, channels, socketId: '1.2', info: new Set() });
    publishEvent(adapter, { id: 'app', history: null }, { name: 'solo', data, channels: ['presence-cache-d'], info: new Set() });
    expect(published).toEqual([
      ...channels.map((channel) => [channel, JSON.stringify({ event: 'ev "x"', channel, data }), '1.2']),
      ['presence-cache-d', JSON.stringify({ event: 'solo', channel: 'presence-cache-d', data }), undefined],
    ]);
    expect(cached).toEqual(['cache-b', 'private-encrypted-cache-c', 'presence-cache-d']);
  });
});
