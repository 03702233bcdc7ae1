/**
 * A local APNs provider API: HTTP/2 over TLS, `POST /3/device/<token>`, token-based auth
 * (ES256 JWT verified against the configured public key), APNs-shaped error bodies.
 */
import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, importSPKI, jwtVerify, type CryptoKey } from 'jose';
import { FakeGateway, type FakeRequest, type FakeResponse } from './fake-server.js';

export interface ApnsFakeOptions {
  teamId: string;
  keyId: string;
  /** SPKI PEM of the provider key (test/fixtures/apns-pub.pem). */
  publicKey: string;
  /** Clock in ms since the epoch used to judge token age; share the client's when it is faked. */
  now?: () => number;
}

/** One authenticated request as it arrived, with the status the fake answered. */
export interface ApnsReceived {
  token: string;
  status: number;
  topic: string | undefined;
  pushType: string | undefined;
  priority: string | undefined;
  expiration: string | undefined;
  collapseId: string | undefined;
  /** The raw provider token (JWT) used. */
  providerToken: string;
  payload: unknown;
}

const DEFAULT_REASONS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

/** Start with `await new ApnsFake({...}).start()`, point the client's `endpoint` at `fake.origin`. */
export class ApnsFake extends FakeGateway {
  /** Every request that passed authentication, in arrival order. */
  readonly received: ApnsReceived[] = [];
  /** Distinct provider tokens seen (a client should reuse one for 20–60 minutes). */
  readonly providerTokens = new Set<string>();
  /** Requests refused for authentication or a missing topic, with the reason given. */
  readonly rejected: { status: number; reason: string }[] = [];
  readonly #options: ApnsFakeOptions;
  #key: Promise<CryptoKey> | undefined;

  constructor(options: ApnsFakeOptions) {
    super(false);
    this.#options = options;
  }

  /** Requests answered 200. */
  get delivered(): ApnsReceived[] {
    return this.received.filter((entry) => entry.status === 200);
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    const match = /^\/3\/device\/([^/?]+)$/.exec(request.path);
    if (request.method !== 'POST') return this.#error(405, 'MethodNotAllowed');
    if (!match) return this.#error(404, 'BadPath');
    const token = decodeURIComponent(match[1]!);

    const auth = String(request.headers['authorization'] ?? '');
    const jwt = /^bearer (.+)$/i.exec(auth)?.[1];
    if (!jwt) return this.#reject(403, 'MissingProviderToken');
    const authProblem = await this.#verifyProviderToken(jwt);
    if (authProblem) return this.#reject(403, authProblem);
    const topic = header(request, 'apns-topic');
    if (!topic) return this.#reject(400, 'MissingTopic');

    let payload: unknown;
    try {
      payload = JSON.parse(request.body.toString('utf8'));
    } catch {
      payload = undefined;
    }
    const entry: ApnsReceived = {
      token,
      status: 200,
      topic,
      pushType: header(request, 'apns-push-type'),
      priority: header(request, 'apns-priority'),
      expiration: header(request, 'apns-expiration'),
      collapseId: header(request, 'apns-collapse-id'),
      providerToken: jwt,
      payload,
    };
    this.providerTokens.add(jwt);
    this.received.push(entry);

    const answer = (status: number, reason: string, extraHeaders: Record<string, string> = {}): FakeResponse => {
      entry.status = status;
      return this.#error(status, reason, extraHeaders);
    };
    if (payload === undefined || payload === null || typeof payload !== 'object') return answer(400, 'PayloadEmpty');
    const failure = this.takeFailure(token);
    if (failure) {
      return answer(failure.status, failure.reason ?? DEFAULT_REASONS[failure.status] ?? 'Error', FakeGateway.retryAfterHeader(failure));
    }
    if (this.deadTokens.has(token)) return answer(410, 'Unregistered');
    if (!/^[0-9a-fA-F]+$/.test(token)) return answer(400, 'BadDeviceToken');
    return { status: 200, headers: { 'apns-id': randomUUID() } };
  }

  /** Undefined when the JWT is good; else the APNs reason for refusing it. */
  async #verifyProviderToken(jwt: string): Promise<string | undefined> {
    try {
      const { kid, alg } = decodeProtectedHeader(jwt);
      if (alg !== 'ES256' || kid !== this.#options.keyId) return 'InvalidProviderToken';
      this.#key ??= importSPKI(this.#options.publicKey, 'ES256');
      const now = this.#options.now ?? Date.now;
      await jwtVerify(jwt, await this.#key, {
        algorithms: ['ES256'],
        issuer: this.#options.teamId,
        requiredClaims: ['iat'],
        maxTokenAge: '1h',
        currentDate: new Date(now()),
      });
      return undefined;
    } catch (error) {
      return (error as { code?: unknown }).code === 'ERR_JWT_EXPIRED' ? 'ExpiredProviderToken' : 'InvalidProviderToken';
    }
  }

  #reject(status: number, reason: string): FakeResponse {
    this.rejected.push({ status, reason });
    return this.#error(status, reason);
  }

  #error(status: number, reason: string, headers: Record<string, string> = {}): FakeResponse {
    const body: Record<string, unknown> = { reason };
    if (status === 410) body['timestamp'] = Date.now();
    return { status, headers: { 'apns-id': randomUUID(), ...headers }, body };
  }
}

function header(request: FakeRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
