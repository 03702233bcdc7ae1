/**
 * The one configuration schema. Parsed once at start-up (see load.ts), frozen, and
 * failing fast with the path of the first bad field. Field names are a public contract:
 * users' config files and the tests rely on them (docs/configuration.md documents each).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { jsonSyntaxReason } from '../json.js';
import { LOG_LEVELS } from '../log.js';
import { isAddressOrRange } from '../net/outbound-guard.js';

/** Characters allowed in channel names, interest names and webhook filters. */
const NAME_CHARS = /^[A-Za-z0-9_\-=@,.;]+$/;

/** C0 and C1 control characters and DEL: never part of an id, a key or a name. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL_CHAR = /[\u0000-\u001f\u007f-\u009f]/;

/** Whether `value` holds a control character (see CONTROL_CHAR). */
export function hasControlCharacter(value: string): boolean {
  return CONTROL_CHAR.test(value);
}

/**
 * An id, key or name: 1 to `max` characters, no control character. They go into HTTP headers
 * (`X-Pusher-Key` of webhooks), URL paths and JWT claims, where a CR or LF breaks the request.
 */
function identifier(max: number) {
  return z
    .string()
    .min(1)
    .max(max)
    .refine((v) => !hasControlCharacter(v), 'must not contain control characters (CR, LF, NUL, tab, ...)');
}

export const CHANNEL_WEBHOOK_EVENTS = [
  'channel_occupied',
  'channel_vacated',
  'member_added',
  'member_removed',
  'client_event',
  'cache_miss',
  'subscription_count',
] as const;
export type ChannelWebhookEvent = (typeof CHANNEL_WEBHOOK_EVENTS)[number];

const channelWebhookSchema = z.strictObject({
  url: z.url(),
  events: z.array(z.enum(CHANNEL_WEBHOOK_EVENTS)).min(1).default([...CHANNEL_WEBHOOK_EVENTS]),
  /** Only channels whose name starts with this prefix produce events for this receiver. */
  filter: z.strictObject({ channelNamePrefix: z.string().regex(NAME_CHARS).optional() }).optional(),
});

/**
 * A glob naming channels: `*` stands for any run of characters (none included); every other
 * character is itself. At least one character that is not `*`, and only channel-name characters.
 */
const channelPattern = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[A-Za-z0-9_\-=@,.;*#]+$/, 'must be a channel name pattern: channel-name characters and * (any run of characters)')
  .refine((p) => /[^*]/.test(p), 'must name more than * alone: list prefixes such as history-*');

/**
 * Channel history (`apps[].history`): the channels whose events are kept, each with a serial,
 * for the history API and the recovery of a re-subscribing client. Null: no history.
 */
const historySchema = z.strictObject({
  /** Glob patterns (`*`: any run of characters) naming the channels whose events are kept. */
  channels: z.array(channelPattern).min(1).max(100),
  /** Events kept per channel (the newest). */
  maxEvents: z.number().int().min(1).max(10_000).default(100),
  /** Seconds an event is kept. */
  ttlSeconds: z.number().int().min(1).max(7 * 24 * 3600).default(300),
});

/** One channel app (`apps[]`); also the admin API's validation of an app (src/tenants). */
export const appSchema = z.strictObject({
  id: identifier(200),
  key: identifier(200),
  secret: z.string().min(1),
  enabled: z.boolean().default(true),
  clientEvents: z.boolean().default(false),
  userAuthentication: z.boolean().default(false),
  subscriptionCount: z.boolean().default(false),
  /** Concurrent WebSocket connections allowed for the app; null = unlimited. */
  maxConnections: z.number().int().positive().nullable().default(null),
  /** Messages per UTC day (a request with `info` counts two); null = unlimited. */
  messageQuota: z.number().int().positive().nullable().default(null),
  /** Seconds of silence before the server pings a client (sent in connection_established). */
  activityTimeout: z.number().int().min(5).max(600).default(120),
  /** Presence members per channel. */
  maxPresenceMembers: z.number().int().positive().default(100),
  /** Bytes of JSON-encoded user_info per presence member. */
  maxPresenceUserInfoBytes: z.number().int().positive().default(1024),
  /** Client events per second per connection before 4301. */
  maxClientEventsPerSecond: z.number().int().positive().default(10),
  /** Bytes of `data` per event (HTTP trigger and client events). */
  maxEventDataBytes: z.number().int().positive().default(10 * 1024),
  /** Events per batch trigger (C2). */
  maxBatchSize: z.number().int().positive().default(10),
  /** Seconds a cache channel keeps its last event. */
  cacheTtlSeconds: z.number().int().positive().default(30 * 60),
  /**
   * Bytes of cached last events the app keeps (channel name + event name + data, UTF-8), shared
   * evenly by the shards; beyond it the oldest written are evicted first.
   */
  maxCacheBytes: z.number().int().positive().default(64 * 1024 * 1024),
  /** Channel history (channels, maxEvents, ttlSeconds); null: no channel keeps its events. */
  history: historySchema.nullable().default(null),
  /**
   * Bytes of kept history events the app keeps (channel name + event name + data, UTF-8),
   * shared evenly by the shards; beyond it the oldest kept are evicted first.
   */
  maxHistoryBytes: z.number().int().positive().default(64 * 1024 * 1024),
  /** Channel API requests (C1-C6) per second, all nodes together, before 429; null = unlimited. */
  maxHttpRequestsPerSecond: z.number().int().positive().nullable().default(null),
  /** Events triggered per second through C1/C2 (a batch counts its events), before 429; null = unlimited. */
  maxEventsPerSecond: z.number().int().positive().nullable().default(null),
  /** New WebSocket connections per second for the app, before close 4301; null = unlimited. */
  maxNewConnectionsPerSecond: z.number().int().positive().nullable().default(null),
  /** New WebSocket connections per second for the app from one client IP, before close 4301; null = unlimited. */
  maxNewConnectionsPerSecondPerIp: z.number().int().positive().nullable().default(null),
  /**
   * Connections must sign in (`pusher:signin`) within userAuthenticationTimeoutMs or are closed
   * with 4009. Implies `userAuthentication` (sign-in is accepted).
   */
  requireUserAuthentication: z.boolean().default(false),
  /** Milliseconds a connection has to sign in when requireUserAuthentication is on. */
  userAuthenticationTimeoutMs: z.number().int().min(100).max(3_600_000).default(30_000),
  webhooks: z.array(channelWebhookSchema).default([]),
});

const caFile = z.string().min(1).nullable().default(null);

const apnsSchema = z
  .strictObject({
    endpoint: z.url().default('https://api.push.apple.com'),
    teamId: identifier(200),
    keyId: identifier(200),
    /** The token signing key as PEM text (the content of Apple's `AuthKey_<keyId>.p8`); or privateKeyFile. */
    privateKey: z.string().min(1).optional(),
    /** Path of the `.p8` file, read at start-up and on each reload; instead of privateKey. */
    privateKeyFile: z.string().min(1).optional(),
    caFile,
  })
  .transform((apns, ctx) => ({ ...apns, privateKey: keyText(apns.privateKey, apns.privateKeyFile, 'the .p8 file', ctx) }));

const fcmSchema = z
  .strictObject({
    endpoint: z.url().default('https://fcm.googleapis.com'),
    tokenUri: z.url().default('https://oauth2.googleapis.com/token'),
    /**
     * Path of the service-account JSON key file (Firebase console, Project settings, Service
     * accounts, Generate new private key), read at start-up and on each reload: gives projectId,
     * clientEmail and privateKey; a field also set here wins over the file's.
     */
    serviceAccountFile: z.string().min(1).optional(),
    /**
     * The service-account JSON key itself (the file's content, as an object or as its text):
     * gives projectId, clientEmail and privateKey as serviceAccountFile does. Not kept as such:
     * the running config holds the three fields.
     */
    serviceAccount: z.union([z.string().min(1), z.record(z.string(), z.unknown())]).optional(),
    projectId: identifier(200).optional(),
    clientEmail: identifier(200).optional(),
    /** The service account's RSA key as PEM text (`private_key` of the JSON file). */
    privateKey: z.string().min(1).optional(),
    caFile,
  })
  .transform(({ serviceAccount: given, ...fcm }, ctx) => {
    if (given !== undefined && fcm.serviceAccountFile !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['serviceAccount'], message: 'set serviceAccount (the JSON key) or serviceAccountFile (a path), not both' });
    }
    const account =
      fcm.serviceAccountFile !== undefined
        ? serviceAccountFromFile(fcm.serviceAccountFile, ctx)
        : given !== undefined
          ? serviceAccountFields(given, 'serviceAccount', 'is not a service-account key', ctx)
          : {};
    const field = (name: 'projectId' | 'clientEmail' | 'privateKey', jsonName: string): string => {
      const value = fcm[name] ?? account[jsonName];
      if (value === undefined) {
        ctx.addIssue({ code: 'custom', path: [name], message: `required: set ${name}, or serviceAccount (the JSON key), or serviceAccountFile (its path)` });
        return '';
      }
      if (name !== 'privateKey' && hasControlCharacter(value)) {
        ctx.addIssue({ code: 'custom', path: [fcm[name] === undefined ? (given === undefined ? 'serviceAccountFile' : 'serviceAccount') : name], message: `${jsonName} must not contain control characters` });
      }
      return value;
    };
    return { ...fcm, projectId: field('projectId', 'project_id'), clientEmail: field('clientEmail', 'client_email'), privateKey: field('privateKey', 'private_key') };
  });

/** The PEM text of a key given inline (`privateKey`) or as a file (`privateKeyFile`); exactly one. */
function keyText(inline: string | undefined, file: string | undefined, what: string, ctx: z.RefinementCtx): string {
  if (inline !== undefined && file !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['privateKeyFile'], message: 'set privateKey (PEM text) or privateKeyFile (a path), not both' });
    return '';
  }
  if (file !== undefined) {
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: ['privateKeyFile'], message: `cannot read ${file}: ${(err as Error).message}` });
      return '';
    }
  }
  if (inline === undefined) {
    ctx.addIssue({ code: 'custom', path: ['privateKey'], message: `required: privateKey (PEM text) or privateKeyFile (the path of ${what})` });
    return '';
  }
  return inline;
}

/** The string fields of a service-account JSON file (`project_id`, `client_email`, `private_key`). */
function serviceAccountFromFile(file: string, ctx: z.RefinementCtx): Record<string, string | undefined> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    ctx.addIssue({ code: 'custom', path: ['serviceAccountFile'], message: `cannot read ${file}: ${(err as Error).message}` });
    return {};
  }
  return serviceAccountFields(text, 'serviceAccountFile', `${file} is not a service-account key file`, ctx);
}

/**
 * The string fields of a service-account JSON key (its text or the parsed object). What a
 * failure says names the fields only: the text holds a private key, so none of it is quoted.
 */
function serviceAccountFields(json: string | Record<string, unknown>, field: string, notAKey: string, ctx: z.RefinementCtx): Record<string, string | undefined> {
  let parsed: unknown = json;
  if (typeof json === 'string') {
    try {
      parsed = JSON.parse(json);
    } catch (err) {
      ctx.addIssue({ code: 'custom', path: [field], message: `${notAKey}: not valid JSON (${jsonSyntaxReason(err, json)})` });
      return {};
    }
  }
  const account = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  const missing = ['project_id', 'client_email', 'private_key'].filter((k) => typeof account[k] !== 'string' || account[k] === '');
  if (missing.length > 0) {
    ctx.addIssue({ code: 'custom', path: [field], message: `${notAKey}: no ${missing.join(', ')}` });
    return {};
  }
  return { project_id: account.project_id as string, client_email: account.client_email as string, private_key: account.private_key as string };
}

const webSchema = z.strictObject({
  vapidPublicKey: z.string().min(1),
  vapidPrivateKey: z.string().min(1),
  subject: z.string().min(1),
  caFile,
  /**
   * Accept web push endpoints on loopback, private, link-local or unspecified addresses and
   * `localhost` names (refused by default: registration is unauthenticated and Herald POSTs
   * to the endpoint). For tests and push services on a private network.
   */
  allowPrivateEndpoints: z.boolean().default(false),
});

const pushWebhookSchema = z.strictObject({
  url: z.url(),
  secret: z.string().min(1),
});

/** One push instance (`push[]`); also the admin API's validation of an instance (src/tenants). */
export const pushInstanceSchema = z.strictObject({
  instanceId: z.uuid(),
  secretKey: z.string().min(1),
  /** A disabled instance answers its device, publish and reporting APIs with 403 INSTANCE_DISABLED. */
  enabled: z.boolean().default(true),
  /** Publish requests per second (P1 + P2) before 429. */
  maxPublishesPerSecond: z.number().int().positive().default(100),
  /** Notifications (recipient devices) per UTC month before 402; null = unlimited. */
  notificationQuota: z.number().int().positive().nullable().default(null),
  apns: apnsSchema.nullable().default(null),
  fcm: fcmSchema.nullable().default(null),
  web: webSchema.nullable().default(null),
  webhooks: z.array(pushWebhookSchema).default([]),
});

const webhookDeliverySchema = z.strictObject({
  /** Events of one app and URL within this window go out in one request (ms). */
  batchWindowMs: z.number().int().min(0).default(50),
  /**
   * Delay before channel_vacated / member_removed is sent; cancelled by a re-occupy, as when a
   * browser page reloads (ms). Read from the deprecated `reloadDebounceMs` too (load.ts).
   */
  pageReloadDebounceMs: z.number().int().min(0).default(3000),
  /** Attempts per event (per receiver) before it is dead-lettered. */
  maxAttempts: z.number().int().positive().default(8),
  /** Per-request timeout (ms). */
  timeoutMs: z.number().int().positive().default(5000),
  /** First retry delay (ms), doubled per attempt with jitter. */
  retryBaseMs: z.number().int().positive().default(1000),
  /** Concurrent requests per receiver URL (per shard). */
  concurrencyPerUrl: z.number().int().positive().default(4),
});

/** How shards fan a publish out to the gateways (per shard: each shard sends to its own devices). */
const pushDeliverySchema = z.strictObject({
  /** Gateway sends in flight per shard, shared by every running publish; bounds memory and sockets. */
  concurrency: z.number().int().min(1).max(10_000).default(256),
  /**
   * Devices handled between two durable checkpoints of a publish's scan position. After a
   * crash at most this many (plus the sends in flight) are sent again; smaller costs more writes.
   */
  checkpointEvery: z.number().int().min(1).default(1000),
  /** Requests per notification to one gateway, including the first (429, 5xx and network errors are retried). */
  retryAttempts: z.number().int().min(1).max(20).default(3),
  /** First retry delay (ms), doubled per attempt with jitter; a longer Retry-After wins. */
  retryBaseDelayMs: z.number().int().min(0).default(200),
  /** Longest single backoff delay between retries (ms). */
  retryMaxDelayMs: z.number().int().min(0).default(10_000),
  /**
   * Longest Retry-After waited out (ms). A 429/503 with Retry-After pauses every send of that
   * gateway client (web push: of that push service); a longer one fails the sends until it is over.
   */
  retryMaxPauseMs: z.number().int().min(0).default(60_000),
  /** Deadline of one gateway request (ms). */
  requestTimeoutMs: z.number().int().positive().default(10_000),
  /** HTTP/2 connections per instance to APNs and to FCM, per shard. */
  connectionsPerGateway: z.number().int().min(1).max(64).default(2),
  /** On shutdown, how long sends in flight may finish before they are cut and left to the restart (ms). */
  shutdownGraceMs: z.number().int().min(0).default(1000),
  /** Days a finished publish's per-shard record (state, counts) is kept for the statistics endpoint. */
  retentionDays: z.number().positive().default(30),
  /**
   * Bytes the records of finished publishes may hold on a node (split evenly over its shards):
   * past it the oldest finished publishes are deleted first, before their `retentionDays`.
   */
  retentionBytes: z.number().int().min(1).default(1024 ** 3),
  /**
   * Bytes of accepted publishes (as stored: targets and payloads) one push instance may have
   * waiting or sending on a shard; a publish past it is refused with 429 PUBLISH_BACKLOG_FULL
   * and `Retry-After: 1`, so one instance cannot fill a node with queued work.
   */
  maxPendingBytesPerInstance: z.number().int().min(1).default(256 * 1024 ** 2),
});

/** HTTPS and WSS on the main port (uWS SSLApp); plain HTTP is then not served on it. */
const tlsSchema = z.strictObject({
  /** PEM certificate chain file; re-read on reload (SIGHUP). */
  certFile: z.string().min(1),
  /** PEM private key file; re-read on reload (SIGHUP). */
  keyFile: z.string().min(1),
  /** Passphrase of an encrypted private key. */
  passphrase: z.string().min(1).optional(),
});

/** A separate plain-HTTP listener for GET /metrics (then not served on the main port). */
/**
 * pusher-js' HTTP fallback transports (xhr_streaming, xhr_polling) under `<path>/app/<key>/…`,
 * on the main port: sessions that behave like WebSocket connections (channels/http-fallback).
 */
const httpFallbackSchema = z.strictObject({
  enabled: z.boolean().default(true),
  /** pusher-js' `httpPath` (its default is /pusher): a path of one or more segments, no trailing slash. */
  path: z.string().regex(/^(\/[A-Za-z0-9._~-]+)+$/).default('/pusher'),
  /** A session with no open stream or poll for this long is closed as a dropped connection (1006). */
  sessionTimeoutMs: z.number().int().min(100).max(600_000).default(10_000),
  /** A poll with nothing to deliver is answered with a heartbeat after this long; streams get one as often. */
  heartbeatMs: z.number().int().min(100).max(120_000).default(25_000),
  /**
   * Requests for a session this node does not have (xhr_send to an unknown, expired or another
   * address's session) one client address may make per minute; past it they are answered 429
   * with Retry-After until the minute ends. null: unlimited.
   */
  maxSessionMissesPerMinute: z.number().int().positive().nullable().default(60),
});

const metricsListenerSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65535),
});

/**
 * Redis behind Sentinel (high availability): the nodes ask the sentinels where the master of
 * `masterName` is, and follow it when the sentinels fail over to a replica.
 */
const sentinelSchema = z.strictObject({
  /** The master group the sentinels monitor (`sentinel monitor <masterName> ...`). */
  masterName: z.string().min(1),
  /** The sentinels, `host:port` each (`[::1]:26379` for IPv6); any one answering is enough. */
  addresses: z.array(z.string().regex(/^(\[[0-9A-Fa-f:.]+\]|[^\s:[\]]+):\d{1,5}$/, 'host:port')).min(1),
  /** The sentinels' own credentials (`requirepass` / ACL of the sentinel processes), when set. */
  username: z.string().min(1).optional(),
  password: z.string().min(1).optional(),
  /** TLS to the sentinels (TLS to the master follows the `rediss://` scheme of `redisUrl`). */
  tls: z.boolean().default(false),
});

/**
 * Bounds on every PostgreSQL call of the push stores (`cluster.postgresTimeouts`), so that a
 * database that stops answering (stalled, or cut off by a partition that drops packets) is
 * answered 503 PUSH_STORE_UNAVAILABLE within seconds instead of holding requests until the
 * shard request timeout. Schema migrations at start-up run without the statement and query
 * bounds.
 */
const postgresTimeoutsSchema = z
  .strictObject({
    /** Opening a connection, or waiting for a free one of the shard's pool (ms). */
    connectMs: z.number().int().min(100).max(60_000).default(2000),
    /** Server side: PostgreSQL cancels a statement running longer (ms; `statement_timeout`). */
    statementMs: z.number().int().min(100).max(600_000).default(3000),
    /**
     * Client side: a call without an answer for this long (ms) fails and its connection is
     * dropped; more than `statementMs`, so that a slow statement is cancelled by the server first.
     */
    queryMs: z.number().int().min(100).max(600_000).default(4000),
    /** Server side: a session idle inside a transaction this long is ended (ms; `idle_in_transaction_session_timeout`). */
    idleInTransactionMs: z.number().int().min(100).max(3_600_000).default(10_000),
  })
  .refine((t) => t.queryMs > t.statementMs, { message: 'queryMs must be greater than statementMs', path: ['queryMs'] });

/**
 * Scale-out over Redis (docs/scaling.md). Absent: a single node with no Redis at all.
 * All nodes of a cluster share one Redis, one `keyPrefix` and the same apps configuration.
 */
const clusterSchema = z.strictObject({
  /**
   * `redis://` or `rediss://` (TLS), with an optional password: `redis://:secret@host:6379/0`.
   * With `sentinel`, its host and port are not used (the sentinels say where the master is);
   * its scheme, user name, password and database still apply to the master.
   */
  redisUrl: z.string().regex(/^rediss?:\/\//, 'must start with redis:// or rediss://'),
  sentinel: sentinelSchema.optional(),
  /** Prepended to every Redis key and pub/sub channel: isolates several clusters on one Redis. */
  keyPrefix: z.string().min(1).max(100).default('herald:'),
  /** A node silent (no heartbeat) for this long (ms) is declared dead and reaped by the others. */
  nodeTimeoutMs: z.number().int().min(100).max(600_000).default(10_000),
  /**
   * How long a subscription made while Redis is unreachable, or before this node has registered
   * again after it came back, waits for it (ms) before it is refused with 503: pusher-js does
   * not retry a subscription error by itself, so a short outage must not fail one. 0: refused at once.
   */
  subscriptionWaitMs: z.number().int().min(0).max(60_000).default(10_000),
  /**
   * This node's id in the cluster (logs, `CLIENT LIST`): letters, digits,
   * `_`, `-`, `.`. Default: the host name plus a random suffix, new at each start.
   */
  nodeId: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'letters, digits, _ - . only, at most 64').optional(),
  /**
   * `postgres://user:password@host:5432/database`: the PostgreSQL that holds the push devices
   * of every node (needed once `push` has an instance; a channels-only cluster needs only Redis).
   */
  postgresUrl: z.string().regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://').optional(),
  /**
   * With `postgresUrl`: the partitions each publish is split into (by device id hash). Any
   * node's shard claims a partition and sends to its devices, so a large publish spreads over
   * the nodes; more partitions spread finer and cost a row each.
   */
  publishPartitions: z.number().int().min(1).max(1024).default(16),
  /**
   * With `postgresUrl`: how long a claimed partition stays a node's without its renewal (ms).
   * A node that dies holds its partitions this long; then another node takes them over from
   * their last checkpoint.
   */
  publishLeaseMs: z.number().int().min(1000).max(600_000).default(15_000),
  postgresTimeouts: postgresTimeoutsSchema.default(postgresTimeoutsSchema.parse({})),
});

/**
 * Connections to addresses users choose (web push endpoints, per-publish `webhookUrl`s) reach
 * public addresses only; these addresses and CIDR ranges are let through too (an operator's own
 * push service or receiver on a private network).
 */
const outboundSchema = z.strictObject({
  allowPrivateAddresses: z.array(z.string().refine(isAddressOrRange, 'must be an IP address or a CIDR range such as 10.1.0.0/16')).default([]),
});

export const DEFAULT_APP = Object.freeze({ id: 'app-id', key: 'app-key', secret: 'app-secret' });
export const DEFAULT_PUSH_INSTANCE = Object.freeze({
  instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10',
  secretKey: 'push-secret',
});

/** The token of the development defaults (`npm start` without a config file); never for production. */
export const DEFAULT_ADMIN_TOKEN = 'herald-dev-admin-token';

/**
 * What Herald runs with when there is no config file at all (`npm start`): the public
 * development app (client events and user authentication on: whispers are the first thing
 * people try), push instance and admin token, listening on loopback only so that nobody else
 * on the network can use them. A config file gets none of it: it means what it says.
 */
export const DEVELOPMENT_CONFIG = Object.freeze({
  host: '127.0.0.1',
  apps: [{ ...DEFAULT_APP, clientEvents: true, userAuthentication: true }],
  push: [{ ...DEFAULT_PUSH_INSTANCE }],
  admin: { token: DEFAULT_ADMIN_TOKEN },
});

const adminSchema = z.strictObject({
  /**
   * Bearer token of the admin API and the dashboard (`/admin/v1`, `/dashboard`); null turns both
   * off (404). At least 16 characters: it guards every app's live traffic.
   */
  token: z.string().min(16).nullable().default(null),
});

export const configSchema = z.strictObject({
  host: z.string().min(1).default('0.0.0.0'),
  port: z.number().int().min(0).max(65535).default(6001),
  /**
   * Share the port with other processes (SO_REUSEPORT), for several nodes of one cluster on one
   * host. Off: a port already in use fails start-up.
   */
  reusePort: z.boolean().default(false),
  dataDir: z.string().min(1).default('./data'),
  /** Worker-thread shards; default cores − 1, at least 1. */
  shards: z.number().int().min(1).max(64).optional(),
  /**
   * Threads that serve the port (each its own uWS app, sharing the port through SO_REUSEPORT);
   * default from the host (config/front-end-threads.ts), at most the host's CPUs (2 on a 1-CPU
   * host) and 32. With more than 1, the main thread keeps the control plane and serves nothing.
   */
  frontEndThreads: z.number({ error: 'must be a whole number from 1 up' }).int('must be a whole number from 1 up').min(1, 'must be a whole number from 1 up').optional(),
  pushDomain: z.string().min(1).default('pushnotifications.pusher.com'),
  /** Timeout for one main→shard request (ms); a timed-out request answers 500. */
  shardRequestTimeoutMs: z.number().int().positive().default(10_000),
  /** Seconds allowed for a graceful shutdown before the process exits anyway. */
  shutdownTimeoutSeconds: z.number().positive().default(10),
  /** Largest body (bytes) of a channel API request (C1, C2); the push APIs have their fixed limits (docs/push-api.md). */
  maxRequestBodyBytes: z.number().int().positive().default(256 * 1024),
  /** Largest WebSocket frame accepted (bytes); larger frames close the socket with 1009. */
  maxWebSocketFrameBytes: z.number().int().positive().default(32 * 1024),
  /** Bytes buffered for one slow socket before it is disconnected with 4100. */
  maxSocketBackpressureBytes: z.number().int().positive().default(1024 * 1024),
  /** Milliseconds a client has to answer the server's pusher:ping before it is closed with 4201. */
  webSocketPongTimeoutMs: z.number().int().positive().default(30_000),
  /** How often (ms) the main thread checks sockets for silence (ping, 4201) and backpressure (4100). */
  webSocketSweepIntervalMs: z.number().int().min(10).max(60_000).default(1000),
  /** Log threshold; HERALD_LOG_LEVEL wins over it. */
  logLevel: z.enum(LOG_LEVELS).default('info'),
  tls: tlsSchema.nullable().default(null),
  metrics: metricsListenerSchema.nullable().default(null),
  /**
   * Deprecated, accepted and ignored: its one value, `local`, is what a node without a `cluster`
   * block runs (the `cluster` block selects the Redis adapter). Any other value stays an error.
   */
  channelAdapter: z.enum(['local']).optional().transform(() => undefined),
  /**
   * WebSocket connections this node accepts, all apps together; beyond it new ones are refused
   * with 4100. Absent: derived from the process' open-file limit (config/fd-limit.ts; load.ts
   * fills it in); null: no node-wide limit.
   */
  maxConnections: z.number().int().positive().nullable().optional(),
  /**
   * Reverse proxies (addresses or CIDR ranges) whose `X-Forwarded-For` names the client: per-address
   * rules (maxNewConnectionsPerSecondPerIp, HTTP fallback sessions) then see the client's address
   * instead of the proxy's (net/client-address.ts).
   */
  trustedProxies: z.array(z.string().refine(isAddressOrRange, 'must be an IP address or a CIDR range such as 10.1.0.0/16')).default([]),
  httpFallback: httpFallbackSchema.default(httpFallbackSchema.parse({})),
  webhookDelivery: webhookDeliverySchema.default(webhookDeliverySchema.parse({})),
  pushDelivery: pushDeliverySchema.default(pushDeliverySchema.parse({})),
  admin: adminSchema.default(adminSchema.parse({})),
  /** Channel apps; none unless configured (the development app comes only with no config file: load.ts). */
  apps: z.array(appSchema).default([]),
  /** Push instances; none unless configured (the development instance comes only with no config file). */
  push: z.array(pushInstanceSchema).default([]),
  cluster: clusterSchema.optional(),
  outbound: outboundSchema.default(outboundSchema.parse({})),
});

export type HistoryConfig = z.infer<typeof historySchema>;

export type HeraldConfig = z.infer<typeof configSchema> & { shards: number; frontEndThreads: number };
export type AppConfig = z.infer<typeof appSchema>;
export type PushInstanceConfig = z.infer<typeof pushInstanceSchema>;
export type ApnsConfig = z.infer<typeof apnsSchema>;
export type FcmConfig = z.infer<typeof fcmSchema>;
export type WebPushConfig = z.infer<typeof webSchema>;
export type ChannelWebhookConfig = z.infer<typeof channelWebhookSchema>;
export type PushWebhookConfig = z.infer<typeof pushWebhookSchema>;
export type WebhookDeliveryConfig = z.infer<typeof webhookDeliverySchema>;
export type TlsConfig = z.infer<typeof tlsSchema>;
export type HttpFallbackConfig = z.infer<typeof httpFallbackSchema>;
export type MetricsListenerConfig = z.infer<typeof metricsListenerSchema>;
export type PushDeliveryConfig = z.infer<typeof pushDeliverySchema>;
export type AdminConfig = z.infer<typeof adminSchema>;
export type ClusterConfig = z.infer<typeof clusterSchema>;
export type PostgresTimeouts = z.infer<typeof postgresTimeoutsSchema>;
export type OutboundConfig = z.infer<typeof outboundSchema>;
