/**
 * The hooks of a test file that needs one private PostgreSQL (test/helpers/postgres-server.ts):
 * started before the file's first test, stopped and removed after its last.
 */
import { afterAll, beforeAll } from 'vitest';
import { PostgresServer } from './postgres-server.js';

/** Registers a test file's hooks: a private server started before the first test, removed after the last. */
export function filePostgresServer(): () => PostgresServer {
  let server: PostgresServer | undefined;
  beforeAll(async () => {
    server = await new PostgresServer().start();
  }, 120_000);
  afterAll(async () => {
    await server?.dispose();
  }, 60_000);
  return () => {
    if (!server) throw new Error('the PostgreSQL server starts in beforeAll');
    return server;
  };
}
