/**
 * Live connections counted at admission, for a process whose WebSocket endpoint runs on several
 * front-end threads: the node's `maxConnections` and each app's connection quota must then be
 * one count for the process, not one per thread. One thread keeps today's counts (the socket
 * registry's) and needs none of this; `LocalConnectionCounts` (local-connection-counts.ts) is
 * the in-memory version, `SharedCounters` (front-end/shared-counters.ts) the one over
 * SharedArrayBuffers that every thread of the process shares.
 */
import type { RateCounter } from './rate-limits/rate-counter.js';

/** Why `tryConnect` refused: the node is at `maxConnections`, or the app at its quota. */
export type ConnectAnswer = 'ok' | 'node' | 'app';

export interface ConnectionCounts {
  /**
   * Counts one connection of the app in, unless that would take the node past `nodeMax` or the
   * app past `appMax` (null: no limit); a refusal counts nothing. Exact: the connections
   * admitted never pass a limit, however many threads connect at once. Shared counts add first
   * and take back on a refusal, so a connect racing a refused one may be refused one short of
   * the limit, and `connectionCount` may read that much above it for the moment.
   */
  tryConnect(appId: string, appMax: number | null, nodeMax: number | null): ConnectAnswer;
  /** A connection `tryConnect` counted has closed. */
  disconnected(appId: string): void;
  /** Live connections of the app, or of the node without `appId`. */
  connectionCount(appId?: string): number;
  /** Live connections per app id (apps with none left out). */
  connectionCounts(): Map<string, number>;
}

/**
 * What a WebSocket endpoint counts with when it is given them (endpoint.ts): connections for
 * admission and the new-connection rate limits. In a cluster the cluster's rate counter is
 * used instead of `rateCounter`.
 */
export interface FrontEndCounters extends ConnectionCounts {
  readonly rateCounter: RateCounter;
}
