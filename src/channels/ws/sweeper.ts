/**
 * One timer for every connection (not one per socket): pings clients silent for their app's
 * activity timeout, closes those that do not answer within the pong timeout (4201), closes those
 * of an app with requireUserAuthentication not signed in within its timeout (4009), and hands
 * consumers whose send buffer passed maxSocketBackpressureBytes to `onSlow` (4100, slow-consumers.ts).
 *
 * Why a sweep for backpressure: broadcasts go through uWS topics, so no JS code sees the
 * individual sends. uWS itself stops queuing for a socket at twice the limit (messages to it
 * are dropped from then on), so memory stays bounded between sweeps.
 */
import { CLOSE_CODES } from '../../errors.js';
import { describeError, log } from '../../log.js';
import { PING_FRAME } from '../frames.js';
import { endWithError, type SocketRegistry, type SocketState, type ClientSocket } from '../socket-registry.js';

export interface SweepOptions {
  intervalMs: number;
  pongTimeoutMs: number;
  maxBackpressureBytes: number;
  /** A live connection whose send buffer is over maxBackpressureBytes. */
  onSlow: (state: SocketState, ws: ClientSocket) => void;
  /** Runs at the end of every sweep (epoch ms). */
  onTick?: (now: number) => void;
}

export class Sweeper {
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly registry: SocketRegistry,
    private readonly opts: SweepOptions,
  ) {
    this.timer = setInterval(() => {
      try {
        this.sweep(Date.now());
      } catch (err) {
        log.error('websocket sweep failed', { error: describeError(err) });
      }
    }, opts.intervalMs);
    this.timer.unref();
  }

  sweep(now: number): void {
    const { pongTimeoutMs, maxBackpressureBytes } = this.opts;
    for (const state of this.registry.all()) {
      const ws = state.ws;
      if (state.closed || !ws) continue;
      if (ws.getBufferedAmount() > maxBackpressureBytes) {
        this.opts.onSlow(state, ws);
        continue;
      }
      const app = state.app;
      if (state.userId === null && app.requireUserAuthentication && now - state.openedMs >= app.userAuthenticationTimeoutMs) {
        endWithError(ws, CLOSE_CODES.UNAUTHORIZED, `Connection not signed in (pusher:signin) within ${app.userAuthenticationTimeoutMs} ms: this app requires user authentication`);
        continue;
      }
      if (state.pingSentMs !== 0) {
        if (now - state.pingSentMs >= pongTimeoutMs) endWithError(ws, CLOSE_CODES.PONG_NOT_RECEIVED, 'Pong reply not received');
      } else if (now - state.lastSeenMs >= state.app.activityTimeout * 1000) {
        state.pingSentMs = now;
        ws.send(PING_FRAME);
      }
    }
    this.opts.onTick?.(now);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
