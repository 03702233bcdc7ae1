/**
 * Channel names, kinds and socket ids: the rules both the WebSocket protocol and the HTTP
 * API apply. A channel's kind follows from its prefix; `private-encrypted-` must be tested
 * before `private-`, and cache kinds before the plain ones.
 */

/** At most 200 characters of `A-Za-z0-9_-=@,.;`. */
const CHANNEL_NAME = /^[A-Za-z0-9_\-=@,.;]{1,200}$/;
/** Socket ids are `<digits>.<digits>`. */
const SOCKET_ID = /^\d{1,19}\.\d{1,19}$/;

export const MAX_CHANNEL_NAME_LENGTH = 200;

export type ChannelKind = 'public' | 'private' | 'encrypted' | 'presence';

export interface ChannelType {
  kind: ChannelKind;
  /** Cache channels keep their last event for a TTL. */
  cache: boolean;
}

export function isValidChannelName(name: string): boolean {
  return CHANNEL_NAME.test(name);
}

export function isValidSocketId(socketId: string): boolean {
  return SOCKET_ID.test(socketId);
}

export function channelType(name: string): ChannelType {
  if (name.startsWith('private-encrypted-cache-')) return { kind: 'encrypted', cache: true };
  if (name.startsWith('private-encrypted-')) return { kind: 'encrypted', cache: false };
  if (name.startsWith('private-cache-')) return { kind: 'private', cache: true };
  if (name.startsWith('private-')) return { kind: 'private', cache: false };
  if (name.startsWith('presence-cache-')) return { kind: 'presence', cache: true };
  if (name.startsWith('presence-')) return { kind: 'presence', cache: false };
  if (name.startsWith('cache-')) return { kind: 'public', cache: true };
  return { kind: 'public', cache: false };
}

export function isPresenceChannel(name: string): boolean {
  return name.startsWith('presence-');
}

/** Channels whose subscriptions need a signature (private, encrypted, presence). */
export function requiresAuth(name: string): boolean {
  return name.startsWith('private-') || name.startsWith('presence-');
}
