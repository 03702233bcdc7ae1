/**
 * The APNs provider API as a local server speaks it: `POST /3/device/<token>` over HTTP/2,
 * token-based authentication (an ES256 JWT verified against the provider key's public half),
 * an `apns-topic` required, APNs-shaped error bodies (`{"reason": …}`, with `timestamp` on 410).
 */
import { randomUUID } from 'node:crypto';
import { decodeProtectedHeader, importSPKI, jwtVerify, type CryptoKey } from 'jose';
import { retryAfterHeader, singleHeader, type Exchange, type TokenAnswer, type TokenAnswers } from './exchange.js';
import type { GatewayRequest, GatewayResponse } from './gateway-server.js';

export interface ApnsProtocolOptions {
  teamId: string;
  keyId: string;
  /** SPKI PEM of the provider (.p8) key. */
  publicKey: string;
  /** Answers other than acceptance, per device token. */
  answers: TokenAnswers;
  /** Clock in ms since the epoch used to judge provider-token age. Default Date.now. */
  now?: () => number;
}

/** One authenticated request as it arrived, with the status answered. */
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

/** APNs' reason for a status, when an answer names none. */
const DEFAULT_REASONS: Record<number, string> = {
  400: 'BadRequest',
  403: 'Forbidden',
  429: 'TooManyRequests',
  500: 'InternalServerError',
  503: 'ServiceUnavailable',
};

export class ApnsProtocol {
  readonly #options: ApnsProtocolOptions;
  #key: Promise<CryptoKey> | undefined;

  constructor(options: ApnsProtocolOptions) {
    this.#options = options;
  }

  async handle(request: GatewayRequest): Promise<Exchange<ApnsReceived>> {
    const match = /^\/3\/device\/([^/?]+)$/.exec(request.path);
    if (request.method !== 'POST') return { response: apnsError(405, 'MethodNotAllowed') };
    if (!match) return { response: apnsError(404, 'BadPath') };
    const token = decodeURIComponent(match[1]!);

    const jwt = /^bearer (.+)$/i.exec(String(request.headers['authorization'] ?? ''))?.[1];
    if (!jwt) return reject(403, 'MissingProviderToken');
    const authProblem = await this.#verifyProviderToken(jwt);
    if (authProblem) return reject(403, authProblem);
    const topic = singleHeader(request.headers['apns-topic']);
    if (!topic) return reject(400, 'MissingTopic');

    let payload: unknown;
    try {
      payload = JSON.parse(request.body.toString('utf8'));
    } catch {
      payload = undefined;
    }
    const received: ApnsReceived = {
      token,
      status: 200,
      topic,
      pushType: singleHeader(request.headers['apns-push-type']),
      priority: singleHeader(request.headers['apns-priority']),
      expiration: singleHeader(request.headers['apns-expiration']),
      collapseId: singleHeader(request.headers['apns-collapse-id']),
      providerToken: jwt,
      payload,
    };
    const response = this.#answer(token, payload);
    received.status = response.status;
    return { response, received };
  }

  #answer(token: string, payload: unknown): GatewayResponse {
    if (payload === undefined || payload === null || typeof payload !== 'object') return apnsError(400, 'PayloadEmpty');
    const answer = this.#options.answers(token);
    if (answer) return answerResponse(answer);
    if (!/^[0-9a-fA-F]+$/.test(token)) return apnsError(400, 'BadDeviceToken');
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
}

function answerResponse(answer: TokenAnswer): GatewayResponse {
  switch (answer.kind) {
    case 'unregistered':
      return apnsError(410, 'Unregistered');
    case 'bad-token':
      return apnsError(400, 'BadDeviceToken');
    case 'status':
      return apnsError(answer.status, answer.reason ?? DEFAULT_REASONS[answer.status] ?? 'Error', retryAfterHeader(answer));
  }
}

function reject(status: number, reason: string): Exchange<ApnsReceived> {
  return { response: apnsError(status, reason), rejected: { status, reason } };
}

function apnsError(status: number, reason: string, headers: Record<string, string> = {}): GatewayResponse {
  const body: Record<string, unknown> = { reason };
  if (status === 410) body['timestamp'] = Date.now();
  return { status, headers: { 'apns-id': randomUUID(), ...headers }, body };
}
