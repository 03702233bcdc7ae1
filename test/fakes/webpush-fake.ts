/**
 * A local web push service for tests (src/sandbox/web-push-protocol.ts on the test
 * certificate, HTTP/2 with HTTP/1.1 allowed), recording each decrypted push and answering
 * scripted failures and dead subscriptions. Subscriptions are made with createSubscription().
 */
import { WebPushProtocol, type BrowserSubscription, type SubscriptionKeys, type WebPushReceived } from '../../src/sandbox/web-push-protocol.js';
import { FakeGateway, type FakeRequest, type FakeResponse } from './fake-server.js';

export { decryptAes128gcm } from '../../src/sandbox/web-push-protocol.js';
export type { BrowserSubscription, SubscriptionKeys, WebPushReceived };

export interface WebPushFakeOptions {
  /** The VAPID public key (base64url) senders must use; any valid key is accepted when absent. */
  vapidPublicKey?: string;
}

/** Start with `await new WebPushFake({...}).start()`; make subscriptions with createSubscription(). */
export class WebPushFake extends FakeGateway {
  /** Every request that passed VAPID authentication, in arrival order. */
  readonly received: WebPushReceived[] = [];
  /** Refusals (unknown subscription, VAPID, encoding), with the reason. */
  readonly rejected: { status: number; reason: string }[] = [];
  readonly #protocol: WebPushProtocol;

  constructor(options: WebPushFakeOptions = {}) {
    super(true);
    this.#protocol = new WebPushProtocol({ ...options, origin: () => this.origin, answers: (subscription) => this.scriptedAnswer(subscription.token) });
  }

  /** Requests answered 201. */
  get delivered(): WebPushReceived[] {
    return this.received.filter((entry) => entry.status === 201);
  }

  /** Does what a browser does on pushManager.subscribe(): new P-256 key pair and auth secret, endpoint on this fake. */
  createSubscription(): BrowserSubscription {
    return this.#protocol.createSubscription();
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    const { response, received, rejected } = await this.#protocol.handle(request);
    if (received) this.received.push(received);
    if (rejected) this.rejected.push(rejected);
    return response;
  }
}
