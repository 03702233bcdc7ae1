/**
 * The WebSocket endpoint `/app/<key>` (Pusher protocol 7).
 * Every upgrade is accepted so that a refused connection can be told why: pusher:error with
 * the close code, then the close (the clients decide from the close code whether and when
 * to reconnect: CLOSE_CODES in errors.ts). The main thread keeps per-connection
 * state only; channel state lives behind the adapter (the shards, or Redis in a cluster: see
 * subscriptions.ts and the adapter).
 */
import { randomInt } from 'node:crypto';
import type { HttpRequest, HttpResponse, WebSocket, WebSocketBehavior, us_socket_context_t } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import type { ServerState } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import { appCounters, countDisconnect } from '../../metrics/node-counters.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import { parseHandshake } from './handshake.js';
import { ProtocolHandler } from './protocol.js';
import { endWithError, type SocketRegistry, type SocketState, type SocketUserData } from '../socket-registry.js';
import { SmallMap } from '../small-map.js';
import { Subscriptions } from './subscriptions.js';
import { Sweeper } from './sweeper.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import { AppRateLimits } from '../rate-limits/app-rate-limits.js';
import { LocalRateCounter } from '../rate-limits/local-rate-counter.js';
import { Admission } from './admission.js';
import { clientAddressResolver } from '../../net/client-address.js';

/** What the endpoint is built from (server.ts): the registry is shared with the local adapter. */
export interface WebSocketDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly state: ServerState;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly registry: SocketRegistry;
  readonly adapter: ChannelAdapter;
  /** The debug tap (connections opened and closed, client events). */
  readonly debug: DebugTap;
}

export interface WebSocketEndpoint {
  /** The `/*` WebSocket behaviour: server.ts registers it on the main app (and each app a TLS reload makes). */
  behavior: WebSocketBehavior<SocketUserData>;
  /** Closes every connection with the code (4200 on shutdown). */
  closeAll(code: number, reason: string): void;
  /** Live connections, of one app or of all. */
  connectionCount(appId?: string): number;
  /** Open connections per app id. */
  connectionCounts(): Map<string, number>;
  /**
   * Opens a connection on a socket that is not a uWS WebSocket (an HTTP fallback session,
   * channels/http-fallback) as an upgrade to `/app/<rawKey>?<query>` would (the key as in the path): the same checks,
   * refusals and connection_established. The socket then calls `behavior`'s message, drain,
   * ping and close like uWS does for a WebSocket.
   */
  connectSession(socket: WebSocket<SocketUserData>, rawKey: string, query: string): void;
  /**
   * Applies one app changed at run time (admin API, reload), visiting only its connections: closed with
   * 4001 when `next` is undefined (deleted) or has another key, 4003 when disabled, else given
   * `next`. Returns how many were closed.
   */
  applyApp(appId: string, next: AppConfig | undefined): number;
}

type Ws = WebSocket<SocketUserData>;

function markActive(ws: Ws): void {
  const state = ws.getUserData().state;
  if (state) {
    state.lastSeenMs = Date.now();
    state.pingSentMs = 0;
  }
}

export function registerWebSocket(ctx: WebSocketDeps): WebSocketEndpoint {
  const { config, registry, adapter } = ctx;
  /** What a cluster adds (admission and rate limits counted across nodes); null on one node. */
  const cluster = adapter.cluster;
  const subscriptions = new Subscriptions(adapter, () => ctx.state.draining, () => registry.all());
  const protocol = new ProtocolHandler({ config, registry, adapter, subscriptions, debug: ctx.debug });
  /** maxNewConnectionsPerSecond(PerIp): across the cluster when the adapter counts them. */
  const rateLimits = new AppRateLimits(cluster?.rateCounter ?? new LocalRateCounter());
  /**
   * Slow consumers being let go: off the registry and every channel, sent nothing more, closed
   * with 4100 once they have read their backlog (drain) or at their deadline.
   */
  const slowSockets = new Set<Ws>();
  const sweeper = new Sweeper(registry, {
    intervalMs: config.webSocketSweepIntervalMs,
    pongTimeoutMs: config.webSocketPongTimeoutMs,
    maxBackpressureBytes: config.maxSocketBackpressureBytes,
    onSlow: (state, ws) => letSlowConsumerGo(state, ws),
    onTick: (now) => {
      for (const ws of slowSockets) if ((ws.getUserData().slowUntil ?? 0) <= now) closeSlowConsumer(ws);
    },
  });
  /** Sockets this node holds: registered ones plus slow consumers being let go (still open). */
  const openSockets = (): number => registry.connectionCount() + slowSockets.size;
  /** Whether a new connection gets in (admission.ts: node limits, quota, rate limits, the cluster's count). */
  const clientAddressOf = clientAddressResolver(config.trustedProxies);
  const admission = new Admission({ config, state: ctx.state, registry, adapter, rateLimits, debug: ctx.debug, openSockets });

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
        admission.open(ws);
      } catch (err) {
        log.error('websocket open failed', { error: describe(err) });
        try {
          ws.end(CLOSE_CODES.INTERNAL_ERROR, 'Internal error');
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

    drain: (ws: Ws) => {
      try {
        if (ws.getUserData().slowUntil && ws.getBufferedAmount() === 0) closeSlowConsumer(ws);
      } catch (err) {
        log.error('websocket drain handler failed', { error: describe(err) });
      }
    },

    close: (ws: Ws, code: number) => {
      const userData = ws.getUserData();
      if (userData.admitting) {
        // Closed before the adapter answered: the answer finds it closed and releases it.
        userData.admitting.closed = true;
        userData.admitting = null;
        return;
      }
      if (userData.slowUntil) slowSockets.delete(ws);
      admission.closed();
      const state = userData.state;
      if (!state || state.closed) return;
      countDisconnect(state.app.id, code);
      leave(state, code);
    },
  };

  /**
   * The connection leaves the registry and every channel. Each step on its own: whatever fails,
   * it still leaves the registry and every channel (no member or subscriber left behind). The
   * debug tap hears of the close (with `code`) after those steps.
   */
  function leave(state: SocketState, code: number): void {
    state.closed = true;
    state.ws = null;
    const userId = state.userId;
    let wentOffline = false;
    try {
      wentOffline = registry.remove(state);
    } catch (err) {
      log.error('websocket close: registry removal failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      if (userId !== null && wentOffline) adapter.userPresence(state.app.id, userId, false);
    } catch (err) {
      log.error('websocket close: watchlist offline event failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      subscriptions.closed(state);
    } catch (err) {
      log.error('websocket close: leaving channels failed', { appId: state.app.id, error: describe(err) });
    }
    try {
      cluster?.disconnected(state.app.id, state.socketId);
    } catch (err) {
      log.error('websocket close: adapter disconnect failed', { appId: state.app.id, error: describe(err) });
    }
    ctx.debug.connectionClosed(state.app.id, state.socketId, code);
  }

  /**
   * A consumer whose send buffer passed maxSocketBackpressureBytes: it leaves its channels now
   * (presence members go, webhooks fire) and is sent nothing more, but the socket stays open so
   * that the client, once it reads again, gets its backlog, then `pusher:error` 4100 and the
   * 4100 close. Sending them at once would not do: uWS drops frames for a socket over its
   * buffer cap, and force-closes a socket a few seconds after end() (discarding what it still
   * buffers), so the close is queued only when the backlog has drained, or at the deadline.
   */
  function letSlowConsumerGo(state: SocketState, ws: Ws): void {
    log.warn('slow consumer: disconnecting with 4100', { appId: state.app.id, socketId: state.socketId, bufferedBytes: ws.getBufferedAmount() });
    // Counted now: its close comes later, when it no longer belongs to the app.
    countDisconnect(state.app.id, CLOSE_CODES.OVER_CAPACITY);
    for (const topic of ws.getTopics()) ws.unsubscribe(topic);
    // To the dashboard the connection ends here, with the code it will be closed with.
    leave(state, CLOSE_CODES.OVER_CAPACITY);
    const userData = ws.getUserData();
    userData.state = null;
    userData.slowUntil = Date.now() + config.webSocketPongTimeoutMs;
    slowSockets.add(ws);
    if (ws.getBufferedAmount() === 0) closeSlowConsumer(ws);
  }

  function closeSlowConsumer(ws: Ws): void {
    slowSockets.delete(ws);
    ws.getUserData().slowUntil = 0;
    endWithError(ws, CLOSE_CODES.OVER_CAPACITY, 'Too slow a consumer: send buffer over the limit');
  }

  /** A new connection's user data: its state, or why it is refused (told right after open). */
  function connectionData(url: string, query: string): Omit<SocketUserData, 'clientAddress'> {
    const handshake = ctx.state.draining
      ? { ok: false as const, code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Server shutting down' }
      : parseHandshake(url, query, ctx.appsByKey);
    if (!handshake.ok) return { state: null, reject: { code: handshake.code, message: handshake.message }, slowUntil: 0 };
    const now = Date.now();
    const state: SocketState = {
      socketId: newSocketId(),
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

  function upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const clientAddress = clientAddressOf(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
    res.upgrade(
      { ...connectionData(req.getUrl(), req.getQuery() ?? ''), clientAddress },
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  }

  /**
   * An open connection takes its app's new config; true when it was closed instead: with 4001
   * (`gone`) when the app is gone or its key changed, 4003 when it is disabled.
   */
  function takeApp(state: SocketState, next: AppConfig | undefined, gone: string): boolean {
    if (state.closed || !state.ws) return false;
    if (!next || next.key !== state.app.key) {
      endWithError(state.ws, CLOSE_CODES.UNKNOWN_APP, gone);
      return true;
    }
    if (!next.enabled) {
      endWithError(state.ws, CLOSE_CODES.APP_DISABLED, 'Application is disabled');
      return true;
    }
    state.app = next;
    return false;
  }

  return {
    behavior,
    connectSession: (socket, key, query) => {
      Object.assign(socket.getUserData(), connectionData(`/app/${key}`, query));
      behavior.open!(socket);
    },
    closeAll: (code, reason) => {
      sweeper.stop();
      for (const state of [...registry.all()]) {
        if (!state.closed && state.ws) state.ws.end(code, reason);
      }
      for (const ws of [...slowSockets]) closeSlowConsumer(ws);
    },
    connectionCount: (appId) => (appId === undefined ? openSockets() : registry.connectionCount(appId)),
    connectionCounts: () => registry.connectionCounts(),
    applyApp: (appId, next) => {
      protocol.reloadApp(appId, next);
      const gone = next ? 'App key changed: reconnect with the new key' : 'App deleted';
      let closed = 0;
      for (const state of [...registry.socketsOf(appId)]) if (takeApp(state, next, gone)) closed++;
      return closed;
    },
  };
}
