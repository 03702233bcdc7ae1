/**
 * A front-end thread that fell behind a producer past its bound was dropped by it (ring.ts) and
 * missed frames: each of its sockets subscribed to a topic those frames were for (every socket
 * when the gap did not list them) is closed with 4100, as a slow consumer is, so that its client
 * reconnects and fetches again rather than go on with a silent gap.
 */
import { CLOSE_CODES } from '../errors.js';
import { endWithError, type SocketState } from '../channels/socket-registry.js';
import type { Missed } from './ring.js';

/** Closes (4100) the sockets of `sockets` subscribed to a topic of `missed`; returns how many. */
export function closeMissedSubscribers(sockets: Iterable<SocketState>, missed: Missed): number {
  const topics = missed.topics;
  if (topics !== null && topics.size === 0) return 0;
  let closed = 0;
  for (const state of [...sockets]) {
    const ws = state.ws;
    if (state.closed || !ws) continue;
    if (topics !== null && !ws.getTopics().some((topic) => topics.has(topic))) continue;
    endWithError(ws, CLOSE_CODES.OVER_CAPACITY, 'Too slow a consumer: this server thread fell behind and missed events');
    closed++;
  }
  return closed;
}
