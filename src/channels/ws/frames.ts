/**
 * Pusher protocol 7 frames the server sends, encoded once per frame, and uWS topic names.
 * Every server event carries `data` as a JSON string, except pusher:error, whose data is
 * an object `{code, message}` (protocol-notes.md).
 */
import type { HeraldError } from '../../errors.js';

/**
 * The uWS topic of a channel of an app. Both parts are URI-encoded, so the app id cannot run
 * into the channel name (a socket of app A never receives app B's frames, even on the same
 * channel name) and no topic holds the `/`, `+` or `#` that some uWS builds read as MQTT
 * levels and wildcards.
 */
export function topicFor(appId: string, channel: string): string {
  return `${encodeURIComponent(appId)}:${encodeURIComponent(channel)}`;
}

/** Topic on which a signed-in user's watchers hear about them (not a subscribable channel). */
export function watchTopicFor(appId: string, userId: string): string {
  return `${encodeURIComponent(appId)}::watch:${encodeURIComponent(userId)}`;
}

/** Prefix of the per-user channel pusher-js subscribes to after sign-in (one definition, in names.ts). */
export { SERVER_TO_USER_PREFIX } from '../names.js';

export function connectionEstablished(socketId: string, activityTimeoutSeconds: number): string {
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
export function herrorFrame(err: HeraldError): string {
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
 * the adapter's snapshot or as [user id, user_info] pairs.
 */
export function subscriptionSucceeded(channel: string, presence?: PresenceSnapshot | [string, unknown][]): string {
  const data = presence === undefined ? '{}' : JSON.stringify({ presence: Array.isArray(presence) ? snapshotOf(presence) : presence });
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

export function signinSuccess(userData: string): string {
  return JSON.stringify({ event: 'pusher:signin_success', data: JSON.stringify({ user_data: userData }) });
}

export function watchlistEvents(events: { name: 'online' | 'offline'; user_ids: string[] }[]): string {
  return JSON.stringify({ event: 'pusher_internal:watchlist_events', data: JSON.stringify({ events }) });
}
