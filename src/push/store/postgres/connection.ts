/**
 * What the PostgreSQL push stores (devices, publish records) share: a shard's own small pool,
 * the answer while the database is away, and the schema migrations applied once per store.
 * Worker threads share nothing, so each store of each shard has its own pool; the main thread
 * never connects.
 */
import pg from 'pg';
import { HeraldError } from '../../../errors.js';
import { log } from '../../../log.js';
import { usingConnection } from './checked-out.js';
import { migrate } from './migrations.js';

/** Connections per store of a shard: its requests, fan-outs and checkpoints run a few at a time. */
export const POOL_SIZE = 4;
/** How long a request waits for a connection before the store counts as unreachable (ms). */
const CONNECT_TIMEOUT_MS = 5000;

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

/** The answer to a request while the database is away: 503 PUSH_STORE_UNAVAILABLE, which SDKs retry. */
export function unavailable(err: unknown): HeraldError {
  return new HeraldError('PUSH_STORE_UNAVAILABLE', `The push store (PostgreSQL) is not reachable: ${(err as Error)?.message ?? String(err)}`);
}

export interface ShardPoolOptions {
  url: string;
  poolSize?: number;
  /** Names the connections in pg_stat_activity: `herald-<name>-<shard>`. */
  name: string;
  shardIndex: number;
}

/** A shard's pool; an idle connection the server dropped (a restart) is discarded, the next request reconnects. */
export function shardPool(options: ShardPoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? POOL_SIZE,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    application_name: `herald-${options.name}-${options.shardIndex}`,
  });
  pool.on('error', (err) => log.warn(`push store (${options.name}): an idle PostgreSQL connection failed`, { shard: options.shardIndex, error: err.message }));
  return pool;
}

/** Connects and applies the schema migrations once; after a failure, the next call tries again. */
export class SchemaReady {
  private migrated: Promise<void> | undefined;

  constructor(private readonly pool: pg.Pool) {}

  ready(): Promise<void> {
    this.migrated ??= migrate(this.pool).then(
      () => undefined,
      (err: unknown) => {
        this.migrated = undefined;
        throw isUnavailable(err) ? unavailable(err) : err;
      },
    );
    return this.migrated;
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
      await client.query('ROLLBACK').catch(broke);
      if (passThrough(err)) throw err;
      throw isUnavailable(err) ? unavailable(err) : err;
    }
  });
}
