/**
 * The WebSocket endpoint `/app/<key>` (Pusher protocol 7) and the local channel adapter.
 * Every upgrade is accepted so that a refused connection can be told why: pusher:error with
 * the close code, then the close (protocol-notes.md). The main thread keeps per-connection
 * state only; channel state lives on the shards (see subscriptions.ts and the adapter).
 */
import { randomInt } from 'node:crypto';
import type { HttpRequest, HttpResponse, WebSocket, WebSocketBehavior, us_socket_context_t } from 'uWebSockets.js';
import type { ServerContext } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { log, RateLimitedLog } from '../../log.js';
import type { AppConfig } from '../../config/schema.js';
import { appCounters, countDisconnect } from '../../metrics/node-counters.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { LocalChannelAdapter } from '../adapter/local-adapter.js';
import * as frames from './frames.js';
import { parseHandshake } from './handshake.js';
import { ProtocolHandler } from './protocol.js';
import { SocketRegistry, endWithError, type SocketState, type SocketUserData } from './registry.js';
import { Subscriptions } from './subscriptions.js';
import { Sweeper } from './sweeper.js';

export interface WebSocketEndpoint {
  adapter: ChannelAdapter;
  /** The `/*` WebSocket behaviour, for registering it again under a TLS server name. */
  behavior: WebSocketBehavior<SocketUserData>;
  /** Closes every connection with the code (4200 on shutdown). */
  closeAll(code: number, reason: string): void;
  connectionCount(): number;
  /** Open connections per app id. */
  connectionCounts(): Map<string, number>;
  /**
   * Applies a reloaded app list (SIGHUP): every connection takes its app's new config (secret,
   * limits); those of an app that is gone (or whose key changed) are closed with 4001, those of
   * a disabled app with 4003, each with its pusher:error. Returns how many were closed.
   */
  applyApps(apps: readonly AppConfig[]): number;
}

/** Refused connections at debug level: one line per close code every 10 s (with a count). */
const refusedLog = new RateLimitedLog('debug', 10_000);

type Ws = WebSocket<SocketUserData>;

function describe(err: unknown): string {
  return String((err as Error)?.stack ?? err);
}

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
  const protocol = new ProtocolHandler({ config, uws: ctx.app, registry, adapter, subscriptions });
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

  const behavior: WebSocketBehavior<SocketUserData> = {
    // Frames between the limit and twice the limit get a clear pusher:error and a 1009 close
    // (protocol.ts); larger ones are cut off by uWS without reading them.
    maxPayloadLength: config.maxWebSocketFrameBytes * 2,
    // Hard cap per socket: beyond it uWS drops messages until the sweep closes the socket (4100).
    // (closeOnBackpressureLimit stays off: its close carries no 4100 for the client.)
    maxBackpressure: config.maxSocketBackpressureBytes * 2,
    // Liveness is the protocol's pusher:ping / 4201 (sweeper.ts), not uWS' own timer.
    idleTimeout: 0,
    sendPingsAutomatically: false,

    // uWS ends the process on any exception thrown out of one of these callbacks: each body is
    // guarded, and a failure is logged and confined to its connection.
    upgrade: (res, req, context) => {
      try {
        upgrade(res, req, context);
      } catch (err) {
        log.error('websocket upgrade failed', { error: describe(err) });
        try {
          res.cork(() => res.writeStatus('500 Internal Server Error').end('', true));
        } catch {
          // Already answered or aborted: nothing left to tell the client.
        }
      }
    },

    open: (ws: Ws) => {
      try {
        open(ws);
      } catch (err) {
        log.error('websocket open failed', { error: describe(err) });
        try {
          ws.end(1011, 'Internal error');
        } catch {
          // Already closed.
        }
      }
    },

    message: (ws: Ws, message: ArrayBuffer, isBinary: boolean) => {
      const state = ws.getUserData().state;
      if (!state || state.closed) return;
      appCounters(state.app.id).wsMessagesReceived++;
      try {
        protocol.handle(state, ws, message, isBinary);
      } catch (err) {
        log.error('websocket message handler failed', { appId: state.app.id, error: describe(err) });
      }
    },

    // WebSocket-level ping/pong frames count as activity too (uWS answers pings itself).
    ping: (ws: Ws) => markActive(ws),
    pong: (ws: Ws) => markActive(ws),

    close: (ws: Ws, code: number) => {
      const state = ws.getUserData().state;
      if (!state || state.closed) return;
      countDisconnect(state.app.id, code);
      state.closed = true;
      state.ws = null;
      const userId = state.userId;
      // Each step on its own: whatever fails, the connection still leaves the registry and
      // every channel (no member or subscriber left behind).
      let wentOffline = false;
      try {
        wentOffline = registry.remove(state);
      } catch (err) {
        log.error('websocket close: registry removal failed', { appId: state.app.id, error: describe(err) });
      }
      try {
        if (userId !== null && wentOffline) {
          ctx.app.publish(frames.watchTopicFor(state.app.id, userId), frames.watchlistEvents([{ name: 'offline', user_ids: [userId] }]));
        }
      } catch (err) {
        log.error('websocket close: watchlist offline event failed', { appId: state.app.id, error: describe(err) });
      }
      try {
        subscriptions.closed(state);
      } catch (err) {
        log.error('websocket close: leaving channels failed', { appId: state.app.id, error: describe(err) });
      }
    },
  };
  ctx.app.ws<SocketUserData>('/*', behavior);

  function upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
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
  }

  function open(ws: Ws): void {
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
      refusedLog.write(String(code), 'websocket connection refused', { code, reason: message, ...(state ? { appId: state.app.id } : {}) });
      ws.getUserData().state = null;
      endWithError(ws, code, message);
      return;
    }
    state.ws = ws;
    registry.add(state);
    ws.send(frames.connectionEstablished(state.socketId, state.app.activityTimeout));
  }

  return {
    adapter,
    behavior,
    closeAll: (code, reason) => {
      sweeper.stop();
      for (const state of [...registry.all]) {
        if (!state.closed && state.ws) state.ws.end(code, reason);
      }
    },
    connectionCount: () => registry.connectionCount(),
    connectionCounts: () => registry.connectionCounts(),
    applyApps: (apps) => {
      protocol.reload(apps);
      const byId = new Map(apps.map((a) => [a.id, a]));
      let closed = 0;
      for (const state of [...registry.all]) {
        if (state.closed || !state.ws) continue;
        const next = byId.get(state.app.id);
        if (!next || next.key !== state.app.key) {
          closed++;
          endWithError(state.ws, CLOSE_CODES.UNKNOWN_APP, 'App key not in this cluster (removed by a configuration reload)');
        } else if (!next.enabled) {
          closed++;
          endWithError(state.ws, CLOSE_CODES.APP_DISABLED, 'Application is disabled');
        } else {
          state.app = next;
        }
      }
      return closed;
    },
  };
}
