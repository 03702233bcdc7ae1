/**
 * Pusher protocol 7 frames the server sends, encoded once per frame, and uWS topic names.
 * Every server event carries `data` as a JSON string, except pusher:error, whose data is
 * an object `{code, message}` (what pusher-js and the other official clients read).
 */
import type { HeraldError } from '../errors.js';
import { isWellFormed } from './names.js';

/**
 * The uWS topic of a channel of an app. Both parts are URI-encoded, so the app id cannot run
 * into the channel name (a socket of app A never receives app B's frames, even on the same
 * channel name) and no topic holds the `/`, `+` or `#` that some uWS builds read as MQTT
 * levels and wildcards. Never throws (see topicPart).
 */
export function topicFor(appId: string, channel: string): string {
  return `${topicPart(appId)}:${topicPart(channel)}`;
}

/** Topic on which a signed-in user's watchers hear about them (not a subscribable channel). */
export function watchTopicFor(appId: string, userId: string): string {
  return `${topicPart(appId)}::watch:${topicPart(userId)}`;
}

/** Text that encodeURIComponent returns unchanged (most app ids and channel names): no copy is made of it. */
const URI_UNRESERVED = /^[A-Za-z0-9\-_.!~*'()]*$/;

/**
 * `encodeURIComponent`, except that it cannot throw: a lone surrogate (on which
 * encodeURIComponent throws URIError) becomes `%u<4 hex digits>`, a form encodeURIComponent
 * never produces, so distinct strings keep distinct topics. Topic names are built inside uWS
 * callbacks, where a throw ends the process; ids are validated well before (names.ts), this is
 * the last line of defence.
 */
export function topicPart(s: string): string {
  if (URI_UNRESERVED.test(s)) return s;
  if (isWellFormed(s)) return encodeURIComponent(s);
  let out = '';
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const unit = s.charCodeAt(i);
    if (unit < 0xd800 || unit > 0xdfff) continue;
    if (unit <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        i++; // a well-formed pair
        continue;
      }
    }
    out += `${encodeURIComponent(s.slice(start, i))}%u${unit.toString(16).toUpperCase()}`;
    start = i + 1;
  }
  return out + encodeURIComponent(s.slice(start));
}

/** Prefix of the per-user channel pusher-js subscribes to after sign-in (one definition, in names.ts). */
export { SERVER_TO_USER_PREFIX } from './names.js';

/** A socket id as the endpoint makes them (`<digits>.<digits>`): nothing in it needs JSON escaping. */
const PLAIN_SOCKET_ID = /^\d+\.\d+$/;

/**
 * The first frame of every connection. Built as text when the socket id is one of ours and the
 * timeout an integer (the same bytes as the JSON.stringify pair below, without building two
 * objects and two strings per connect: ~8 % of the main thread's CPU in a connect storm).
 */
export function connectionEstablished(socketId: string, activityTimeoutSeconds: number): string {
  if (PLAIN_SOCKET_ID.test(socketId) && Number.isSafeInteger(activityTimeoutSeconds)) {
    return `{"event":"pusher:connection_established","data":"{\\"socket_id\\":\\"${socketId}\\",\\"activity_timeout\\":${activityTimeoutSeconds}}"}`;
  }
  return JSON.stringify({
    event: 'pusher:connection_established',
    data: JSON.stringify({ socket_id: socketId, activity_timeout: activityTimeoutSeconds }),
  });
}

/** pusher:error; `code` is a close code for fatal errors, null for errors that keep the connection. */
export function errorFrame(code: number | null, message: string): string {
  return JSON.stringify({ event: 'pusher:error', data: { code, message } });
}

/** pusher:error for a catalogue error that does not close the connection. */
export function nonFatalErrorFrame(err: HeraldError): string {
  return errorFrame(null, err.message);
}

export const PING_FRAME = JSON.stringify({ event: 'pusher:ping', data: '{}' });
export const PONG_FRAME = JSON.stringify({ event: 'pusher:pong', data: '{}' });

/** The presence part of subscription_succeeded. */
export interface PresenceSnapshot {
  ids: string[];
  hash: Record<string, unknown>;
  count: number;
}

/**
 * subscription_succeeded: `{}` or, on presence channels, the members after the join, given as
 * the adapter's snapshot, as its JSON text (spliced in as is: the shard keeps it serialised, so
 * a join in a big channel is not parsed and stringified again here) or as [user id, user_info] pairs.
 */
export function subscriptionSucceeded(channel: string, presence?: PresenceSnapshot | string | [string, unknown][]): string {
  let data: string;
  if (presence === undefined) data = '{}';
  else if (typeof presence === 'string') data = `{"presence":${presence}}`;
  else data = JSON.stringify({ presence: Array.isArray(presence) ? snapshotOf(presence) : presence });
  return JSON.stringify({ event: 'pusher_internal:subscription_succeeded', channel, data });
}

/** Builds a snapshot from pairs, on a null-prototype hash: a user id may be `__proto__`. */
export function snapshotOf(members: [string, unknown][]): PresenceSnapshot {
  const hash = Object.create(null) as Record<string, unknown>;
  const ids: string[] = [];
  for (const [id, info] of members) {
    ids.push(id);
    hash[id] = info;
  }
  return { ids, hash, count: ids.length };
}

/** subscription_error with the catalogue entry's kind as `type` and its status. */
export function subscriptionError(channel: string, err: HeraldError): string {
  return JSON.stringify({ event: 'pusher:subscription_error', channel, data: { type: err.kind, error: err.message, status: err.status } });
}

export function memberAdded(channel: string, userId: string, userInfo: unknown): string {
  return JSON.stringify({ event: 'pusher_internal:member_added', channel, data: JSON.stringify({ user_id: userId, user_info: userInfo ?? null }) });
}

export function memberRemoved(channel: string, userId: string): string {
  return JSON.stringify({ event: 'pusher_internal:member_removed', channel, data: JSON.stringify({ user_id: userId }) });
}

export function subscriptionCount(channel: string, count: number): string {
  return JSON.stringify({ event: 'pusher_internal:subscription_count', channel, data: JSON.stringify({ subscription_count: count }) });
}

export function cacheMiss(channel: string): string {
  return JSON.stringify({ event: 'pusher:cache_miss', channel });
}

/** A channel event as subscribers receive it; `user_id` on presence client events. */
export function channelEvent(event: string, channel: string, data: string, userId?: string): string {
  return userId === undefined ? JSON.stringify({ event, channel, data }) : JSON.stringify({ event, channel, data, user_id: userId });
}

/**
 * An event of a history channel: `channelEvent` plus a top-level `serial` (pusher clients
 * ignore fields they do not know).
 */
export function keptEvent(event: string, channel: string, data: string, serial: string, userId?: string): string {
  return userId === undefined ? JSON.stringify({ event, channel, data, serial }) : JSON.stringify({ event, channel, data, user_id: userId, serial });
}

/** Ends a recovering subscriber's replay: `missed` events were replayed, live events follow. */
export function recovered(channel: string, missed: number): string {
  return JSON.stringify({ event: 'herald:recovered', channel, data: JSON.stringify({ missed }) });
}

/** Tells a recovering subscriber that what it missed cannot be replayed (reason: history_evicted, ...). */
export function recoveryFailed(channel: string, reason: string): string {
  return JSON.stringify({ event: 'herald:recovery_failed', channel, data: JSON.stringify({ reason }) });
}

export function signinSuccess(userData: string): string {
  return JSON.stringify({ event: 'pusher:signin_success', data: JSON.stringify({ user_data: userData }) });
}

export function watchlistEvents(events: { name: 'online' | 'offline'; user_ids: string[] }[]): string {
  return JSON.stringify({ event: 'pusher_internal:watchlist_events', data: JSON.stringify({ events }) });
}
