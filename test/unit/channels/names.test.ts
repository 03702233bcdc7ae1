import { describe, expect, it } from 'vitest';
import {
  channelType,
  isValidChannelName,
  isValidSocketId,
  isValidTriggerChannel,
  isValidUserId,
  requiresAuth,
  serverToUserId,
} from '../../../src/channels/names.js';

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

  it('validates user ids as sign-in does: 1 to 200 characters of well-formed UTF-16', () => {
    expect(isValidUserId('u1')).toBe(true);
    expect(isValidUserId('a b/#ü')).toBe(true);
    expect(isValidUserId('x'.repeat(200))).toBe(true);
    expect(isValidUserId('x'.repeat(201))).toBe(false);
    expect(isValidUserId('')).toBe(false);
    // Well-formed UTF-16 only: a lone surrogate (JSON "\ud800") has no UTF-8 form.
    expect(isValidUserId('a\ud800b')).toBe(false);
    expect(isValidUserId('\udc00')).toBe(false);
    expect(isValidUserId('x\ud83d')).toBe(false);
    expect(isValidUserId('smile \ud83d\ude00')).toBe(true);
    expect(serverToUserId('#server-to-user-a\ud800')).toBeNull();
  });

  it('reads the user id of #server-to-user-<id> and nothing else', () => {
    expect(serverToUserId('#server-to-user-u1')).toBe('u1');
    expect(serverToUserId('#server-to-user-a b/#')).toBe('a b/#');
    expect(serverToUserId(`#server-to-user-${'x'.repeat(200)}`)).toBe('x'.repeat(200));
    expect(serverToUserId(`#server-to-user-${'x'.repeat(201)}`)).toBeNull();
    expect(serverToUserId('#server-to-user-')).toBeNull();
    expect(serverToUserId('#server-to-user')).toBeNull();
    expect(serverToUserId('#Server-to-user-u1')).toBeNull();
    expect(serverToUserId('server-to-user-u1')).toBeNull();
    expect(serverToUserId(' #server-to-user-u1')).toBeNull();
  });

  it('lets triggers name channels and #server-to-user-<id>, no other # name', () => {
    expect(isValidTriggerChannel('news')).toBe(true);
    expect(isValidTriggerChannel('#server-to-user-u1')).toBe(true);
    expect(isValidTriggerChannel('#bogus')).toBe(false);
    expect(isValidTriggerChannel('#server-to-user-')).toBe(false);
    expect(isValidTriggerChannel('news#1')).toBe(false);
    // Only triggers accept it: everywhere else the channel-name rule still refuses '#'.
    expect(isValidChannelName('#server-to-user-u1')).toBe(false);
    expect(channelType('#server-to-user-cache-x')).toEqual({ kind: 'public', cache: false });
    expect(requiresAuth('#server-to-user-private-x')).toBe(false);
  });
});
