/**
 * A client-wide pause asked for by a gateway: a 429 or 503 answered with Retry-After says "no
 * more requests from you until then", not "retry this one request later". Every attempt of
 * the client (for web push: of the one push service origin) waits for the pause first
 * (withRetries in retry.ts), so a 429 storm holds the sends in flight instead of burning
 * through the audience, marking each device failed in a few seconds.
 *
 * Time is the monotonic clock, not a client's injectable `now` (which tests freeze to test
 * token expiry): a pause must end after the real time it asked for.
 */
import { performance } from 'node:perf_hooks';

/** Why and until when (monotonic ms) a client is paused. */
export class GatewayPause {
  #untilMs = 0;
  #reason = '';
  #status: number | undefined;

  /** The gateway answered `status` (429 or 503) with Retry-After `retryAfterMs`; the later end of two pauses wins. */
  pauseFor(retryAfterMs: number, reason: string, status: number): void {
    const until = performance.now() + retryAfterMs;
    if (until <= this.#untilMs) return;
    this.#untilMs = until;
    this.#reason = reason;
    this.#status = status;
  }

  /** Milliseconds left (0 when not paused), with the answer that asked for the pause. */
  remaining(): { ms: number; reason: string; status: number | undefined } {
    const ms = Math.max(0, this.#untilMs - performance.now());
    return { ms, reason: this.#reason, status: this.#status };
  }
}
