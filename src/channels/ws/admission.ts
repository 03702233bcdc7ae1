/**
 * Whether a new WebSocket connection gets in, and its connection_established. The steps, in
 * order, each of which may refuse it (pusher:error with the close code, then the close):
 * 1. the handshake (app key, protocol version: decided at the upgrade, socket-events.ts);
 * 2. this node: shutting down (4200), at its `maxConnections` (4100);
 * 3. the app's connection quota when this node counts it alone (4004);
 *    with `counts` (several front-end threads in one process) steps 2 and 3 are one
 *    `tryConnect` on the process' counts, and the connection stays counted until it closes;
 * 4. the app's new-connection rate limits (4301), counted in memory or, in a cluster, in Redis;
 * 5. in a cluster, the app's connection quota counted across nodes (4004): `cluster.admit`.
 * Then it is registered and told connection_established.
 *
 * While a step waits for Redis (4 in a cluster, 5) the connection is parked: off the registry
 * (`userData.state` null), its state in `userData.admitting`, so that a close meanwhile only
 * marks it closed (socket-events.ts) and the answer, finding it closed, drops it. Redis failing to
 * answer refuses it with 4200 (the client reconnects shortly).
 */
import type { HeraldConfig } from '../../config/schema.js';
import type { ServerState } from '../../server-context.js';
import { CLOSE_CODES } from '../../errors.js';
import { describeError as describe, log, RateLimitedLog } from '../../log.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import * as frames from '../frames.js';
import { endWithError, type SocketRegistry, type SocketState, type ClientSocket } from '../socket-registry.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import type { AppRateLimits } from '../rate-limits/app-rate-limits.js';
import type { ConnectionCounts } from '../connection-counts.js';

/** Why a connection is refused: its close code and the message of its pusher:error. */
export interface Refusal {
  code: number;
  message: string;
}

export interface AdmissionDeps {
  readonly config: Readonly<HeraldConfig>;
  readonly state: ServerState;
  readonly registry: SocketRegistry;
  readonly adapter: ChannelAdapter;
  readonly rateLimits: AppRateLimits;
  readonly debug: DebugTap;
  /** Sockets this node holds (registered ones and slow consumers being let go). */
  readonly openSockets: () => number;
  /**
   * The process' connection counts, when several front-end threads share the node's and the
   * apps' limits: admission counts each connection in them (instead of reading `openSockets`
   * and the adapter's count) until it closes.
   */
  readonly counts?: ConnectionCounts;
}

/** Refused connections at debug level: one line per close code every 10 s (with a count). */
const refusedLog = new RateLimitedLog('debug', 10_000);

const SHUTTING_DOWN: Refusal = { code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Server shutting down' };
const CLUSTER_UNAVAILABLE: Refusal = { code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Cluster state unavailable: reconnect shortly' };


function overQuota(max: number): Refusal {
  return { code: CLOSE_CODES.OVER_CONNECTION_QUOTA, message: `Application is over its connection quota of ${max}` };
}

export class Admission {
  /** Node-wide connection limit (config.maxConnections; null: none); logged once per episode (by each front-end thread that refuses). */
  private readonly maxConnections: number | null;
  private atLimitLogged = false;

  constructor(private readonly deps: AdmissionDeps) {
    this.maxConnections = deps.config.maxConnections ?? null;
  }

  /** A connection opened (uWS open, or an HTTP fallback session): runs the steps above. */
  open(ws: ClientSocket): void {
    const { state, reject } = ws.getUserData();
    const refusal = reject ?? (state ? this.nodeRefusal(state, ws) : null);
    if (refusal || !state) {
      this.refuse(ws, state, refusal);
      return;
    }
    this.checkConnectionRate(ws, state);
  }

  /**
   * A socket closed: it leaves the counts it was counted in; once well below the node's limit,
   * reaching it again is logged again.
   */
  closed(ws: ClientSocket): void {
    this.uncount(ws);
    if (this.maxConnections === null || !this.atLimitLogged) return;
    // The node's connections: the process' counts when several threads share the limit, not this thread's share.
    const open = this.deps.counts ? this.deps.counts.connectionCount() : this.deps.openSockets();
    if (open < this.maxConnections * 0.9) this.atLimitLogged = false;
  }

  /** Steps 2 and 3: what this node decides alone. */
  private nodeRefusal(state: SocketState, ws: ClientSocket): Refusal | null {
    // In a cluster the quota spans the nodes: step 5 decides it.
    const max = this.deps.adapter.cluster ? null : state.app.maxConnections;
    const maxConnections = this.maxConnections;
    if (this.deps.state.draining) return SHUTTING_DOWN;
    if (this.deps.counts) {
      const answer = this.deps.counts.tryConnect(state.app.id, max, maxConnections);
      if (answer === 'ok') ws.getUserData().countedApp = state.app.id;
      return answer === 'ok' ? null : answer === 'node' ? this.atNodeLimit(maxConnections ?? 0) : overQuota(max ?? 0);
    }
    if (maxConnections !== null && this.deps.openSockets() >= maxConnections) return this.atNodeLimit(maxConnections);
    if (max !== null && this.deps.adapter.connectionCount(state.app.id) >= max) return overQuota(max);
    return null;
  }

  /** The node is at its maxConnections (4100), logged once per episode. */
  private atNodeLimit(maxConnections: number): Refusal {
    if (!this.atLimitLogged) {
      this.atLimitLogged = true;
      log.warn('node connection limit reached: refusing new WebSocket connections with 4100', { maxConnections });
    }
    return { code: CLOSE_CODES.OVER_CAPACITY, message: `Server is at its connection limit (${maxConnections}): retry later` };
  }

  /** The connection leaves the counts (`counts`) it was counted in, once. */
  private uncount(ws: ClientSocket): void {
    const userData = ws.getUserData();
    const appId = userData.countedApp;
    if (appId === undefined) return;
    userData.countedApp = undefined;
    this.deps.counts?.disconnected(appId);
  }

  /** Step 4: the new-connection rate limits, answered at once (memory) or by Redis (cluster). */
  private checkConnectionRate(ws: ClientSocket, state: SocketState): void {
    const limited = this.deps.rateLimits.newConnection(state.app, () => ws.getUserData().clientAddress);
    if (limited === null) {
      this.admit(ws, state);
    } else if (typeof limited === 'string') {
      this.refuse(ws, state, { code: CLOSE_CODES.CONNECTION_RATE_LIMIT, message: limited });
    } else {
      this.parkUntil(ws, state, limited, { failure: 'websocket connection rate could not be counted', failed: 'websocket connection rate check failed' }, (reason) => {
        if (reason === null) this.admit(ws, state);
        else this.refuse(ws, state, { code: CLOSE_CODES.CONNECTION_RATE_LIMIT, message: reason });
      });
    }
  }

  /** Step 5 (cluster only): the app's connection quota counted across nodes; then accept. */
  private admit(ws: ClientSocket, state: SocketState): void {
    const cluster = this.deps.adapter.cluster;
    if (!cluster) {
      this.accept(ws, state);
      return;
    }
    // The quota spans the cluster: the adapter counts this connection first.
    const max = state.app.maxConnections;
    this.parkUntil(
      ws,
      state,
      cluster.admit(state.app.id, state.socketId, max),
      { failure: 'websocket connection could not be admitted', failed: 'websocket admission failed' },
      (admitted) => {
        if (admitted) {
          this.accept(ws, state);
          return;
        }
        cluster.disconnected(state.app.id, state.socketId);
        this.refuse(ws, state, overQuota(max ?? 0));
      },
      // Counted, but closed meanwhile: the count is released.
      () => cluster.disconnected(state.app.id, state.socketId),
    );
  }

  /**
   * Parks the connection until `pending` (a count in Redis) settles: then, unless it closed
   * meanwhile (`closedMeanwhile` runs instead), it is unparked and `then` runs with the answer;
   * a failure refuses it with 4200, logging `messages.failure`.
   */
  private parkUntil<T>(ws: ClientSocket, state: SocketState, pending: Promise<T>, messages: { failure: string; failed: string }, then: (answer: T) => void, closedMeanwhile?: () => void): void {
    const userData = ws.getUserData();
    userData.state = null;
    userData.admitting = state;
    pending
      .then(
        (answer) => {
          if (state.closed) {
            closedMeanwhile?.();
            this.uncount(ws);
            return;
          }
          userData.admitting = null;
          userData.state = state;
          then(answer);
        },
        (err: unknown) => {
          if (state.closed) {
            this.uncount(ws);
            return;
          }
          userData.admitting = null;
          log.warn(messages.failure, { appId: state.app.id, error: String(err) });
          this.refuse(ws, state, CLUSTER_UNAVAILABLE);
        },
      )
      .catch((err: unknown) => log.error(messages.failed, { error: describe(err) }));
  }

  private refuse(ws: ClientSocket, state: SocketState | null, refusal: Refusal | null): void {
    const { code, message } = refusal ?? { code: CLOSE_CODES.GENERIC_RECONNECT, message: 'Refused' };
    refusedLog.write(String(code), 'websocket connection refused', { code, reason: message, ...(state ? { appId: state.app.id } : {}) });
    ws.getUserData().state = null;
    endWithError(ws, code, message);
  }

  /** Registered, and told connection_established. */
  private accept(ws: ClientSocket, state: SocketState): void {
    state.ws = ws;
    this.deps.registry.add(state);
    ws.send(frames.connectionEstablished(state.socketId, state.app.activityTimeout));
    this.deps.debug.connectionOpened(state.app.id, state.socketId);
  }
}
