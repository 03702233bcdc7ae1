/**
 * A local APNs provider API for tests (src/sandbox/apns-protocol.ts on the test certificate),
 * recording what it received and answering scripted failures and dead tokens.
 */
import { ApnsProtocol, type ApnsReceived } from '../../src/sandbox/apns-protocol.js';
import { FakeGateway, type FakeRequest, type FakeResponse } from './fake-server.js';

export type { ApnsReceived };

export interface ApnsFakeOptions {
  teamId: string;
  keyId: string;
  /** SPKI PEM of the provider key (test/fixtures/apns-pub.pem). */
  publicKey: string;
  /** Clock in ms since the epoch used to judge token age; share the client's when it is faked. */
  now?: () => number;
}

/** Start with `await new ApnsFake({...}).start()`, point the client's `endpoint` at `fake.origin`. */
export class ApnsFake extends FakeGateway {
  /** Every request that passed authentication, in arrival order. */
  readonly received: ApnsReceived[] = [];
  /** Distinct provider tokens seen (a client should reuse one for 20–60 minutes). */
  readonly providerTokens = new Set<string>();
  /** Requests refused for authentication or a missing topic, with the reason given. */
  readonly rejected: { status: number; reason: string }[] = [];
  readonly #protocol: ApnsProtocol;

  constructor(options: ApnsFakeOptions) {
    super(false);
    this.#protocol = new ApnsProtocol({ ...options, answers: (token) => this.scriptedAnswer(token) });
  }

  /** Requests answered 200. */
  get delivered(): ApnsReceived[] {
    return this.received.filter((entry) => entry.status === 200);
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    const { response, received, rejected } = await this.#protocol.handle(request);
    if (received) {
      this.providerTokens.add(received.providerToken);
      this.received.push(received);
    }
    if (rejected) this.rejected.push(rejected);
    return response;
  }
}
