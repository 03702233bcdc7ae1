/**
 * The WebSocket endpoint `/app/<key>` (Pusher protocol 7), put together from its parts:
 * - the uWS behaviour here: the upgrade (its user data: the connection's state or why it is
 *   refused, and the client's address), then uWS' callbacks, each handed to
 * - socket-events.ts: open (admission.ts), message (protocol.ts, subscriptions.ts), activity,
 *   drain and close (leave.ts), shared with the HTTP fallback's sessions (http-fallback/);
 * - sweeper.ts: one timer for every connection (pings, 4201, 4009) handing slow consumers to
 *   slow-consumers.ts (4100);
 * - app changes at run time (applyApp): each connection of the app takes its new config or is
 *   closed.
 * Every upgrade is accepted so that a refused connection can be told why: pusher:error with
 * the close code, then the close (the clients decide from the close code whether and when
 * to reconnect: CLOSE_CODES in errors.ts). The main thread keeps per-connection
 * state only; channel state lives behind the adapter (the shards, or Redis in a cluster: see
 * subscriptions.ts and the adapter).
 */
import type { HttpRequest, HttpResponse, WebSocketBehavior, us_socket_context_t } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import type { ServerState } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { describeError as describe, log } from '../../log.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import type { TopicInterestHook } from '../../http/topic-fanout.js';
import { ProtocolHandler } from './protocol.js';
import { endWithError, type SocketRegistry, type SocketState, type SocketUserData } from '../socket-registry.js';
import { Subscriptions } from './subscriptions.js';
import { Sweeper } from './sweeper.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import { AppRateLimits } from '../rate-limits/app-rate-limits.js';
import { LocalRateCounter } from '../rate-limits/local-rate-counter.js';
import { Admission } from './admission.js';
import { clientAddressResolver } from '../../net/client-address.js';
import { leaving } from './leave.js';
import { SlowConsumers } from './slow-consumers.js';
import { SocketEvents } from './socket-events.js';
import type { FrontEndCounters } from '../connection-counts.js';

/** What the endpoint is built from (server.ts): the registry is shared with the local adapter. */
export interface WebSocketDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly state: ServerState;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly registry: SocketRegistry;
  readonly adapter: ChannelAdapter;
  /** The debug tap (connections opened and closed, client events). */
  readonly debug: DebugTap;
  /**
   * The front-end thread serving this endpoint (0 when absent): every socket id it hands out,
   * HTTP fallback sessions' included (they connect through `events`), carries it (socket-id.ts).
   */
  readonly frontEndThread?: number | undefined;
  /**
   * The process' counters when several front-end threads serve it (front-end/shared-counters.ts):
   * connections are admitted and counted in them, and the new-connection rate limits taken from
   * their rate counter unless the cluster counts those. Without them: this thread's registry and
   * an in-memory rate counter.
   */
  readonly counters?: FrontEndCounters;
  /** Told of every topic a socket subscribes to or leaves, closing included (front-end threads). */
  readonly interest?: TopicInterestHook;
}

export interface WebSocketEndpoint {
  /** The `/*` WebSocket behaviour: server.ts registers it on the main app (and each app a TLS reload makes). */
  behavior: WebSocketBehavior<SocketUserData>;
  /** Closes every connection with the code (4200 on shutdown). */
  closeAll(code: number, reason: string): void;
  /** Live connections, of one app or of all (of every thread with `counters`). */
  connectionCount(appId?: string): number;
  /** Open connections per app id (of every thread with `counters`). */
  connectionCounts(): Map<string, number>;
  /**
   * What happens to a connection, for sockets that are not uWS WebSockets (HTTP fallback
   * sessions, channels/http-fallback): `connect` opens one as an upgrade to `/app/<rawKey>`
   * would, and the socket then calls message, activity, drain and close like uWS does.
   */
  readonly events: SocketEvents;
  /**
   * Applies one app changed at run time (admin API), visiting only its connections: closed with
   * 4001 when `next` is undefined (deleted) or has another key, 4003 when disabled, else given
   * `next`. Returns how many were closed.
   */
  applyApp(appId: string, next: AppConfig | undefined): number;
}

/**
 * The uWS `subscription` handler that tells `interest` of each topic a socket takes or leaves.
 * uWS calls it on every subscribe and unsubscribe that changes the topic's count, and for each
 * topic a closing socket still had (before `close`).
 */
export function interestSubscriptionHandler(interest: TopicInterestHook): NonNullable<WebSocketBehavior<SocketUserData>['subscription']> {
  return (_ws, topic, newCount, oldCount) => {
    const name = Buffer.from(topic).toString('utf8');
    if (newCount > oldCount) interest.add(name);
    else if (newCount < oldCount) interest.remove(name);
  };
}

export function registerWebSocket(ctx: WebSocketDeps): WebSocketEndpoint {
  const { config, registry, adapter } = ctx;
  const subscriptions = new Subscriptions(adapter, () => ctx.state.draining, () => registry.all());
  const protocol = new ProtocolHandler({ config, registry, adapter, subscriptions, debug: ctx.debug });
  const leave = leaving({ registry, adapter, subscriptions, debug: ctx.debug });
  const slowConsumers = new SlowConsumers(config.webSocketPongTimeoutMs, leave);
  const sweeper = new Sweeper(registry, {
    intervalMs: config.webSocketSweepIntervalMs,
    pongTimeoutMs: config.webSocketPongTimeoutMs,
    maxBackpressureBytes: config.maxSocketBackpressureBytes,
    onSlow: (state, ws) => slowConsumers.letGo(state, ws),
    onTick: (now) => slowConsumers.expire(now),
  });
  const counters = ctx.counters;
  /** Sockets this node holds: registered ones plus slow consumers being let go (still open); every thread's with counters. */
  const openSockets = counters ? (): number => counters.connectionCount() : (): number => registry.connectionCount() + slowConsumers.size;
  /** maxNewConnectionsPerSecond(PerIp): across the cluster when the adapter counts them. */
  const rateLimits = new AppRateLimits(adapter.cluster?.rateCounter ?? counters?.rateCounter ?? new LocalRateCounter());
  /** Whether a new connection gets in (node limits, quota, rate limits, the cluster's count). */
  const admission = new Admission({ config, state: ctx.state, registry, adapter, rateLimits, debug: ctx.debug, openSockets, ...(counters && { counts: counters }) });
  const events = new SocketEvents({ state: ctx.state, appsByKey: ctx.appsByKey, registry, admission, protocol, slowConsumers, leave, frontEndThread: ctx.frontEndThread });
  const clientAddressOf = clientAddressResolver(config.trustedProxies);

  function upgrade(res: HttpResponse, req: HttpRequest, context: us_socket_context_t): void {
    const clientAddress = clientAddressOf(Buffer.from(res.getRemoteAddressAsText()).toString(), req.getHeader('x-forwarded-for'));
    res.upgrade(
      { ...events.userData(req.getUrl(), req.getQuery() ?? ''), clientAddress },
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  }

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

    // uWS ends the process on any exception thrown out of one of these callbacks: the upgrade
    // is guarded here, the others in socket-events.ts.
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
    open: (ws) => events.open(ws),
    message: (ws, message, isBinary) => events.message(ws, message, isBinary),
    ping: (ws) => events.activity(ws),
    pong: (ws) => events.activity(ws),
    drain: (ws) => events.drain(ws),
    close: (ws, code) => events.close(ws, code),
  };
  if (ctx.interest) behavior.subscription = interestSubscriptionHandler(ctx.interest);

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
    events,
    closeAll: (code, reason) => {
      sweeper.stop();
      for (const state of [...registry.all()]) {
        if (!state.closed && state.ws) state.ws.end(code, reason);
      }
      slowConsumers.closeAll();
    },
    connectionCount: (appId) => (appId === undefined ? openSockets() : (counters ?? registry).connectionCount(appId)),
    connectionCounts: () => (counters ?? registry).connectionCounts(),
    applyApp: (appId, next) => {
      protocol.reloadApp(appId, next);
      const gone = next ? 'App key changed: reconnect with the new key' : 'App deleted';
      let closed = 0;
      for (const state of [...registry.socketsOf(appId)]) if (takeApp(state, next, gone)) closed++;
      return closed;
    },
  };
}
