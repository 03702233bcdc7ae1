/**
 * A connection checked out of a pg pool, given back once used: destroyed rather than reused
 * when it broke. The pool listens for errors of idle connections only: a connection the server
 * drops while checked out (a restart) emits 'error' on it, which unheard would end the thread;
 * here it marks the connection broken, and the next query fails with it.
 */
import type pg from 'pg';

/** Runs `use` with `client` (just checked out), then releases it; `broke` marks it not to be reused. */
export async function usingConnection<T>(client: pg.PoolClient, use: (broke: (err: Error) => void) => Promise<T>): Promise<T> {
  let broken: Error | undefined;
  const broke = (err: Error): void => {
    broken = err;
  };
  client.on('error', broke);
  try {
    return await use(broke);
  } finally {
    client.removeListener('error', broke);
    client.release(broken);
  }
}
