/**
 * FCM's HTTP v1 API and Google's OAuth2 token endpoint as a local server speaks them: `POST
 * /token` verifies the RS256 service-account assertion and issues random access tokens;
 * `POST /v1/projects/<id>/messages:send` checks the bearer, the project and the message's
 * shape, and answers in Google's error format (FcmError details).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { importSPKI, jwtVerify, type CryptoKey } from 'jose';
import { retryAfterHeader, type Exchange, type TokenAnswer, type TokenAnswers } from './exchange.js';
import type { GatewayRequest, GatewayResponse } from './gateway-server.js';

export interface FcmProtocolOptions {
  projectId: string;
  clientEmail: string;
  /** SPKI PEM of the service-account key. */
  publicKey: string;
  /** The token endpoint's own URI: the audience an assertion must name. */
  tokenUri: () => string;
  /** Answers other than acceptance, per registration token. */
  answers: TokenAnswers;
  /** `expires_in` of issued access tokens, in seconds. Default 3600. */
  accessTokenTtlSeconds?: number;
  /** Clock in ms since the epoch. Default Date.now. */
  now?: () => number;
}

/** One authenticated messages:send request, with the status answered. */
export interface FcmReceived {
  token: string | undefined;
  status: number;
  /** The `message` object as sent. */
  message: Record<string, unknown>;
  accessToken: string;
}

/** An FCM exchange; `accessToken` is set when the token endpoint issued one. */
export type FcmExchange = Exchange<FcmReceived> & { accessToken?: string };

/** Fields FCM v1 accepts in `message` and in `message.notification`; anything else is INVALID_ARGUMENT. */
const MESSAGE_FIELDS = new Set(['name', 'data', 'notification', 'android', 'webpush', 'apns', 'fcm_options', 'token', 'topic', 'condition']);
const NOTIFICATION_FIELDS = new Set(['title', 'body', 'image']);
const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

export class FcmProtocol {
  readonly #options: FcmProtocolOptions;
  /** Access tokens issued and not revoked, with their expiry (ms since the epoch). */
  readonly #validTokens = new Map<string, number>();
  #key: Promise<CryptoKey> | undefined;

  constructor(options: FcmProtocolOptions) {
    this.#options = options;
  }

  /** Makes every access token issued so far invalid, so the next send gets 401. */
  revokeAccessTokens(): void {
    this.#validTokens.clear();
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  async handle(request: GatewayRequest): Promise<FcmExchange> {
    if (request.method === 'POST' && request.path === '/token') return this.#token(request);
    const match = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(request.path);
    if (request.method === 'POST' && match) return this.#send(request, decodeURIComponent(match[1]!));
    return { response: { status: 404, body: googleError(404, 'NOT_FOUND', 'Not found') } };
  }

  async #token(request: GatewayRequest): Promise<FcmExchange> {
    const form = new URLSearchParams(request.body.toString('utf8'));
    const refuse = (reason: string): FcmExchange => ({
      response: { status: 400, body: { error: 'invalid_grant', error_description: reason } },
      rejected: { status: 400, reason },
    });
    if (!String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return refuse('bad content-type');
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return refuse('bad grant_type');
    const assertion = form.get('assertion');
    if (!assertion) return refuse('missing assertion');
    try {
      this.#key ??= importSPKI(this.#options.publicKey, 'RS256');
      const { payload } = await jwtVerify(assertion, await this.#key, {
        algorithms: ['RS256'],
        issuer: this.#options.clientEmail,
        audience: this.#options.tokenUri(),
        requiredClaims: ['iat', 'exp'],
        currentDate: new Date(this.#now()),
      });
      if (payload.scope !== SCOPE) return refuse(`bad scope ${String(payload.scope)}`);
      if (payload.exp! - payload.iat! > 3600) return refuse('assertion lifetime over 1 h');
    } catch (error) {
      return refuse(`invalid assertion: ${error instanceof Error ? error.message : String(error)}`);
    }
    const ttlSeconds = this.#options.accessTokenTtlSeconds ?? 3600;
    const accessToken = `ya29.fake-${randomBytes(16).toString('hex')}`;
    this.#validTokens.set(accessToken, this.#now() + ttlSeconds * 1000);
    return { response: { status: 200, body: { access_token: accessToken, expires_in: ttlSeconds, token_type: 'Bearer' } }, accessToken };
  }

  #send(request: GatewayRequest, projectId: string): FcmExchange {
    const accessToken = /^Bearer (.+)$/.exec(String(request.headers['authorization'] ?? ''))?.[1];
    const expiresAt = accessToken === undefined ? undefined : this.#validTokens.get(accessToken);
    if (accessToken === undefined || expiresAt === undefined || expiresAt <= this.#now()) {
      return {
        response: { status: 401, body: googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.') },
        rejected: { status: 401, reason: 'UNAUTHENTICATED' },
      };
    }
    if (projectId !== this.#options.projectId) {
      return { response: { status: 403, body: googleError(403, 'PERMISSION_DENIED', 'Permission denied on project', 'SENDER_ID_MISMATCH') } };
    }
    let message: Record<string, unknown> = {};
    try {
      const parsed = JSON.parse(request.body.toString('utf8')) as { message?: Record<string, unknown> };
      message = parsed.message ?? {};
    } catch {
      // INVALID_ARGUMENT below
    }
    const token = typeof message['token'] === 'string' ? message['token'] : undefined;
    const response = this.#answer(message, projectId);
    return { response, received: { token, status: response.status, message, accessToken } };
  }

  #answer(message: Record<string, unknown>, projectId: string): GatewayResponse {
    const shapeProblem = validateMessage(message);
    if (shapeProblem) return { status: 400, body: googleError(400, 'INVALID_ARGUMENT', shapeProblem, 'INVALID_ARGUMENT') };
    const answer = this.#options.answers(message['token'] as string);
    if (answer) return { status: answerStatus(answer), body: answerBody(answer), headers: retryAfterHeader(answer) };
    return { status: 200, body: { name: `projects/${projectId}/messages/${randomUUID()}` } };
  }
}

/** What FCM v1 would refuse about a message's shape, or undefined. */
function validateMessage(message: Record<string, unknown>): string | undefined {
  if (typeof message['token'] !== 'string' || message['token'] === '') return 'message.token is required';
  for (const key of Object.keys(message)) {
    if (!MESSAGE_FIELDS.has(key)) return `Invalid JSON payload received. Unknown name "${key}" at 'message'`;
  }
  const notification = message['notification'];
  if (notification !== undefined) {
    if (notification === null || typeof notification !== 'object') return 'message.notification must be an object';
    for (const key of Object.keys(notification)) {
      if (!NOTIFICATION_FIELDS.has(key)) return `Invalid JSON payload received. Unknown name "${key}" at 'message.notification'`;
    }
  }
  const data = message['data'];
  if (data !== undefined) {
    if (data === null || typeof data !== 'object') return 'message.data must be a map';
    for (const [key, value] of Object.entries(data)) {
      if (typeof value !== 'string') return `Invalid value at 'message.data[${key}].value' (TYPE_STRING)`;
    }
  }
  return undefined;
}

/** Google-style error body; `errorCode` becomes an FcmError detail. */
function googleError(code: number, status: string, message: string, errorCode?: string): object {
  return {
    error: {
      code,
      message,
      status,
      ...(errorCode ? { details: [{ '@type': FCM_ERROR_TYPE, errorCode }] } : {}),
    },
  };
}

function answerStatus(answer: TokenAnswer): number {
  switch (answer.kind) {
    case 'unregistered':
      return 404;
    case 'bad-token':
      return 400;
    case 'status':
      return answer.status;
  }
}

function answerBody(answer: TokenAnswer): object {
  if (answer.kind === 'unregistered') return googleError(404, 'NOT_FOUND', 'Requested entity was not found.', 'UNREGISTERED');
  if (answer.kind === 'bad-token') return googleError(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', 'INVALID_ARGUMENT');
  switch (answer.status) {
    case 429:
      return googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded', answer.reason ?? 'QUOTA_EXCEEDED');
    case 500:
      return googleError(500, 'INTERNAL', 'Internal error', answer.reason ?? 'INTERNAL');
    case 503:
      return googleError(503, 'UNAVAILABLE', 'The service is currently unavailable.', answer.reason ?? 'UNAVAILABLE');
    default:
      return googleError(answer.status, answer.reason ?? 'UNKNOWN', 'Scripted failure', answer.reason);
  }
}
