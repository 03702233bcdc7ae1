import { describe, expect, it } from 'vitest';
import { channelType, isValidChannelName, isValidSocketId, requiresAuth } from '../../../src/channels/names.js';

describe('channel names', () => {
  it('accepts the allowed characters up to 200', () => {
    expect(isValidChannelName('abc-_=@,.;XYZ09')).toBe(true);
    expect(isValidChannelName('a'.repeat(200))).toBe(true);
    expect(isValidChannelName('a'.repeat(201))).toBe(false);
    expect(isValidChannelName('')).toBe(false);
    expect(isValidChannelName('has space')).toBe(false);
    expect(isValidChannelName('slash/no')).toBe(false);
    expect(isValidChannelName('ünï')).toBe(false);
  });

  it('derives the kind from the prefix, most specific first', () => {
    expect(channelType('news')).toEqual({ kind: 'public', cache: false });
    expect(channelType('cache-news')).toEqual({ kind: 'public', cache: true });
    expect(channelType('private-a')).toEqual({ kind: 'private', cache: false });
    expect(channelType('private-cache-a')).toEqual({ kind: 'private', cache: true });
    expect(channelType('private-encrypted-a')).toEqual({ kind: 'encrypted', cache: false });
    expect(channelType('private-encrypted-cache-a')).toEqual({ kind: 'encrypted', cache: true });
    expect(channelType('presence-a')).toEqual({ kind: 'presence', cache: false });
    expect(channelType('presence-cache-a')).toEqual({ kind: 'presence', cache: true });
    expect(requiresAuth('news')).toBe(false);
    expect(requiresAuth('presence-x')).toBe(true);
  });

  it('validates socket ids', () => {
    expect(isValidSocketId('123.456')).toBe(true);
    expect(isValidSocketId('123')).toBe(false);
    expect(isValidSocketId('1.2.3')).toBe(false);
    expect(isValidSocketId('a.b')).toBe(false);
  });
});
