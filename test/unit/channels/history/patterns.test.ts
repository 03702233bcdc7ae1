import { describe, expect, it } from 'vitest';
import { keepsHistory } from '../../../../src/channels/history/patterns.js';
import { formatSerial, parseSerial } from '../../../../src/channels/history/serial.js';

describe('keepsHistory', () => {
  const app = { history: { channels: ['history-*', 'private-*-log', 'exact.name'], maxEvents: 1, ttlSeconds: 1 } };

  it('matches whole names, * standing for any run of characters (none included)', () => {
    expect(keepsHistory(app, 'history-')).toBe(true);
    expect(keepsHistory(app, 'history-room-1')).toBe(true);
    expect(keepsHistory(app, 'private-chat-log')).toBe(true);
    expect(keepsHistory(app, 'private--log')).toBe(true);
    expect(keepsHistory(app, 'exact.name')).toBe(true);
    expect(keepsHistory(app, 'presence-history-1')).toBe(false);
    expect(keepsHistory(app, 'private-chat-log-2')).toBe(false);
    // Other characters are themselves: '.' is no wildcard.
    expect(keepsHistory(app, 'exactXname')).toBe(false);
  });

  it('keeps nothing without history', () => {
    expect(keepsHistory({ history: null }, 'history-1')).toBe(false);
  });
});

describe('serials', () => {
  it('sort as strings in publish order, across generations', () => {
    const serials = [formatSerial(1_795_820_754_123, 9), formatSerial(1_795_820_754_123, 10), formatSerial(1_795_820_754_124, 1)];
    expect([...serials].sort()).toEqual(serials);
    expect(serials[1]).toBe('1795820754123-000000000010');
    expect(parseSerial(serials[1]!)).toEqual({ generation: 1_795_820_754_123, sequence: 10 });
    expect(parseSerial('1795820754123-10')).toBeNull();
    expect(parseSerial('')).toBeNull();
  });
});
