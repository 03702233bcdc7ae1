/**
 * A local FCM HTTP v1 API plus Google's OAuth2 token endpoint for tests, on one TLS server
 * (src/sandbox/fcm-protocol.ts on the test certificate), recording what it received and issued
 * and answering scripted failures, dead and invalid tokens.
 */
import { FcmProtocol, type FcmReceived } from '../../src/sandbox/fcm-protocol.js';
import type { TokenAnswer } from '../../src/sandbox/exchange.js';
import { FakeGateway, type FakeRequest, type FakeResponse } from './fake-server.js';

export type { FcmReceived };

export interface FcmFakeOptions {
  projectId: string;
  clientEmail: string;
  /** SPKI PEM of the service-account key (test/fixtures/fcm-pub.pem). */
  publicKey: string;
  /** `expires_in` of issued access tokens, in seconds. Default 3600. */
  accessTokenTtlSeconds?: number;
  /** Clock in ms since the epoch; share the client's when it is faked. */
  now?: () => number;
}

/** Start with `await new FcmFake({...}).start()`; client `endpoint` = `fake.origin`, `tokenUri` = `fake.tokenUri`. */
export class FcmFake extends FakeGateway {
  /** Every messages:send request that passed authentication, in arrival order. */
  readonly received: FcmReceived[] = [];
  /** Registration tokens answered 400 INVALID_ARGUMENT "not a valid FCM registration token". */
  readonly invalidTokens = new Set<string>();
  /** Access tokens issued by the token endpoint (count = OAuth fetches). */
  readonly accessTokensIssued: string[] = [];
  /** Token-endpoint refusals and 401s, with the reason. */
  readonly rejected: { status: number; reason: string }[] = [];
  readonly #protocol: FcmProtocol;

  constructor(options: FcmFakeOptions) {
    super(true);
    this.#protocol = new FcmProtocol({ ...options, tokenUri: () => this.tokenUri, answers: (token) => this.#answer(token) });
  }

  /** The OAuth2 token URI to configure as `tokenUri`. */
  get tokenUri(): string {
    return `${this.origin}/token`;
  }

  /** Requests answered 200. */
  get delivered(): FcmReceived[] {
    return this.received.filter((entry) => entry.status === 200);
  }

  /** Makes every access token issued so far invalid, so the next send gets 401. */
  revokeAccessTokens(): void {
    this.#protocol.revokeAccessTokens();
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    const { response, received, rejected, accessToken } = await this.#protocol.handle(request);
    if (accessToken) this.accessTokensIssued.push(accessToken);
    if (received) this.received.push(received);
    if (rejected) this.rejected.push(rejected);
    return response;
  }

  #answer(token: string): TokenAnswer | undefined {
    return this.scriptedAnswer(token) ?? (this.invalidTokens.has(token) ? { kind: 'bad-token' } : undefined);
  }
}
