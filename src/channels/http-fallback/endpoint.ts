/**
 * pusher-js' HTTP fallback transports, for clients that cannot open a WebSocket (proxies that
 * strip `Upgrade`, some carriers): a SockJS-style session under
 * `<httpFallback.path>/app/<key>/<server>/<session>/` with three routes, all POST:
 *
 * - `xhr_streaming`: a response kept open; the session's lines are written to it as they come.
 * - `xhr`: a long poll; answered with what is queued, or held until something is, or answered
 *   with a heartbeat after `heartbeatMs`. pusher-js polls again at once.
 * - `xhr_send`: the client's messages, a JSON array of strings (each one WebSocket message).
 *
 * The first stream or poll of an unknown session opens it (`o`) and connects it like a
 * WebSocket upgrade to `/app/<key>` (ws/socket-events.ts): the session is a connection in the
 * registry, with the same protocol handler, sweep (pings, 4201, 4100), quotas, webhooks and
 * metrics; channel frames reach it through the adapter's topic delivery (topics.ts).
 * A session is bound to the client address that opened it (net/client-address.ts: the
 * forwarded address behind a trusted proxy; an IPv6 client's /64): its key in the table (and in
 * the cluster's directory) is that address and its path, so a request from another address
 * for the same path never reaches it. A stream or poll from there opens a session of its own,
 * an xhr_send gets the 404 of an unknown session, and the owner's stream is not touched: to
 * another address a session it did not open does not exist. xhr_sends that miss are counted
 * per address (miss-budget.ts); past the budget they are refused with 429.
 * In a cluster a node that cannot read the directory (Redis away) answers 503 with
 * Retry-After rather than open a session under an id another node may hold.
 * Bounds: a session's queue (past maxSocketBackpressureBytes the sweep lets it go with 4100,
 * past twice that frames are dropped, as for a WebSocket), idle expiry (no stream or poll for
 * `sessionTimeoutMs`: closed as a dropped connection, 1006), xhr_send bodies capped while they
 * are read, and a refused or unknown session keeps no state. Every answer carries CORS headers
 * (pusher-js' `Content-Type: application/json` POSTs are preflighted).
 *
 * The parts, top-down: routes.ts (the three routes, the session binding, the miss budget),
 * session-table.ts (the sessions this node holds: delivery, heartbeats, idle expiry, their
 * record in the cluster's directory), cluster-relay.ts (requests for a session another node
 * holds), session.ts (one session, a ClientSocket to the WebSocket endpoint), responses.ts (the
 * HTTP answers), topics.ts (channel frames to sessions).
 */
import type { MissCounter } from './miss-budget.js';
import type { TemplatedApp } from 'uWebSockets.js';
import type { AppConfig, HeraldConfig } from '../../config/schema.js';
import type { WebSocketEndpoint } from '../ws/endpoint.js';
import { ClusterRelay } from './cluster-relay.js';
import type { SessionDirectory } from './directory.js';
import { FallbackRoutes } from './routes.js';
import { SessionTable } from './session-table.js';
import type { SessionTopics } from './topics.js';

export interface HttpFallbackDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly appsByKey: ReadonlyMap<string, AppConfig>;
  readonly endpoint: WebSocketEndpoint;
  readonly topics: SessionTopics;
  /** Cluster mode: where sessions live, for requests that reach another node than their session's. */
  readonly directory?: SessionDirectory | undefined;
  /** Several front-end threads: the misses per address block counted for the process (routes.ts). */
  readonly misses?: MissCounter | undefined;
}

export interface HttpFallback {
  /** Registers the routes on `app` (the main app, and each app a TLS reload makes). */
  register(app: TemplatedApp): void;
  /** Open sessions (connected or closing). */
  sessionCount(): number;
  /** Ends every open stream and poll and stops the timers (shutdown, after the connections were closed). */
  close(): void;
}

export function createHttpFallback(deps: HttpFallbackDeps): HttpFallback {
  const { config, endpoint, topics, directory } = deps;
  const { sessionTimeoutMs, heartbeatMs } = config.httpFallback;
  const events = endpoint.events;
  const table = new SessionTable({ heartbeatMs, sessionTimeoutMs, hardCapBytes: config.maxSocketBackpressureBytes * 2, events, topics, directory });
  const relay = directory ? new ClusterRelay(directory, table, heartbeatMs) : null;
  const routes = new FallbackRoutes({ config, appsByKey: deps.appsByKey, events, table, relay, misses: deps.misses });
  return {
    register: (app) => {
      if (config.httpFallback.enabled) routes.register(app);
    },
    sessionCount: () => table.size,
    close: () => {
      routes.close();
      relay?.close();
      table.close();
    },
  };
}
