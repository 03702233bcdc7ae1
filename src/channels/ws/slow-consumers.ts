/**
 * Slow consumers being let go (4100). The sweep (sweeper.ts) hands over a socket whose send
 * buffer passed maxSocketBackpressureBytes: it leaves its channels now (presence members go,
 * webhooks fire) and is sent nothing more, but the socket stays open so that the client, once
 * it reads again, gets its backlog, then `pusher:error` 4100 and the 4100 close. Sending them
 * at once would not do: uWS drops frames for a socket over its buffer cap, and force-closes a
 * socket a few seconds after end() (discarding what it still buffers), so the close is queued
 * only when the backlog has drained (`drained`), or at the deadline (`expire`, every sweep).
 *
 * While it is let go the socket is off the registry (`userData.state` null) and its deadline is
 * `userData.slowUntil`; it still counts as one of the node's open sockets (`size`).
 */
import { CLOSE_CODES } from '../../errors.js';
import { log } from '../../log.js';
import { countDisconnect } from '../../metrics/node-counters.js';
import { endWithError, type ClientSocket, type SocketState } from '../socket-registry.js';
import type { Leave } from './leave.js';

export class SlowConsumers {
  private readonly sockets = new Set<ClientSocket>();

  constructor(
    /** How long (ms) a slow consumer has to read its backlog before it is closed anyway. */
    private readonly graceMs: number,
    /** The connection leaves the registry and every channel (leave.ts), told with the code it will be closed with. */
    private readonly leave: Leave,
  ) {}

  /** Slow consumers still open. */
  get size(): number {
    return this.sockets.size;
  }

  /** A live connection whose send buffer is over the limit: let go as above. */
  letGo(state: SocketState, ws: ClientSocket): void {
    log.warn('slow consumer: disconnecting with 4100', { appId: state.app.id, socketId: state.socketId, bufferedBytes: ws.getBufferedAmount() });
    // Counted now: its close comes later, when it no longer belongs to the app.
    countDisconnect(state.app.id, CLOSE_CODES.OVER_CAPACITY);
    for (const topic of ws.getTopics()) ws.unsubscribe(topic);
    // To the dashboard the connection ends here, with the code it will be closed with.
    this.leave(state, CLOSE_CODES.OVER_CAPACITY);
    const userData = ws.getUserData();
    userData.state = null;
    userData.slowUntil = Date.now() + this.graceMs;
    this.sockets.add(ws);
    if (ws.getBufferedAmount() === 0) this.close(ws);
  }

  /** The socket's send buffer drained (uWS' drain): a slow consumer that read its backlog is closed now. */
  drained(ws: ClientSocket): void {
    if (ws.getUserData().slowUntil && ws.getBufferedAmount() === 0) this.close(ws);
  }

  /** The socket closed (by the client, or by its close here): forgotten. */
  closed(ws: ClientSocket): void {
    if (ws.getUserData().slowUntil) this.sockets.delete(ws);
  }

  /** Closes those whose deadline has passed (epoch ms `now`; every sweep). */
  expire(now: number): void {
    for (const ws of this.sockets) if ((ws.getUserData().slowUntil ?? 0) <= now) this.close(ws);
  }

  /** Closes every one at once (shutdown). */
  closeAll(): void {
    for (const ws of [...this.sockets]) this.close(ws);
  }

  private close(ws: ClientSocket): void {
    this.sockets.delete(ws);
    ws.getUserData().slowUntil = 0;
    endWithError(ws, CLOSE_CODES.OVER_CAPACITY, 'Too slow a consumer: send buffer over the limit');
  }
}
