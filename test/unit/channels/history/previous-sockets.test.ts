import { describe, expect, it } from 'vitest';
import { MAX_PREVIOUS_SOCKET_IDS, parsePreviousSocketIds, replayedTo } from '../../../../src/channels/history/previous-sockets.js';
import type { KeptEnvelope } from '../../../../src/channels/messages.js';

const envelope = (data: string, exceptSocketId?: string): KeptEnvelope => ({ kept: { serial: `s-${data}`, event: 'e', data, publishedAt: 0 }, exceptSocketId });

describe('previous_socket_ids', () => {
  it('takes none, or an array of at most 8 socket ids; anything else is malformed (null)', () => {
    const ids = Array.from({ length: MAX_PREVIOUS_SOCKET_IDS + 1 }, (_, i) => `${i + 1}.${i + 10}`);
    expect(parsePreviousSocketIds(undefined)).toEqual([]);
    expect(parsePreviousSocketIds(null)).toEqual([]);
    expect(parsePreviousSocketIds([])).toEqual([]);
    expect(parsePreviousSocketIds(ids.slice(0, 8))).toEqual(ids.slice(0, 8));
    for (const bad of [ids, '1.2', { 0: '1.2' }, [1], ['1.2', 'x'], ['1.'], [' 1.2'], 7]) expect(parsePreviousSocketIds(bad)).toBeNull();
  });

  it('replays every event but those left out for the socket now or one it had before', () => {
    const kept = [envelope('a'), envelope('mine-now', '1.1'), envelope('mine-before', '2.2'), envelope('others', '3.3')];
    expect(replayedTo(kept, '1.1', ['2.2']).map((e) => e.data)).toEqual(['a', 'others']);
    expect(replayedTo(kept, '1.1').map((e) => e.data)).toEqual(['a', 'mine-before', 'others']);
    expect(replayedTo(kept, '9.9', []).map((e) => e.data)).toEqual(['a', 'mine-now', 'mine-before', 'others']);
  });
});
