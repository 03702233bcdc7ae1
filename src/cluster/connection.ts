/**
 * The two Redis connections of a cluster node, made from the `cluster` config:
 *
 * - `commands`: state scripts, publishes, heartbeats. Auto-pipelined: every command issued in
 *   one event-loop turn goes out in one write (batching without call-site bookkeeping). No
 *   offline queue and no resend after a reconnect: while Redis is away a command fails at once
 *   with RedisUnavailableError rather than waiting or running late, because the node's answer
 *   (a 503 to the HTTP API) must not depend on a write that may or may not happen later. The
 *   node re-registers what it holds when the connection is back (liveness.ts).
 * - `subscriber`: pub/sub only (a subscribed Redis connection cannot run other commands).
 *
 * Both reconnect forever with capped exponential backoff and jitter. With `cluster.sentinel`
 * each connection asks the sentinels where the master is on every (re)connect, and drops its
 * connection when they announce a failover (ioredis' failover detector), so the node follows
 * the new master like any other reconnect; a write refused with READONLY (a demoted master
 * still reachable) also reconnects.
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { ClusterConfig } from '../config/schema.js';
import { log } from '../log.js';

/** First reconnect delay (ms); doubled per failed attempt up to RECONNECT_MAX_MS, ±50% jitter. */
export const RECONNECT_BASE_MS = 50;
/** Longest delay between two reconnect attempts (ms). */
export const RECONNECT_MAX_MS = 2000;

/**
 * Redis is not reachable (or not ready) right now. Expected during an outage: the caller
 * answers a retryable 503 (docs/scaling.md, "Redis outage"), it is not a bug.
 */
export class RedisUnavailableError extends Error {
  override readonly name = 'RedisUnavailableError';
  readonly code = 'CLUSTER_UNAVAILABLE';
}

/** Reconnect delay (ms) after `attempt` failed attempts (1-based), as ioredis' retryStrategy. */
export function reconnectDelayMs(attempt: number, random: () => number = Math.random): number {
  const capped = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt - 1, 10));
  return Math.round(capped * (0.5 + random()));
}

export interface RedisConnections {
  readonly commands: Redis;
  readonly subscriber: Redis;
  /**
   * Resolves once both connections are ready (first connect); rejects after `timeoutMs`, or
   * sooner when `options.failFast` and every attempt for REFUSED_GIVE_UP_MS met a refusal that
   * waiting does not mend (nothing listens, no such host, a wrong password), or once
   * `options.stop()` says the caller no longer waits.
   */
  ready(timeoutMs?: number, options?: { failFast?: boolean; stop?: () => boolean }): Promise<void>;
  /** Closes both connections (QUIT, then disconnect); no reconnect afterwards. */
  close(): Promise<void>;
  /** Drops both connections at once, as a crash would (no QUIT); no reconnect afterwards. */
  drop(): void;
}

export interface ConnectionOptions {
  /** CLIENT SETNAME suffix, to tell nodes apart in `CLIENT LIST`. */
  nodeId: string;
  /**
   * A connection whose Redis has not answered a command for this long (ms) is dropped and
   * reconnected (watchReplies); default replyTimeoutMs(10 000).
   */
  replyTimeoutMs?: number;
  /** Extra TLS options for `rediss://` (e.g. a private CA); users can also set NODE_EXTRA_CA_CERTS. */
  tls?: RedisOptions['tls'];
}

/** Creates (and starts connecting) the command and subscriber connections. */
export function createRedisConnections(cluster: Pick<ClusterConfig, 'redisUrl' | 'sentinel'>, options: ConnectionOptions): RedisConnections {
  const opened = openConnections(cluster, options, true);
  return { ...opened, subscriber: opened.subscriber! };
}

/**
 * A front-end thread's own command connection (several threads on one node): the thread runs
 * its joins, leaves and publishes on it; the node's subscriber connection stays the main thread's.
 */
export function createCommandConnection(cluster: Pick<ClusterConfig, 'redisUrl' | 'sentinel'>, options: ConnectionOptions): Omit<RedisConnections, 'subscriber'> {
  const { subscriber: _none, ...opened } = openConnections(cluster, options, false);
  return opened;
}

function openConnections(cluster: Pick<ClusterConfig, 'redisUrl' | 'sentinel'>, options: ConnectionOptions, withSubscriber: boolean): Omit<RedisConnections, 'subscriber'> & { subscriber: Redis | null } {
  const base: RedisOptions = {
    retryStrategy: (times) => reconnectDelayMs(times),
    enableOfflineQueue: false,
    autoResendUnfulfilledCommands: false,
    // A command sent just before a disconnect fails instead of being retried on the next connection.
    maxRetriesPerRequest: 0,
    lazyConnect: true,
    connectTimeout: 5000,
  };
  const masterTls = cluster.redisUrl.startsWith('rediss://');
  if (options.tls && masterTls) base.tls = options.tls;
  if (cluster.sentinel) Object.assign(base, sentinelOptions(cluster.sentinel, masterTls, options.tls));
  const commands = new Redis(cluster.redisUrl, { ...base, enableAutoPipelining: true, connectionName: `herald-${options.nodeId}` });
  // Subscriptions are re-made by the delivery bus on every 'ready' (it knows which it wants).
  const subscriber = withSubscriber ? new Redis(cluster.redisUrl, { ...base, autoResubscribe: false, connectionName: `herald-${options.nodeId}-sub` }) : null;
  const all = subscriber ? [commands, subscriber] : [commands];
  // Errors are also reported through failing commands and 'close'/'ready'; without a listener
  // ioredis would print every reconnect failure.
  let refusal: string | null = null;
  commands.on('error', (err: Error & { code?: string }) => {
    refusal = refusalOf(err);
  });
  commands.on('ready', () => {
    refusal = null;
  });
  subscriber?.on('error', () => {});
  // Not awaited by ready(): through sentinels that refuse us, connect() never settles (ioredis
  // keeps asking them), and start-up must still give up after its timeout.
  void Promise.allSettled(all.map((redis) => redis.connect()));
  const replyTimeout = options.replyTimeoutMs ?? replyTimeoutMs(10_000);
  let closed = false;
  const isClosed = (): boolean => closed;
  const labels = ['commands', 'subscriber'];
  const guards = all.flatMap((redis, i) => [watchReplies(redis, labels[i]!, replyTimeout), keepConnecting(redis, labels[i]!, isClosed)]);
  /** No reconnect from here on: the guards stop (keepConnecting would start a closed connection again). */
  const release = (): void => {
    closed = true;
    for (const stop of guards) stop();
  };
  const disconnect = (): void => {
    for (const redis of all) redis.disconnect();
  };
  return {
    commands,
    subscriber,
    async ready(timeoutMs = 10_000, options = {}) {
      const started = Date.now();
      const deadline = started + timeoutMs;
      while (all.some((redis) => redis.status !== 'ready')) {
        if (closed || options.stop?.()) throw new RedisUnavailableError('connections closed');
        if (options.failFast && refusal !== null && Date.now() - started >= REFUSED_GIVE_UP_MS) {
          throw new RedisUnavailableError(`${refusal} (${describeRedis(cluster)})`);
        }
        if (Date.now() > deadline) throw new RedisUnavailableError(`Redis not ready after ${timeoutMs} ms (${describeRedis(cluster)})`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    drop() {
      release();
      disconnect();
    },
    async close() {
      release();
      // QUIT, unless Redis does not answer it (hung, cut off): then just drop the connections.
      const quit = Promise.allSettled(all.map((redis) => redis.quit()));
      await Promise.race([quit, new Promise((r) => setTimeout(r, replyTimeout).unref())]);
      disconnect();
    },
  };
}

/** How long start-up keeps trying a Redis that refuses it (nothing listens, no such host, a wrong password), ms. */
export const REFUSED_GIVE_UP_MS = 2500;

/** A failure that waiting does not mend, in words; null for one that may pass (a timeout, a reset). */
function refusalOf(err: Error & { code?: string }): string | null {
  if (err.code === 'ECONNREFUSED') return 'connection refused: nothing listens there (ECONNREFUSED)';
  if (err.code === 'ENOTFOUND') return 'no such host (ENOTFOUND)';
  if (/WRONGPASS|NOAUTH|invalid password|invalid username-password/i.test(err.message)) return `authentication refused (${err.message.split(/\s/)[0]})`;
  return null;
}

/** How long a node waits for any answer from Redis before it drops the connection: half of nodeTimeoutMs, within 2 to 5 s. */
export function replyTimeoutMs(nodeTimeoutMs: number): number {
  return Math.min(5000, Math.max(2000, Math.floor(nodeTimeoutMs / 2)));
}

/**
 * Drops `redis`' connection (ioredis then reconnects, as after any drop) when Redis stops
 * answering: a hung server (stopped, swapping, a long script of another client) or a path that
 * silently loses packets (a partition without a reset) leaves a TCP connection open that never
 * answers, and every command would wait on it for as long as TCP takes to give up (minutes).
 * Every quarter of `timeoutMs` it sends a PING (allowed on a subscribed connection too) unless
 * one is pending; a PING pending `timeoutMs` drops the connection, its pending commands failing
 * as in an outage. The decision waits for the end of the event loop's poll phase, so an answer
 * already in the socket after a stall of this process is read first and counts.
 */
export function watchReplies(redis: Redis, label: string, timeoutMs: number): () => void {
  let sentAt: number | null = null;
  const timer = setInterval(() => {
    if (redis.status !== 'ready') {
      sentAt = null;
      return;
    }
    if (sentAt === null) {
      const mine = (sentAt = Date.now());
      const answered = (): void => {
        if (sentAt === mine) sentAt = null;
      };
      redis.ping().then(answered, answered);
      return;
    }
    if (Date.now() - sentAt < timeoutMs) return;
    const stalled = sentAt;
    setImmediate(() => {
      if (sentAt !== stalled || redis.status !== 'ready') return;
      sentAt = null;
      log.warn('cluster: Redis did not answer; dropping the connection to reconnect', { connection: label, timeoutMs });
      redis.stream?.destroy(new Error(`Redis did not answer within ${timeoutMs} ms`));
    });
  }, Math.max(50, Math.floor(timeoutMs / 4)));
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Starts `redis` connecting again, after the reconnect backoff, whenever ioredis gives it up
 * ('end') while we still want it. ioredis ends a connection for good when a connect attempt
 * itself fails rather than the connection dropping: seen with sentinels, when the failover
 * detector drops a connection that is already reconnecting (the node never came back after a
 * failover). The node must reconnect forever, whatever the path.
 */
export function keepConnecting(redis: Redis, label: string, closed: () => boolean): () => void {
  let attempts = 0;
  let timer: NodeJS.Timeout | undefined;
  const onReady = (): void => {
    attempts = 0;
  };
  const onEnd = (): void => {
    if (closed() || timer) return;
    const delay = reconnectDelayMs(++attempts);
    log.warn('cluster: the Redis connection was given up; connecting again', { connection: label, inMs: delay });
    timer = setTimeout(() => {
      timer = undefined;
      if (!closed() && redis.status === 'end') redis.connect().catch(() => {}); // a failure ends it again: onEnd
    }, delay);
    timer.unref();
  };
  redis.on('ready', onReady);
  redis.on('end', onEnd);
  return () => {
    clearTimeout(timer);
    redis.off('ready', onReady);
    redis.off('end', onEnd);
  };
}

type SentinelConfig = NonNullable<ClusterConfig['sentinel']>;

/** `host:port` (IPv6 in brackets) as ioredis' sentinel address. */
export function parseHostPort(address: string): { host: string; port: number } {
  const colon = address.lastIndexOf(':');
  const host = address.slice(0, colon);
  return { host: host.startsWith('[') ? host.slice(1, -1) : host, port: Number(address.slice(colon + 1)) };
}

/** ioredis options of a connection to the master named by the sentinels. */
export function sentinelOptions(sentinel: SentinelConfig, masterTls: boolean, tls: RedisOptions['tls']): RedisOptions {
  return {
    sentinels: sentinel.addresses.map(parseHostPort),
    name: sentinel.masterName,
    role: 'master',
    ...(sentinel.username ? { sentinelUsername: sentinel.username } : {}),
    ...(sentinel.password ? { sentinelPassword: sentinel.password } : {}),
    ...(sentinel.tls ? { sentinelTLS: tls ?? {} } : {}),
    // With sentinels ioredis connects to the master in plain TCP unless told otherwise.
    ...(masterTls ? { enableTLSForSentinelMode: true, tls: tls ?? {} } : {}),
    // No sentinel answered: try them all again after the same backoff as a lost connection.
    sentinelRetryStrategy: (times) => reconnectDelayMs(times),
    // Subscribes to the sentinels' +switch-master: a failover drops the connection at once
    // rather than when the old master is found dead (or, partitioned, never).
    failoverDetector: true,
    // A master demoted to replica refuses writes: reconnect (to wherever the sentinels say the
    // master is now) without resending the refused command, which fails as an outage does.
    // Not without sentinels: reconnecting to the same address would change nothing.
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 1 : false),
  };
}

/** Where a node's Redis is, for logs and errors: the URL without its password, or the sentinels. */
export function describeRedis(cluster: Pick<ClusterConfig, 'redisUrl' | 'sentinel'>): string {
  if (!cluster.sentinel) return redactUrl(cluster.redisUrl);
  return `master ${cluster.sentinel.masterName} via sentinels ${cluster.sentinel.addresses.join(', ')}`;
}

/** The URL with any password replaced, for logs and errors (secrets are never logged). */
export function redactUrl(url: string): string {
  return url.replace(/^(rediss?:\/\/)([^@/]*)@/, (_m, scheme: string, auth: string) => {
    const colon = auth.indexOf(':');
    return colon < 0 ? `${scheme}***@` : `${scheme}${auth.slice(0, colon)}:***@`;
  });
}

/**
 * Runs a Redis call, turning connection-level failures (not ready, closed, writeable stream
 * gone) into RedisUnavailableError. Script errors and other replies pass through unchanged.
 */
export async function whenAvailable<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw asUnavailable(err);
  }
}

/** A connection-level failure as RedisUnavailableError; any other error as it is. */
export function asUnavailable(err: unknown): unknown {
  if (err instanceof RedisUnavailableError || !isConnectionError(err)) return err;
  return new RedisUnavailableError(String((err as Error).message ?? err));
}

function isConnectionError(err: unknown): boolean {
  if (err instanceof RedisUnavailableError) return true;
  const message = String((err as { message?: unknown })?.message ?? '');
  const name = String((err as { name?: unknown })?.name ?? '');
  return (
    name === 'MaxRetriesPerRequestError' ||
    /Stream isn't writeable|Connection is closed|enableOfflineQueue|ECONNREFUSED|ECONNRESET|EPIPE|Reached the max retries|^READONLY|All sentinels are unreachable|Redis did not answer/.test(message)
  );
}
