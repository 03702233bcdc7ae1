/**
 * What the PostgreSQL push stores (devices, publish records) share: a shard's own small pool,
 * the answer while the database is away, and the schema migrations applied once per store.
 * Worker threads share nothing, so each store of each shard has its own pool; the main thread
 * never connects.
 *
 * Every call is bounded (`cluster.postgresTimeouts`): opening or waiting for a connection
 * (connectMs), a statement on the server (statementMs), any call on the client (queryMs: a
 * database that stopped answering), and a session idle inside a transaction (idleInTransactionMs:
 * its row locks are not held for ever by a node that stalled). A call past its bound answers
 * PUSH_STORE_UNAVAILABLE, and a connection whose call got no answer is dropped, never reused.
 */
import pg from 'pg';
import type { PostgresTimeouts } from '../../../config/schema.js';
import { HeraldError } from '../../../errors.js';
import { log } from '../../../log.js';
import { usingConnection } from './checked-out.js';
import { migrate } from './migrations.js';

/** Connections per store of a shard: its requests, fan-outs and checkpoints run a few at a time. */
export const POOL_SIZE = 4;

/** The defaults of `cluster.postgresTimeouts` (ms), for stores made without a config (tools, tests). */
export const DEFAULT_POSTGRES_TIMEOUTS: Readonly<PostgresTimeouts> = Object.freeze({
  connectMs: 2000,
  statementMs: 3000,
  queryMs: 4000,
  idleInTransactionMs: 10_000,
});

/**
 * Whether a failure is the database being away (connection refused or lost, server shutting
 * down or starting, too many connections) rather than a bug: SQLSTATE classes 08, 53 and 57,
 * and errors of the connection itself, which carry no SQLSTATE.
 */
export function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return /^(08|53|57)/.test(code);
  return true;
}

/** A failure of the connection itself: no answer within the query bound, or the connection lost. */
export function isConnectionFailure(err: unknown): boolean {
  const { message, code } = (err ?? {}) as { message?: unknown; code?: unknown };
  return /^(Query read timeout|Connection terminated|timeout expired)/.test(String(message)) || (typeof code === 'string' && /^E[A-Z]+$/.test(code));
}

/** The answer to a request while the database is away: 503 PUSH_STORE_UNAVAILABLE, which SDKs retry. */
export function unavailable(err: unknown): HeraldError {
  return new HeraldError('PUSH_STORE_UNAVAILABLE', `The push store (PostgreSQL) is not reachable: ${(err as Error)?.message ?? String(err)}`);
}

/**
 * A refusal that names the setting to fix (no such database, authentication, privilege), as a
 * PUSH_STORE_UNAVAILABLE whose message is the server's own words; undefined for other errors.
 */
export function misconfigured(err: unknown): HeraldError | undefined {
  const { code, message } = (err ?? {}) as { code?: unknown; message?: unknown };
  if (typeof code !== 'string' || !/^(28|3D|42501)/.test(code)) return undefined;
  return new HeraldError('PUSH_STORE_UNAVAILABLE', `PostgreSQL refused Herald: ${String(message)} (SQLSTATE ${code}); check cluster.postgresUrl (or HERALD_POSTGRES_URL)`);
}

/** What every PostgreSQL store of a shard is opened with. */
export interface PostgresStoreOptions {
  url: string;
  shardIndex: number;
  /** Connections of the store's pool; POOL_SIZE when absent. */
  poolSize?: number;
  /** `cluster.postgresTimeouts`; the defaults when absent. */
  timeouts?: Readonly<PostgresTimeouts>;
}

export interface ShardPoolOptions extends PostgresStoreOptions {
  /** Names the connections in pg_stat_activity: `herald-<name>-<shard>`. */
  name: string;
}

/** The bounds of every connection of a store (see the file header). */
function boundedConnection(url: string, timeouts: Readonly<PostgresTimeouts>, applicationName: string): pg.ClientConfig & { connectionTimeoutMillis: number } {
  return {
    connectionString: url,
    application_name: applicationName,
    connectionTimeoutMillis: timeouts.connectMs,
    statement_timeout: timeouts.statementMs,
    query_timeout: timeouts.queryMs,
    idle_in_transaction_session_timeout: timeouts.idleInTransactionMs,
    // A peer that vanished (host down, partition) is noticed by TCP too, not only by the next call.
    keepAlive: true,
  };
}

/** A shard's pool; an idle connection the server dropped (a restart) is discarded, the next request reconnects. */
export function shardPool(options: ShardPoolOptions): pg.Pool {
  const timeouts = options.timeouts ?? DEFAULT_POSTGRES_TIMEOUTS;
  const pool = new pg.Pool({
    ...boundedConnection(options.url, timeouts, `herald-${options.name}-${options.shardIndex}`),
    max: options.poolSize ?? POOL_SIZE,
  });
  pool.on('error', (err) => log.warn(`push store (${options.name}): an idle PostgreSQL connection failed`, { shard: options.shardIndex, error: err.message }));
  return pool;
}

/** A store's pool and the migrations it waits for, its connections named `name` (ShardPoolOptions). */
export function storeConnections(options: PostgresStoreOptions, name: string): { pool: pg.Pool; schema: SchemaReady } {
  const named: ShardPoolOptions = { url: options.url, poolSize: options.poolSize, name, shardIndex: options.shardIndex, timeouts: options.timeouts };
  return { pool: shardPool(named), schema: new SchemaReady(named) };
}

/** Runs one call of a store, a failure of the database being away answered as PUSH_STORE_UNAVAILABLE. */
export async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw isUnavailable(err) ? unavailable(err) : err;
  }
}

/** A connection of its own (a store's LISTEN), with the bounds of the pools'. */
export function boundedClient(url: string, timeouts: Readonly<PostgresTimeouts> | undefined, applicationName: string): pg.Client {
  return new pg.Client(boundedConnection(url, timeouts ?? DEFAULT_POSTGRES_TIMEOUTS, applicationName));
}

/**
 * Connects and applies the schema migrations once; after a failure, the next call tries again.
 * Migrations run on a connection of their own without the statement and query bounds (a large
 * table's migration takes as long as it takes; connecting is still bounded).
 */
export class SchemaReady {
  private migrated: Promise<void> | undefined;

  constructor(private readonly options: ShardPoolOptions) {}

  ready(): Promise<void> {
    this.migrated ??= this.migrate().then(
      () => undefined,
      (err: unknown) => {
        this.migrated = undefined;
        throw isUnavailable(err) ? unavailable(err) : (misconfigured(err) ?? err);
      },
    );
    return this.migrated;
  }

  private async migrate(): Promise<void> {
    const timeouts = this.options.timeouts ?? DEFAULT_POSTGRES_TIMEOUTS;
    const pool = new pg.Pool({
      connectionString: this.options.url,
      application_name: `herald-${this.options.name}-migrate-${this.options.shardIndex}`,
      connectionTimeoutMillis: timeouts.connectMs,
      max: 1,
    });
    pool.on('error', () => undefined);
    try {
      await migrate(pool);
    } finally {
      await pool.end().catch(() => undefined);
    }
  }
}

/**
 * Runs `work` in one transaction on one connection of `pool`, rolled back when it throws. A
 * failure of the database being away becomes PUSH_STORE_UNAVAILABLE; errors `passThrough`
 * names (the store's own answers) are thrown as they are.
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient) => Promise<T>,
  passThrough: (err: unknown) => boolean = () => false,
): Promise<T> {
  let client: pg.PoolClient;
  try {
    client = await pool.connect();
  } catch (err) {
    throw unavailable(err);
  }
  return usingConnection(client, async (broke) => {
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      // A connection that failed (no answer, dropped) is not asked to roll back: dropping it
      // does, on the server, and a ROLLBACK would wait behind the call that got no answer.
      if (isConnectionFailure(err)) broke(err as Error);
      else await client.query('ROLLBACK').catch(broke);
      if (passThrough(err)) throw err;
      throw isUnavailable(err) ? unavailable(err) : err;
    }
  });
}
