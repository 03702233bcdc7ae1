/**
 * One timer for every connection (not one per socket): pings clients silent for their app's
 * activity timeout, closes those that do not answer within the pong timeout (4201), and
 * closes consumers whose send buffer passed maxSocketBackpressureBytes (4100).
 *
 * Why a sweep for backpressure: broadcasts go through uWS topics, so no JS code sees the
 * individual sends. uWS itself stops queuing for a socket at twice the limit (messages to it
 * are dropped from then on), so memory stays bounded between sweeps, and the sweep has that
 * headroom to queue the 4100 close frame behind the backlog before closing.
 */
import { CLOSE_CODES } from '../../errors.js';
import { log } from '../../log.js';
import { PING_FRAME } from './frames.js';
import { endWithError, type SocketRegistry } from './registry.js';

export interface SweepOptions {
  intervalMs: number;
  pongTimeoutMs: number;
  maxBackpressureBytes: number;
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
        log.error('websocket sweep failed', { error: String((err as Error)?.stack ?? err) });
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
        // Queued behind the backlog: uWS holds up to twice the limit (see above).
        endWithError(ws, CLOSE_CODES.OVER_CAPACITY, 'Too slow a consumer: send buffer over the limit');
        continue;
      }
      if (state.pingSentMs !== 0) {
        if (now - state.pingSentMs >= pongTimeoutMs) endWithError(ws, CLOSE_CODES.PONG_NOT_RECEIVED, 'Pong reply not received');
      } else if (now - state.lastSeenMs >= state.app.activityTimeout * 1000) {
        state.pingSentMs = now;
        ws.send(PING_FRAME);
      }
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
