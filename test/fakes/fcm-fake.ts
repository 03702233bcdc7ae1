/**
 * A local FCM HTTP v1 API plus Google's OAuth2 token endpoint, on one TLS server (HTTP/2,
 * HTTP/1.1 allowed for the token endpoint). Verifies the RS256 service-account assertion,
 * issues random access tokens, and checks the bearer and message shape on messages:send.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { importSPKI, jwtVerify, type CryptoKey } from 'jose';
import { FakeGateway, type FakeRequest, type FakeResponse, type ScriptedFailure } from './fake-server.js';

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

/** One authenticated messages:send request, with the status the fake answered. */
export interface FcmReceived {
  token: string | undefined;
  status: number;
  /** The `message` object as sent. */
  message: Record<string, unknown>;
  accessToken: string;
}

/** Fields FCM v1 accepts in `message` and in `message.notification`; anything else is INVALID_ARGUMENT. */
const MESSAGE_FIELDS = new Set(['name', 'data', 'notification', 'android', 'webpush', 'apns', 'fcm_options', 'token', 'topic', 'condition']);
const NOTIFICATION_FIELDS = new Set(['title', 'body', 'image']);
const FCM_ERROR_TYPE = 'type.googleapis.com/google.firebase.fcm.v1.FcmError';
const SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

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
  readonly #options: FcmFakeOptions;
  readonly #validTokens = new Map<string, number>();
  #key: Promise<CryptoKey> | undefined;

  constructor(options: FcmFakeOptions) {
    super(true);
    this.#options = options;
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
    this.#validTokens.clear();
  }

  #now(): number {
    return (this.#options.now ?? Date.now)();
  }

  protected async handle(request: FakeRequest): Promise<FakeResponse> {
    if (request.method === 'POST' && request.path === '/token') return this.#token(request);
    const match = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(request.path);
    if (request.method === 'POST' && match) return this.#send(request, decodeURIComponent(match[1]!));
    return { status: 404, body: googleError(404, 'NOT_FOUND', 'Not found') };
  }

  async #token(request: FakeRequest): Promise<FakeResponse> {
    const form = new URLSearchParams(request.body.toString('utf8'));
    const refuse = (reason: string): FakeResponse => {
      this.rejected.push({ status: 400, reason });
      return { status: 400, body: { error: 'invalid_grant', error_description: reason } };
    };
    if (!String(request.headers['content-type'] ?? '').startsWith('application/x-www-form-urlencoded')) return refuse('bad content-type');
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return refuse('bad grant_type');
    const assertion = form.get('assertion');
    if (!assertion) return refuse('missing assertion');
    try {
      this.#key ??= importSPKI(this.#options.publicKey, 'RS256');
      const { payload } = await jwtVerify(assertion, await this.#key, {
        algorithms: ['RS256'],
        issuer: this.#options.clientEmail,
        audience: this.tokenUri,
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
    this.accessTokensIssued.push(accessToken);
    return { status: 200, body: { access_token: accessToken, expires_in: ttlSeconds, token_type: 'Bearer' } };
  }

  #send(request: FakeRequest, projectId: string): FakeResponse {
    const accessToken = /^Bearer (.+)$/.exec(String(request.headers['authorization'] ?? ''))?.[1];
    const expiresAt = accessToken === undefined ? undefined : this.#validTokens.get(accessToken);
    if (accessToken === undefined || expiresAt === undefined || expiresAt <= this.#now()) {
      this.rejected.push({ status: 401, reason: 'UNAUTHENTICATED' });
      return { status: 401, body: googleError(401, 'UNAUTHENTICATED', 'Request had invalid authentication credentials.') };
    }
    if (projectId !== this.#options.projectId) {
      return { status: 403, body: googleError(403, 'PERMISSION_DENIED', 'Permission denied on project', 'SENDER_ID_MISMATCH') };
    }
    let message: Record<string, unknown> = {};
    try {
      const parsed = JSON.parse(request.body.toString('utf8')) as { message?: Record<string, unknown> };
      message = parsed.message ?? {};
    } catch {
      // INVALID_ARGUMENT below
    }
    const token = typeof message['token'] === 'string' ? message['token'] : undefined;
    const entry: FcmReceived = { token, status: 200, message, accessToken };
    this.received.push(entry);
    const answer = (status: number, body: object, headers: Record<string, string> = {}): FakeResponse => {
      entry.status = status;
      return { status, body, headers };
    };

    const shapeProblem = validateMessage(message);
    if (shapeProblem) return answer(400, googleError(400, 'INVALID_ARGUMENT', shapeProblem, 'INVALID_ARGUMENT'));
    const failure = this.takeFailure(token!);
    if (failure) return answer(failure.status, scriptedBody(failure), FakeGateway.retryAfterHeader(failure));
    if (this.deadTokens.has(token!)) return answer(404, googleError(404, 'NOT_FOUND', 'Requested entity was not found.', 'UNREGISTERED'));
    if (this.invalidTokens.has(token!)) {
      return answer(400, googleError(400, 'INVALID_ARGUMENT', 'The registration token is not a valid FCM registration token', 'INVALID_ARGUMENT'));
    }
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

function scriptedBody(failure: ScriptedFailure): object {
  switch (failure.status) {
    case 429:
      return googleError(429, 'RESOURCE_EXHAUSTED', 'Quota exceeded', failure.reason ?? 'QUOTA_EXCEEDED');
    case 500:
      return googleError(500, 'INTERNAL', 'Internal error', failure.reason ?? 'INTERNAL');
    case 503:
      return googleError(503, 'UNAVAILABLE', 'The service is currently unavailable.', failure.reason ?? 'UNAVAILABLE');
    default:
      return googleError(failure.status, failure.reason ?? 'UNKNOWN', 'Scripted failure', failure.reason);
  }
}
