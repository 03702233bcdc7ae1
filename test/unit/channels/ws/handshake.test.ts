import { describe, expect, it } from 'vitest';
import { parseHandshake, queryParam } from '../../../../src/channels/ws/handshake.js';
import { parseConfig } from '../../../../src/config/load.js';

const config = parseConfig({ apps: [{ id: 'a', key: 'key-a', secret: 's' }, { id: 'b', key: 'key b', secret: 's', enabled: false }] });
const byKey = new Map(config.apps.map((a) => [a.key, a]));

describe('WebSocket handshake', () => {
  it('accepts /app/<key>?protocol=7 with the usual client parameters', () => {
    const h = parseHandshake('/app/key-a', 'protocol=7&client=js&version=8.4.0&flash=false', byKey);
    expect(h).toMatchObject({ ok: true, app: { id: 'a' } });
  });

  it.each([
    ['/apps/key-a', 'protocol=7', 4005],
    ['/app/key-a/extra', 'protocol=7', 4005],
    ['/app/key-a', '', 4008],
    ['/app/key-a', 'protocol=', 4008],
    ['/app/key-a', 'protocol=7.0', 4006],
    ['/app/key-a', 'protocol=6', 4007],
    ['/app/key-a', 'protocol=8', 4007],
    ['/app/nope', 'protocol=7', 4001],
    ['/app/key%20b', 'protocol=7', 4003],
  ])('refuses %s?%s with %i', (url, query, code) => {
    expect(parseHandshake(url, query, byKey)).toMatchObject({ ok: false, code });
  });
});

describe('queryParam', () => {
  it('reads a parameter exactly as URLSearchParams.get does', () => {
    const queries = [
      '', 'protocol=7', 'protocol=7&client=js&version=8.4.0&flash=false', 'client=js&protocol=6&protocol=7', 'protocol', 'protocol=',
      'protocol=&protocol=7', '&&protocol=7&&', 'xprotocol=1&protocol=2', 'protocolx=1', 'protocol=7=8', '?protocol=7', 'a=1&b',
      'protocol=%37', 'prot%6Fcol=7', 'protocol=7+1', 'protocol=%E2%82%AC', 'protocol=%zz', '=7&protocol=9',
    ];
    for (const q of queries) expect([q, queryParam(q, 'protocol')]).toEqual([q, new URLSearchParams(q).get('protocol')]);
  });
});
