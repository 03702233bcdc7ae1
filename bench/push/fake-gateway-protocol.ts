/**
 * What the benchmark's fake gateway process (fake-gateway.ts) and its parent
 * (fake-gateway-control.ts) say to each other over IPC, and the fixed OAuth2 access token the
 * fake issues. Types and constants only: importing it starts nothing.
 */

/** The access token the fake's token endpoint hands out (the size of a real Google one). */
export const BENCH_ACCESS_TOKEN = 'ya29.c.herald-bench-' + 'x'.repeat(200);

/** parent → fake. */
export type FakeGatewayCommand = { type: 'reset' } | { type: 'notify'; total: number } | { type: 'stats' };

/** Counters since the last reset. */
export interface FakeGatewayCounts {
  /** Requests answered 200, both platforms. */
  ok: number;
  apns: number;
  fcm: number;
  /** Requests answered 403/404 (wrong shape); should stay 0. */
  rejected: number;
  /** OAuth2 token requests. */
  tokenRequests: number;
  /** HTTP/2 sessions opened. */
  sessions: number;
  /** Epoch ms (performance.timeOrigin-based, sub-ms) of the first and the latest 200. */
  firstAtMs: number | null;
  lastAtMs: number | null;
}

/** fake → parent. */
export type FakeGatewayEvent =
  | { type: 'listening'; h2Port: number; tokenPort: number; pid: number }
  | { type: 'reached'; counts: FakeGatewayCounts }
  | { type: 'stats'; counts: FakeGatewayCounts };

