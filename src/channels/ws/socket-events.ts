/**
 * What happens to a connection from its upgrade to its close, for a uWS WebSocket (the
 * endpoint's behaviour calls these: endpoint.ts) and an HTTP fallback session (which calls them
 * for itself: http-fallback/) alike:
 * 1. `userData`: a new connection's user data, its state or why it is refused (handshake.ts;
 *    4200 while the server shuts down); a session gets it through `connect`;
 * 2. `open`: admission (admission.ts), then connection_established;
 * 3. `message`: one frame from the client, to the protocol handler (protocol.ts); `activity`: a
 *    ping or pong frame (liveness for the sweep, sweeper.ts);
 * 4. `drain`: its send buffer drained (a slow consumer being let go is closed: slow-consumers.ts);
 * 5. `close`: one still being admitted is only marked closed (its admission drops it); a
 *    registered one leaves the registry and its channels (leave.ts).
 * uWS ends the process on an exception thrown out of one of its callbacks: open, message and
 * drain confine a failure to their connection and log it; close's steps guard themselves.
 */
import type { AppConfig } from '../../config/schema.js';
import type { ServerState } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import { appCounters, countDisconnect } from '../../metrics/node-counters.js';
import type { ClientSocket, SocketRegistry, SocketState, SocketUserData } from '../socket-registry.js';
import { SmallMap } from '../small-map.js';
import { newSocketId } from '../socket-id.js';
import type { Admission } from './admission.js';
import { parseHandshake } from './handshake.js';
import type { Leave } from './leave.js';
import type { ProtocolHandler } from './protocol.js';
import type { SlowConsumers } from './slow-consumers.js';

export interface SocketEventsDeps {
  readonly state: ServerState;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly registry: SocketRegistry;
  readonly admission: Admission;
  readonly protocol: ProtocolHandler;
  readonly slowConsumers: SlowConsumers;
  readonly leave: Leave;
  /** The front-end thread serving these connections, carried in their socket ids (socket-id.ts); 0 when absent. */
  readonly frontEndThread?: number | undefined;
}


export class SocketEvents {
  constructor(private readonly deps: SocketEventsDeps) {}

  /** A new connection's user data for an upgrade to `url` with `query`: its state, or why it is refused (told right after open). */
  userData(url: string, query: string): Omit<SocketUserData, 'clientAddress'> {
    const handshake = this.deps.state.draining
      ? { ok: false as const, code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Server shutting down' }
      : parseHandshake(url, query, this.deps.appsByKey);
    if (!handshake.ok) return { state: null, reject: { code: handshake.code, message: handshake.message }, slowUntil: 0 };
    const now = Date.now();
    const state: SocketState = {
      socketId: this.freshSocketId(),
      app: handshake.app,
      ws: null,
      closed: false,
      channels: new SmallMap(),
      userId: null,
      openedMs: now,
      lastSeenMs: now,
      pingSentMs: 0,
      clientEventWindowMs: 0,
      clientEventCount: 0,
    };
    return { state, reject: null, slowUntil: 0 };
  }

  /**
   * Opens a socket that is not a uWS WebSocket (an HTTP fallback session) as an upgrade to
   * `/app/<rawKey>?<query>` would (the key as in the path): the same checks, refusals and
   * connection_established. The socket then calls message, activity, drain and close like uWS.
   */
  connect(socket: ClientSocket, rawKey: string, query: string): void {
    Object.assign(socket.getUserData(), this.userData(`/app/${rawKey}`, query));
    this.open(socket);
  }

  open(ws: ClientSocket): void {
    try {
      this.deps.admission.open(ws);
    } catch (err) {
      log.error('websocket open failed', { error: describe(err) });
      try {
        ws.end(CLOSE_CODES.INTERNAL_ERROR, 'Internal error');
      } catch {
        // Already closed.
      }
    }
  }

  message(ws: ClientSocket, message: ArrayBuffer, isBinary: boolean): void {
    const state = ws.getUserData().state;
    if (!state || state.closed) return;
    appCounters(state.app.id).wsMessagesReceived++;
    try {
      this.deps.protocol.handle(state, ws, message, isBinary);
    } catch (err) {
      log.error('websocket message handler failed', { appId: state.app.id, error: describe(err) });
    }
  }

  /** A WebSocket-level ping or pong frame: activity, as any frame is (uWS answers pings itself). */
  activity(ws: ClientSocket): void {
    const state = ws.getUserData().state;
    if (state) {
      state.lastSeenMs = Date.now();
      state.pingSentMs = 0;
    }
  }

  drain(ws: ClientSocket): void {
    try {
      this.deps.slowConsumers.drained(ws);
    } catch (err) {
      log.error('websocket drain handler failed', { error: describe(err) });
    }
  }

  close(ws: ClientSocket, code: number): void {
    const userData = ws.getUserData();
    if (userData.admitting) {
      // Closed before the adapter answered: the answer finds it closed and releases it.
      userData.admitting.closed = true;
      userData.admitting = null;
      return;
    }
    this.deps.slowConsumers.closed(ws);
    this.deps.admission.closed(ws);
    const state = userData.state;
    if (!state || state.closed) return;
    countDisconnect(state.app.id, code);
    this.deps.leave(state, code);
  }

  /** A socket id of this front-end thread that no live connection of it has. */
  private freshSocketId(): string {
    for (;;) {
      const id = newSocketId(this.deps.frontEndThread ?? 0);
      if (!this.deps.registry.hasSocketId(id)) return id;
    }
  }
}
