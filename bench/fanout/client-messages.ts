/**
 * IPC messages between the fan-out orchestrator (bench/fanout.ts, which also sends the HTTP
 * triggers) and its load-client processes (load-client.ts, which hold the WebSocket
 * receivers). Type-only; both sides import it. Times are microseconds of the machine's
 * monotonic clock (see clock.ts), comparable across processes.
 */
import type { HistogramData } from './latency-histogram.js';

/** Which channel socket number `i` (global across processes) subscribes to. */
export type ChannelPlan =
  | { kind: 'one'; channel: string }
  /** `${prefix}${i % modulo}`. */
  | { kind: 'modulo'; prefix: string; modulo: number }
  /** WebSockets on `ws`, HTTP fallback sessions (xhr_streaming) on `http`. */
  | { kind: 'by-transport'; ws: string; http: string };

/** Credentials to sign private/presence subscriptions with (the bench's own test app). */
export interface SigningApp {
  key: string;
  secret: string;
}

export type OrchestratorCommand =
  /**
   * Opens `count` sockets (a `ws://` url) or pusher-js HTTP fallback sessions over xhr_streaming
   * (an `http://<host>/pusher/app/<key>?…` url), at most `concurrency` handshakes at a time, from `localAddress` when
   * given (a loopback alias such as 127.0.0.12: each source address has its own ephemeral ports).
   */
  | { type: 'connect'; id: number; url: string; count: number; indexBase: number; concurrency: number; localAddress?: string }
  /** Subscribes every open socket per `plan`, at most `concurrency` pending at a time. */
  | { type: 'subscribe'; id: number; plan: ChannelPlan; concurrency: number; signing?: SigningApp }
  /** Zeroes the counters and the histogram (call only when nothing is in flight). */
  | { type: 'reset'; id: number }
  | { type: 'stats'; id: number }
  /** Closes every socket (client side first) and answers when all are closed. */
  | { type: 'close'; id: number }
  /** Starts/stops the progress reports. */
  | { type: 'progress'; id: number; enabled: boolean };

export interface ConnectResult {
  type: 'connect';
  id: number;
  opened: number;
  failed: number;
  /** Monotonic µs of the first connect attempt and of the last connection_established. */
  firstStartUs: number;
  lastDoneUs: number;
  errors: string[];
}

export interface SubscribeResult {
  type: 'subscribe';
  id: number;
  succeeded: number;
  failed: number;
  firstStartUs: number;
  lastDoneUs: number;
  errors: string[];
}

export interface StatsResult {
  type: 'stats';
  id: number;
  /** Bench events received (frames carrying a timestamp). */
  received: number;
  /** Other frames received (member_added, subscription_count, ...). */
  other: number;
  /** Sockets the server closed on us since connecting. */
  closedByServer: number;
  closeCodes: Record<string, number>;
  histogram: HistogramData;
  /** This process's CPU time, µs (user + system), cumulative. */
  cpuUs: number;
}

export interface AckResult {
  type: 'ack';
  id: number;
}

/** Sent unprompted every ~20 ms while enabled and the count has changed. */
export interface ProgressReport {
  type: 'progress-report';
  received: number;
}

export type ClientReply = ConnectResult | SubscribeResult | StatsResult | AckResult;
export type ClientMessage = ClientReply | ProgressReport;
