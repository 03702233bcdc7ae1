/**
 * The one error catalogue. Every error body Herald sends is built from a HeraldError:
 * channel API bodies are `{"error": <description>, "code": <code>}`, push API bodies are
 * `{"error": <kind>, "description": <description>}` (the shape the Beams SDKs parse).
 * docs/errors.md lists every code; a unit test keeps the two in step.
 */

interface CatalogueEntry {
  /** HTTP status. */
  readonly status: number;
  /** Short kind, the push APIs' `error` field. */
  readonly kind: string;
  /** Default human description; a thrown error may give a more precise one. */
  readonly message: string;
  /** Retry-After (whole seconds) the answer carries, for a failure a retry soon may get past. */
  readonly retryAfterSeconds?: number;
}

export const ERROR_CATALOGUE = {
  // Generic HTTP
  ROUTE_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'No such route' },
  METHOD_NOT_ALLOWED: { status: 405, kind: 'Method Not Allowed', message: 'Method not allowed on this route' },
  BODY_TOO_LARGE: { status: 413, kind: 'Payload Too Large', message: 'Request body too large' },
  INVALID_JSON: { status: 400, kind: 'Bad Request', message: 'Request body is not a readable JSON object' },
  INVALID_CONTENT_TYPE: { status: 400, kind: 'Bad Request', message: 'Content-Type must be application/json' },
  INVALID_UTF8: { status: 400, kind: 'Bad Request', message: 'Request body is not valid UTF-8' },
  INTERNAL: { status: 500, kind: 'Internal Server Error', message: 'Internal server error' },
  SHARD_UNAVAILABLE: { status: 500, kind: 'Internal Server Error', message: 'A storage shard failed to answer; retry the request' },
  STORAGE_FULL: { status: 507, kind: 'Insufficient Storage', message: 'The data dir\'s disk is full: writes are refused until space is freed; reads and deletes still work' },
  NOT_READY: { status: 503, kind: 'Service Unavailable', message: 'Server is shutting down; retry the request' },
  CLUSTER_UNAVAILABLE: { status: 503, kind: 'Service Unavailable', message: 'The cluster\'s Redis is not reachable from this node; retry the request' },
  MAIN_THREAD_TIMEOUT: {
    status: 503,
    kind: 'Service Unavailable',
    message: 'The main thread did not answer this request in time; retry the request',
    retryAfterSeconds: 1,
  },
  PUSH_STORE_UNAVAILABLE: {
    status: 503,
    kind: 'Service Unavailable',
    message: 'The cluster\'s PostgreSQL is not reachable from this node; retry the request',
    retryAfterSeconds: 2,
  },

  // HTTP fallback transports (xhr_streaming, xhr_polling)
  FALLBACK_SESSION_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'No such HTTP fallback session (expired or never opened): open a new one' },
  FALLBACK_BAD_PAYLOAD: { status: 400, kind: 'Bad Request', message: 'xhr_send body must be a JSON array of strings' },
  FALLBACK_TOO_MANY_MISSES: {
    status: 429,
    kind: 'Too Many Requests',
    message: 'Too many sends to unknown HTTP fallback sessions from this address; wait and retry',
  },

  // Channel API (C1-C6)
  AUTH_MISSING_PARAMS: { status: 401, kind: 'Unauthorized', message: 'Missing authentication parameters' },
  AUTH_UNKNOWN_KEY: { status: 401, kind: 'Unauthorized', message: 'No app has this auth_key (apps[].key)' },
  AUTH_APP_MISMATCH: { status: 401, kind: 'Unauthorized', message: 'auth_key does not belong to this app id' },
  AUTH_BAD_VERSION: { status: 401, kind: 'Unauthorized', message: 'auth_version must be 1.0' },
  AUTH_STALE_TIMESTAMP: { status: 401, kind: 'Unauthorized', message: 'auth_timestamp is more than 600 seconds from server time' },
  AUTH_BAD_BODY_MD5: { status: 401, kind: 'Unauthorized', message: 'body_md5 does not match the request body' },
  AUTH_BAD_SIGNATURE: { status: 401, kind: 'Unauthorized', message: 'Invalid signature' },
  APP_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'Unknown app id' },
  APP_DISABLED: { status: 403, kind: 'Forbidden', message: 'Application is disabled' },
  APP_OVER_QUOTA: { status: 403, kind: 'Forbidden', message: 'Application is over its daily message quota' },
  INVALID_PARAMETERS: { status: 400, kind: 'Bad Request', message: 'Invalid request parameters' },
  INVALID_CHANNEL_NAME: { status: 400, kind: 'Bad Request', message: 'Invalid channel name' },
  INVALID_SOCKET_ID: { status: 400, kind: 'Bad Request', message: 'Invalid socket_id' },
  EVENT_DATA_TOO_LARGE: { status: 413, kind: 'Payload Too Large', message: 'Event data larger than the limit' },
  HISTORY_NOT_ENABLED: { status: 404, kind: 'Not Found', message: 'This channel keeps no history: name it in the app\'s apps[].history.channels' },
  INFO_NOT_APPLICABLE: { status: 400, kind: 'Bad Request', message: 'Requested info attribute is not available for this channel' },
  NOT_PRESENCE_CHANNEL: { status: 400, kind: 'Bad Request', message: 'Channel is not a presence channel' },
  APP_RATE_LIMITED: { status: 429, kind: 'Too Many Requests', message: 'Application is over its maxHttpRequestsPerSecond' },
  APP_EVENT_RATE_LIMITED: { status: 429, kind: 'Too Many Requests', message: 'Application is over its maxEventsPerSecond' },
  CHANNEL_LISTING_BUSY: {
    status: 503,
    kind: 'Service Unavailable',
    message: 'Too many channel listings of this application are waiting on this node; retry in a second',
    retryAfterSeconds: 1,
  },

  // WebSocket protocol (docs/protocol.md). `kind` is the `type` of pusher:subscription_error;
  // other failures go out as pusher:error {code: null, message} and keep the connection open,
  // except WS_MESSAGE_TOO_LARGE, which the standard 1009 close follows.
  WS_INVALID_MESSAGE: { status: 400, kind: 'InvalidMessage', message: 'Message is not a JSON object with a string "event"' },
  WS_BINARY_MESSAGE: { status: 400, kind: 'InvalidMessage', message: 'Binary frames are not part of the protocol; send JSON text frames' },
  WS_MESSAGE_TOO_LARGE: { status: 413, kind: 'InvalidMessage', message: 'WebSocket message larger than the limit' },
  WS_UNKNOWN_EVENT: { status: 400, kind: 'InvalidMessage', message: 'Unknown event' },
  SUBSCRIPTION_INVALID_CHANNEL: { status: 400, kind: 'InvalidChannel', message: 'Invalid channel name' },
  SUBSCRIPTION_AUTH_FAILED: { status: 401, kind: 'AuthError', message: 'Invalid signature' },
  SUBSCRIPTION_BAD_CHANNEL_DATA: { status: 401, kind: 'AuthError', message: 'channel_data must be a JSON object with a user_id' },
  SUBSCRIPTION_TOO_MANY_CHANNELS: { status: 403, kind: 'LimitReached', message: 'Too many channels on one connection' },
  PRESENCE_MEMBER_LIMIT: { status: 403, kind: 'LimitReached', message: 'Presence channel is full' },
  PRESENCE_USER_INFO_TOO_LARGE: { status: 413, kind: 'LimitReached', message: 'user_info larger than the limit' },
  SUBSCRIPTION_FAILED: { status: 500, kind: 'ServerError', message: 'Subscription could not be recorded; retry' },
  CLIENT_EVENTS_DISABLED: { status: 403, kind: 'Forbidden', message: 'Client events are not enabled for this app (apps[].clientEvents)' },
  CLIENT_EVENT_REFUSED: { status: 403, kind: 'Forbidden', message: 'Client event refused' },
  SIGNIN_DISABLED: { status: 403, kind: 'Forbidden', message: 'User authentication is not enabled for this app (apps[].userAuthentication)' },
  SIGNIN_FAILED: { status: 401, kind: 'AuthError', message: 'Invalid user authentication' },

  // Push APIs (device, publish, reporting)
  INSTANCE_ID_MISSING: { status: 400, kind: 'Bad Request', message: 'Instance id missing from path' },
  INSTANCE_ID_INVALID: { status: 400, kind: 'Bad Request', message: 'Instance id is not valid' },
  INSTANCE_NOT_FOUND: { status: 404, kind: 'Instance not found', message: 'Could not find the instance' },
  INSTANCE_DISABLED: { status: 403, kind: 'Forbidden', message: 'The push instance is disabled' },
  DEVICE_NOT_FOUND: { status: 404, kind: 'Device not found', message: 'Could not find the device' },
  DEVICE_ID_MISSING: { status: 400, kind: 'Bad Request', message: 'Device id missing from path' },
  DEVICE_ID_INVALID: { status: 400, kind: 'Bad Request', message: 'Device id is not valid' },
  PLATFORM_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'Unknown device platform' },
  DEVICE_TOKEN_MISSING: { status: 400, kind: 'Bad Request', message: 'Device token missing' },
  DEVICE_TOKEN_INVALID: { status: 401, kind: 'Unauthorized', message: 'Incorrect device token' },
  BUNDLE_ID_MISSING: { status: 400, kind: 'Bad Request', message: 'Bundle identifier missing' },
  INVALID_METADATA: { status: 400, kind: 'Bad Request', message: 'Metadata fields must be strings' },
  INSTANCE_CREDENTIALS_INVALID: { status: 401, kind: 'Unauthorized', message: 'Incorrect instance credentials' },
  USER_TOKEN_MISSING: { status: 401, kind: 'Unauthorized', message: 'Authorization token missing' },
  USER_TOKEN_MALFORMED: { status: 401, kind: 'Unauthorized', message: 'Authorization token malformed' },
  USER_TOKEN_CLAIM_MISSING: { status: 400, kind: 'Bad Request', message: 'User token is missing a claim' },
  USER_TOKEN_SUB_INVALID: { status: 400, kind: 'Bad Request', message: 'User id (sub) must have 1 to 164 characters' },
  USER_TOKEN_ISSUER_INVALID: { status: 403, kind: 'Forbidden', message: 'Issuer of the user token is not valid' },
  USER_ALREADY_ASSOCIATED: { status: 400, kind: 'Bad Request', message: 'A user id is already associated with this device' },
  USER_DEVICE_LIMIT: { status: 422, kind: 'Unprocessable Entity', message: 'User already has the maximum of 100 devices' },
  INVALID_LIMIT: { status: 400, kind: 'Bad Request', message: 'limit must be an integer from 1 to 100' },
  INVALID_CURSOR: { status: 400, kind: 'Bad Request', message: 'cursor is not valid' },
  INVALID_INTEREST_NAME: { status: 400, kind: 'Bad Request', message: 'Interest name is not valid: at most 164 characters of A-Z a-z 0-9 _ - = @ , . ;' },
  INTEREST_NAME_MISSING: { status: 400, kind: 'Bad Request', message: 'Interest name missing from path' },
  TOO_MANY_INTERESTS: { status: 400, kind: 'Bad Request', message: 'More than 5000 interests in the set' },
  DEVICE_TOKEN_MALFORMED: { status: 400, kind: 'Bad Request', message: 'The device token is not in the format of the platform' },
  DEVICE_FIELD_INVALID: { status: 400, kind: 'Bad Request', message: 'A request body field has the wrong type' },
  DEVICE_BODY_TOO_LARGE: { status: 400, kind: 'Bad Request', message: 'Request body too large' },
  WEB_PUSH_NOT_CONFIGURED: { status: 404, kind: 'Not Found', message: 'Web push is not configured for this instance' },
  USER_ID_INVALID: { status: 400, kind: 'Bad Request', message: 'User id must have 1 to 164 characters' },
  SECRET_KEY_MISSING: { status: 400, kind: 'Bad Request', message: 'Authorization header missing' },
  SECRET_KEY_INVALID: { status: 401, kind: 'Unauthorized', message: 'Incorrect secret key' },
  PUBLISH_BODY_TOO_LARGE: { status: 400, kind: 'Bad Request', message: 'Request body too large' },
  PUBLISH_SCHEMA: { status: 422, kind: 'Unprocessable Entity', message: 'JSON does not match the publish schema' },
  PUBLISH_RATE_LIMITED: { status: 429, kind: 'Too Many Requests', message: 'Too many publish requests per second' },
  PUBLISH_BACKLOG_FULL: { status: 429, kind: 'Too Many Requests', message: 'The instance has too many publishes waiting to be sent (pushDelivery.maxPendingBytesPerInstance); retry in a second' },
  PUBLISH_OVER_QUOTA: { status: 402, kind: 'Payment Required', message: 'Publishing is blocked: over the notification quota' },
  PUBLISH_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'Could not find the publish' },
  REPORT_FIELD_MISSING: { status: 400, kind: 'Bad Request', message: 'A required report field is missing' },
  REPORT_FIELD_INVALID: { status: 400, kind: 'Bad Request', message: 'A report field has the wrong type' },
  REPORT_BODY_TOO_LARGE: { status: 400, kind: 'Bad Request', message: 'Report body too large' },

  // Admin API (docs/admin-api.md)
  ADMIN_UNAUTHORIZED: { status: 401, kind: 'Unauthorized', message: 'Admin token missing or wrong: send Authorization: Bearer <admin token>' },
  ADMIN_SIGNIN_RATE_LIMITED: { status: 429, kind: 'Too Many Requests', message: 'Too many failed admin sign-ins from this address; wait and retry' },
  ADMIN_NOT_FOUND: { status: 404, kind: 'Not Found', message: 'No such app or push instance' },
  ADMIN_CONFLICT: { status: 409, kind: 'Conflict', message: 'An app or push instance with this id or key exists, or it is defined in the config file' },
  ADMIN_INVALID_TENANT: { status: 422, kind: 'Unprocessable Entity', message: 'The app or push instance does not match the configuration schema' },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/** An expected failure, answered at the edge with its catalogue status and body. */
export class HeraldError extends Error {
  override readonly name = 'HeraldError';
  readonly code: ErrorCode;
  readonly status: number;
  readonly kind: string;
  /** Whole seconds after which a retry may succeed (a 429's Retry-After header), when known. */
  retryAfterSeconds?: number;

  constructor(code: ErrorCode, description?: string) {
    const entry: CatalogueEntry = ERROR_CATALOGUE[code];
    super(description ?? entry.message);
    this.code = code;
    this.status = entry.status;
    this.kind = entry.kind;
    if (entry.retryAfterSeconds !== undefined) this.retryAfterSeconds = entry.retryAfterSeconds;
  }
}

/** Body for the channel API (JSON with an explanation, as the pusher SDKs show it). */
export function channelErrorBody(err: HeraldError): string {
  return JSON.stringify({ error: err.message, code: err.code });
}

/** Body for the push APIs: `{"error", "description"}`, parsed by the Beams SDKs. */
export function pushErrorBody(err: HeraldError): string {
  return JSON.stringify({ error: err.kind, description: err.message });
}

/**
 * WebSocket error and close codes of the Pusher protocol. 4000-4099: fatal, do not
 * reconnect; 4100-4199: back off, then reconnect; 4200-4299: reconnect now; 4300-4399: other.
 * Only the codes Herald sends (not 4000, TLS is not required; not 4202, silence is 4201).
 * Two standard WebSocket codes (RFC 6455) are used as well: 1009 and 1011.
 */
export const CLOSE_CODES = {
  /** 4001: no app has this key. */
  UNKNOWN_APP: 4001,
  /** 4003: the app is disabled. */
  APP_DISABLED: 4003,
  /** 4004: the app is at its maxConnections. */
  OVER_CONNECTION_QUOTA: 4004,
  /** 4005: path is not /app/<key>. */
  PATH_NOT_FOUND: 4005,
  /** 4006: protocol version is not an integer. */
  INVALID_VERSION_FORMAT: 4006,
  /** 4007: protocol version other than 7. */
  UNSUPPORTED_PROTOCOL: 4007,
  /** 4008: no protocol parameter. */
  NO_PROTOCOL_VERSION: 4008,
  /** 4009: connection is unauthorised (a refused pusher:signin, or terminated by the server API). */
  UNAUTHORIZED: 4009,
  /** 4100: over capacity, or too slow a consumer. */
  OVER_CAPACITY: 4100,
  /** 4200: generic reconnect, e.g. server shutting down. */
  GENERIC_RECONNECT: 4200,
  /** 4201: pong not received. */
  PONG_NOT_RECEIVED: 4201,
  /** 4301: client event rate limit exceeded. */
  CLIENT_EVENT_RATE_LIMIT: 4301,
  /** 4301 as well: the app's maxNewConnectionsPerSecond (or per IP) refused a new connection. */
  CONNECTION_RATE_LIMIT: 4301,
  /** 1009 (RFC 6455): a frame larger than maxWebSocketFrameBytes. */
  MESSAGE_TOO_BIG: 1009,
  /** 1011 (RFC 6455): an internal error (a bug) while opening the connection. */
  INTERNAL_ERROR: 1011,
} as const;
