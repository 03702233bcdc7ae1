/**
 * Channel names, kinds and socket ids: the rules both the WebSocket protocol and the HTTP
 * API apply. A channel's kind follows from its prefix; `private-encrypted-` must be tested
 * before `private-`, and cache kinds before the plain ones.
 */

/** At most 200 characters of `A-Za-z0-9_-=@,.;`. */
const CHANNEL_NAME = /^[A-Za-z0-9_\-=@,.;]{1,200}$/;
/** Socket ids are `<digits>.<digits>`. */
const SOCKET_ID = /^\d{1,19}\.\d{1,19}$/;

/**
 * Prefix of the per-user channel pusher-js subscribes to after `pusher:signin` and the `pusher`
 * SDK's `sendToUser` triggers to. `#` is outside the channel-name characters on purpose: no
 * client can subscribe to it as an ordinary channel.
 */
export const SERVER_TO_USER_PREFIX = '#server-to-user-';
/** Longest sign-in / presence / watchlist user id, in characters (UTF-16 units). */
export const MAX_USER_ID_LENGTH = 200;

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

/**
 * A user id as sign-in, watchlists, presence channel_data and `#server-to-user-<id>` accept
 * it: 1 to MAX_USER_ID_LENGTH characters of well-formed UTF-16. A lone surrogate (possible in
 * JSON: `"\ud800"`) has no UTF-8 form: such an id could not be encoded, logged or sent intact.
 */
export function isValidUserId(userId: string): boolean {
  return userId !== '' && userId.length <= MAX_USER_ID_LENGTH && isWellFormed(userId);
}

/**
 * True when the string has no lone surrogate (`String.prototype.isWellFormed`, Node 20; the
 * ES2022 typings this project compiles against do not declare it yet).
 */
export function isWellFormed(s: string): boolean {
  return (s as string & { isWellFormed(): boolean }).isWellFormed();
}

/**
 * The user id of a `#server-to-user-<id>` name, or null when the name is not one or its id
 * is not a valid user id. Only server triggers (C1, C2) may name such a channel.
 */
export function serverToUserId(name: string): string | null {
  if (!name.startsWith(SERVER_TO_USER_PREFIX)) return null;
  const userId = name.slice(SERVER_TO_USER_PREFIX.length);
  return isValidUserId(userId) ? userId : null;
}

/** Names a server trigger may publish to: valid channel names and `#server-to-user-<user id>`. */
export function isValidTriggerChannel(name: string): boolean {
  return isValidChannelName(name) || serverToUserId(name) !== null;
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

/** Cache channels (`cache-`, `private-cache-`, `private-encrypted-cache-`, `presence-cache-`) keep their last event (as channelType). */
export function isCacheChannel(name: string): boolean {
  return (
    name.startsWith('cache-') ||
    name.startsWith('private-cache-') ||
    name.startsWith('presence-cache-') ||
    name.startsWith('private-encrypted-cache-')
  );
}

export function isPresenceChannel(name: string): boolean {
  return name.startsWith('presence-');
}

/**
 * Whether subscription counts are kept for the channel (socket event and webhook): the app's
 * `subscriptionCount` switch, and never on presence channels (they have member events).
 */
export function countsSubscriptions(app: { readonly subscriptionCount: boolean }, channel: string): boolean {
  return app.subscriptionCount && !isPresenceChannel(channel);
}

/** Channels whose subscriptions need a signature (private, encrypted, presence). */
export function requiresAuth(name: string): boolean {
  return name.startsWith('private-') || name.startsWith('presence-');
}
