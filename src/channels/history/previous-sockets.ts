/**
 * A recovering subscribe's `previous_socket_ids`: the socket ids the client had since the
 * serial it recovers from (pusher-js gets a new one at each reconnect). A kept event remembers
 * the socket it is not sent to (a client event's sender, a trigger's `socket_id`); replayed, it
 * is still not sent to that client, under its current socket id or any of these.
 */
import type { KeptEnvelope, KeptEvent } from '../messages.js';
import { isValidSocketId } from '../names.js';

/** Most socket ids a recovering subscribe may name (the client keeps its newest). */
export const MAX_PREVIOUS_SOCKET_IDS = 8;

/**
 * `previous_socket_ids` as sent: absent (undefined or null) is none; otherwise an array of at
 * most MAX_PREVIOUS_SOCKET_IDS socket ids. Null when it is anything else.
 */
export function parsePreviousSocketIds(raw: unknown): string[] | null {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw) || raw.length > MAX_PREVIOUS_SOCKET_IDS) return null;
  for (const id of raw) if (typeof id !== 'string' || !isValidSocketId(id)) return null;
  return raw as string[];
}

/**
 * The kept events replayed to a recovering socket: all but those left out for it, under
 * `socketId` (its current id: a subscribe again on the same connection) or one of
 * `previousSocketIds`.
 */
export function replayedTo(envelopes: readonly KeptEnvelope[], socketId: string, previousSocketIds: readonly string[] = []): KeptEvent[] {
  const out: KeptEvent[] = [];
  for (const { kept, exceptSocketId } of envelopes) {
    if (exceptSocketId !== undefined && (exceptSocketId === socketId || previousSocketIds.includes(exceptSocketId))) continue;
    out.push(kept);
  }
  return out;
}
