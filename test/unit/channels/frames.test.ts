import { describe, expect, it } from 'vitest';
import * as frames from '../../../src/channels/frames.js';
import { HeraldError } from '../../../src/errors.js';

describe('topics', () => {
  it('never gives two (app, channel) pairs the same topic', () => {
    const pairs: [string, string][] = [
      ['a', 'b:c'], ['a:b', 'c'], ['a', 'bc'], ['ab', 'c'], ['1:a', 'b'], ['1', 'a:b'], ['a/b', '#'], ['a', '#server-to-user-x'],
    ];
    const topics = pairs.map(([a, c]) => frames.topicFor(a, c));
    expect(new Set(topics).size).toBe(pairs.length);
    expect(frames.watchTopicFor('a', 'x')).not.toBe(frames.topicFor('a', ':watch:x'));
    for (const t of topics) expect(t).not.toMatch(/[/+#]/);
  });

  it('never throws, and keeps ids with lone surrogates apart from each other and from others', () => {
    const ids = ['a\ud800b', 'a\udc00b', 'a\ufffdb', 'a%uD800b', 'a%25uD800b', '\ud83d', '\ud83d\ude00', '\ude00\ud83d', 'x\ud800'];
    const topics = ids.map((id) => frames.watchTopicFor('app', id));
    expect(new Set(topics).size).toBe(ids.length);
    expect(frames.topicFor('app', 'a\ud800')).toBe('app:a%uD800');
    // Well-formed strings encode exactly as encodeURIComponent does.
    expect(frames.topicPart('\ud83d\ude00 a/b')).toBe(encodeURIComponent('\ud83d\ude00 a/b'));
    for (const t of topics) expect(t).not.toMatch(/[/+#]/);
  });

  it('gives every well-formed name what encodeURIComponent gives, those it leaves alone included', () => {
    const names = ['bench-unicast-7', "A-z_0.9!~*'()", '', 'a=b', 'a@b,c;d', 'a b', 'a:b', '#server-to-user-x', 'ä', '\ud83d\ude00'];
    for (let c = 0; c < 0x250; c++) names.push(`x${String.fromCharCode(c)}y`);
    for (const name of names) expect(frames.topicPart(name), JSON.stringify(name)).toBe(encodeURIComponent(name));
  });
});

describe('frames', () => {
  it('carries data as a JSON string, except pusher:error', () => {
    const established = JSON.parse(frames.connectionEstablished('1.2', 120)) as { event: string; data: string };
    expect(JSON.parse(established.data)).toEqual({ socket_id: '1.2', activity_timeout: 120 });
    // Byte for byte what JSON.stringify builds, for ids of ours and for anything else.
    for (const [id, timeout] of [['123456789012.987654321', 120], ['1.2', 0], ['x"y', 30], ['1.2', 1.5]] as const) {
      const reference = JSON.stringify({ event: 'pusher:connection_established', data: JSON.stringify({ socket_id: id, activity_timeout: timeout }) });
      expect(frames.connectionEstablished(id, timeout)).toBe(reference);
    }
    expect(JSON.parse(frames.errorFrame(4001, 'no'))).toEqual({ event: 'pusher:error', data: { code: 4001, message: 'no' } });
    const count = JSON.parse(frames.subscriptionCount('c', 3)) as { data: string };
    expect(JSON.parse(count.data)).toEqual({ subscription_count: 3 });
  });

  it('builds the presence snapshot with a __proto__ user id intact', () => {
    const frame = JSON.parse(frames.subscriptionSucceeded('presence-x', [['__proto__', { a: 1 }], ['u2', null]])) as { data: string };
    expect(JSON.parse(frame.data)).toEqual({ presence: { ids: ['__proto__', 'u2'], hash: JSON.parse('{"__proto__":{"a":1},"u2":null}'), count: 2 } });
    expect(JSON.parse(frame.data).presence.hash).toHaveProperty(['__proto__']);
  });

  it('splices the presence JSON text in: the same frame content as from the snapshot', () => {
    const pairs: [string, unknown][] = [['u1', { a: 1 }], ['2', null], ['__proto__', 'x']];
    const json = '{"ids":["u1","2","__proto__"],"hash":{"u1":{"a":1},"2":null,"__proto__":"x"},"count":3}';
    const fromText = JSON.parse(frames.subscriptionSucceeded('presence-x', json)) as { data: string };
    const fromPairs = JSON.parse(frames.subscriptionSucceeded('presence-x', pairs)) as { data: string };
    expect(fromText).toEqual({ ...fromPairs, data: fromText.data });
    expect(JSON.parse(fromText.data)).toEqual(JSON.parse(fromPairs.data));
  });

  it('reports subscription errors with the catalogue kind and status', () => {
    const frame = JSON.parse(frames.subscriptionError('private-x', new HeraldError('SUBSCRIPTION_AUTH_FAILED')));
    expect(frame).toEqual({ event: 'pusher:subscription_error', channel: 'private-x', data: { type: 'AuthError', error: 'Invalid signature', status: 401 } });
  });

  it('adds user_id to presence client events only when given', () => {
    expect(JSON.parse(frames.channelEvent('client-a', 'presence-x', '{}', 'u1'))).toEqual({ event: 'client-a', channel: 'presence-x', data: '{}', user_id: 'u1' });
    expect(JSON.parse(frames.channelEvent('e', 'c', 'd'))).toEqual({ event: 'e', channel: 'c', data: 'd' });
  });
});
