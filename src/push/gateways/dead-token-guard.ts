/**
 * A circuit breaker on dead-token answers. A gateway's "this token is dead" deletes the device,
 * but the same answer comes back for every token when the client itself is pointed at the
 * wrong place: APNs answers 400 BadDeviceToken to a token of the other environment (sandbox
 * vs production), so a misconfigured endpoint would delete every iOS device on the first
 * publish. So a client trusts dead-token answers only once it has had at least one accepted
 * send since it started (which proves the endpoint and credentials right); until then they
 * count as `failed` and the device is kept (a later publish deletes it, once the client is
 * confirmed). After UNCONFIRMED_WARN_AFTER such answers and no success, one warning is logged.
 *
 * One guard per gateway client; for web push, one per push service origin (each is its own
 * service).
 */
import { log } from '../../log.js';
import type { GatewayOutcome } from './gateway.js';

/** Dead-token answers, before any accepted send, after which the guard logs its warning (once). */
export const UNCONFIRMED_WARN_AFTER = 20;

export class DeadTokenGuard {
  readonly #gateway: string;
  readonly #advice: string;
  #confirmed = false;
  #unconfirmedDead = 0;

  /**
   * `gateway` names the client in reasons and logs (e.g. `APNs https://api.push.apple.com`);
   * `advice` says what to check when every answer is a dead token.
   */
  constructor(gateway: string, advice: string) {
    this.#gateway = gateway;
    this.#advice = advice;
  }

  /** True once the client has had an accepted send: its dead-token answers are trusted. */
  get confirmed(): boolean {
    return this.#confirmed;
  }

  /** The outcome the caller acts on: a dead token becomes `failed` while the client is unconfirmed. */
  judge(outcome: GatewayOutcome): GatewayOutcome {
    if (outcome.kind === 'sent') {
      this.#confirmed = true;
      return outcome;
    }
    if (outcome.kind !== 'dead-token' || this.#confirmed) return outcome;
    this.#unconfirmedDead++;
    if (this.#unconfirmedDead === UNCONFIRMED_WARN_AFTER) {
      log.warn('gateway calls every token dead and has accepted none: devices are kept, not deleted', {
        gateway: this.#gateway,
        deadAnswers: this.#unconfirmedDead,
        advice: this.#advice,
      });
    }
    return {
      kind: 'failed',
      reason: `${outcome.reason} (device kept: ${this.#gateway} has accepted no send since it started, so this may mean a wrong endpoint or environment; ${this.#advice})`,
    };
  }
}
