/**
 * The WebSocket endpoint `/app/<key>` (Pusher protocol 7) and the local channel adapter.
 * Every upgrade is accepted so that a refused connection can be told why: pusher:error with
 * the close code, then the close (protocol-notes.md). The main thread keeps per-connection
 * state only; channel state lives on the shards (see subscriptions.ts and the adapter).
 */
import { randomInt } from 'node:crypto';
import type { WebSocket } from 'uWebSockets.js';
import type { ServerContext } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { log } from '../../log.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { LocalChannelAdapter } from '../adapter/local-adapter.js';
import * as frames from './frames.js';
import { parseHandshake } from './handshake.js';
import { ProtocolHandler } from './protocol.js';
import { SocketRegistry, type SocketState, type SocketUserData } from './registry.js';
import { Subscriptions } from './subscriptions.js';
import { Sweeper } from './sweeper.js';

export interface WebSocketEndpoint {
  adapter: ChannelAdapter;
  /** Closes every connection with the code (4200 on shutdown). */
  closeAll(code: number, reason: string): void;
  connectionCount(): number;
}

type Ws = WebSocket<SocketUserData>;

function markActive(ws: Ws): void {
  const state = ws.getUserData().state;
  if (state) {
    state.lastSeenMs = Date.now();
    state.pingSentMs = 0;
  }
}

export function registerWebSocket(ctx: ServerContext): WebSocketEndpoint {
  const { config } = ctx;
  const registry = new SocketRegistry();
  const adapter = new LocalChannelAdapter(ctx.app, ctx.shards, registry);
  const subscriptions = new Subscriptions(ctx.app, adapter, () => ctx.state.draining);
  const protocol = new ProtocolHandler({ config, uws: ctx.app, shards: ctx.shards, registry, adapter, subscriptions });
  const sweeper = new Sweeper(registry, {
    intervalMs: config.webSocketSweepIntervalMs,
    pongTimeoutMs: config.webSocketPongTimeoutMs,
    maxBackpressureBytes: config.maxSocketBackpressureBytes,
  });

  const newSocketId = (): string => {
    for (;;) {
      const id = `${randomInt(1, 2 ** 47)}.${randomInt(1, 2 ** 47)}`;
      if (!registry.hasSocketId(id)) return id;
    }
  };

  ctx.app.ws<SocketUserData>('/*', {
    // Frames between the limit and twice the limit get a clear pusher:error and a 1009 close
    // (protocol.ts); larger ones are cut off by uWS without reading them.
    maxPayloadLength: config.maxWebSocketFrameBytes * 2,
    // Hard cap per socket: beyond it uWS drops messages until the sweep closes the socket (4100).
    // (closeOnBackpressureLimit stays off: its close carries no 4100 for the client.)
    maxBackpressure: config.maxSocketBackpressureBytes * 2,
    // Liveness is the protocol's pusher:ping / 4201 (sweeper.ts), not uWS' own timer.
    idleTimeout: 0,
    sendPingsAutomatically: false,

    upgrade: (res, req, context) => {
      const handshake = ctx.state.draining
        ? { ok: false as const, code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Server shutting down' }
        : parseHandshake(req.getUrl(), req.getQuery() ?? '', ctx.appsByKey);
      let userData: SocketUserData;
      if (handshake.ok) {
        const now = Date.now();
        const state: SocketState = {
          socketId: newSocketId(),
          app: handshake.app,
          ws: null,
          closed: false,
          channels: new Map(),
          userId: null,
          lastSeenMs: now,
          pingSentMs: 0,
          clientEventWindowMs: 0,
          clientEventCount: 0,
        };
        userData = { state, reject: null };
      } else {
        userData = { state: null, reject: { code: handshake.code, message: handshake.message } };
      }
      res.upgrade(
        userData,
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },

    open: (ws: Ws) => {
      const { state, reject } = ws.getUserData();
      let refusal = reject;
      if (!refusal && state) {
        const max = state.app.maxConnections;
        if (ctx.state.draining) {
          refusal = { code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Server shutting down' };
        } else if (max !== null && registry.connectionCount(state.app.id) >= max) {
          refusal = { code: CLOSE_CODES.OVER_CONNECTION_QUOTA, message: `Application is over its connection quota of ${max}` };
        }
      }
      if (refusal || !state) {
        const { code, message } = refusal ?? { code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Refused' };
        ws.getUserData().state = null;
        ws.send(frames.errorFrame(code, message));
        ws.end(code, message);
        return;
      }
      state.ws = ws;
      registry.add(state);
      ws.send(frames.connectionEstablished(state.socketId, state.app.activityTimeout));
    },

    message: (ws: Ws, message: ArrayBuffer, isBinary: boolean) => {
      const state = ws.getUserData().state;
      if (!state || state.closed) return;
      try {
        protocol.handle(state, ws, message, isBinary);
      } catch (err) {
        log.error('websocket message handler failed', { appId: state.app.id, error: String((err as Error)?.stack ?? err) });
      }
    },

    // WebSocket-level ping/pong frames count as activity too (uWS answers pings itself).
    ping: (ws: Ws) => markActive(ws),
    pong: (ws: Ws) => markActive(ws),

    close: (ws: Ws) => {
      const state = ws.getUserData().state;
      if (!state || state.closed) return;
      state.closed = true;
      state.ws = null;
      const userId = state.userId;
      const wentOffline = registry.remove(state);
      if (userId !== null && wentOffline) {
        ctx.app.publish(frames.watchTopicFor(state.app.id, userId), frames.watchlistEvents([{ name: 'offline', user_ids: [userId] }]));
      }
      subscriptions.closed(state);
    },
  });

  return {
    adapter,
    closeAll: (code, reason) => {
      sweeper.stop();
      for (const state of [...registry.all]) {
        if (!state.closed && state.ws) state.ws.end(code, reason);
      }
    },
    connectionCount: () => registry.connectionCount(),
  };
}
