/**
 * A private PostgreSQL for one test file (never the machine's shared server on 5432): Debian's
 * `initdb` and `pg_ctl` run as the `postgres` user into a temporary dir it owns, listening on
 * 127.0.0.1 at a free port with its unix socket in that dir, trust authentication. Stopped and
 * its dir removed after. A test file registers it with `filePostgresServer()` (file-postgres.ts);
 * the benchmarks use this class directly, outside vitest.
 */
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './redis-server.js';

const run = promisify(execFile);

/** Debian's binaries of the installed major version (15 on Debian 12). */
export const POSTGRES_BIN = process.env.HERALD_TEST_POSTGRES_BIN ?? '/usr/lib/postgresql/15/bin';

/** The uid/gid of the `postgres` user (initdb refuses to run as root). */
async function postgresUser(): Promise<{ uid: number; gid: number }> {
  const [{ stdout: uid }, { stdout: gid }] = await Promise.all([run('id', ['-u', 'postgres']), run('id', ['-g', 'postgres'])]);
  return { uid: Number(uid.trim()), gid: Number(gid.trim()) };
}

export interface PostgresServerOptions {
  /** Sync to disk as a production server does (benchmarks); tests run with fsync off. */
  fsync?: boolean;
}

export class PostgresServer {
  port = 0;
  private dir: string | undefined;
  private paused = false;

  constructor(private readonly options: PostgresServerOptions = {}) {}

  /** `postgres://postgres@127.0.0.1:PORT/DB` (trust authentication, no password). */
  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  private get dataDir(): string {
    return join(this.dir!, 'data');
  }

  private asPostgres(command: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
    return run('runuser', ['-u', 'postgres', '--', join(POSTGRES_BIN, command), ...args], { timeout: 60_000 });
  }

  /** initdb into a fresh temp dir (first start only), then starts the server and waits until it accepts connections. */
  async start(): Promise<this> {
    if (!this.dir) {
      const { uid, gid } = await postgresUser();
      this.dir = mkdtempSync(join(tmpdir(), 'herald-pg-'));
      chownSync(this.dir, uid, gid);
      await this.asPostgres('initdb', ['-D', this.dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    }
    for (let attempt = 0; ; attempt++) {
      if (!this.port) this.port = await freePort();
      try {
        await this.asPostgres('pg_ctl', [
          '-D', this.dataDir, '-l', join(this.dir, 'server.log'), '-w', '-t', '60',
          '-o', `-c port=${this.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${this.dir} -c max_connections=200 -c fsync=${this.options.fsync ? 'on' : 'off'}`,
          'start',
        ]);
        return this;
      } catch (err) {
        if (attempt >= 3) throw new Error(`pg_ctl start failed: ${String(err)}`);
        this.port = 0; // the port was taken meanwhile: another one
      }
    }
  }

  /** The postmaster's pid (postmaster.pid's first line); undefined when not running. */
  private postmaster(): number | undefined {
    if (!this.dir) return undefined;
    try {
      return Number(readFileSync(join(this.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]) || undefined;
    } catch {
      return undefined;
    }
  }

  /** The processes the postmaster started: backends and auxiliary processes. */
  private childrenOf(postmaster: number): number[] {
    const children: number[] = [];
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces, so read after its ')'.
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) children.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
    return children;
  }

  /**
   * SIGSTOP to the postmaster (first: it starts no backend after), then to every backend and
   * auxiliary process of this server, and no other: connections stay open and nothing
   * answers, as with a partition that drops packets. `resume()` lets it go on.
   */
  pause(): void {
    const postmaster = this.postmaster();
    if (postmaster === undefined) throw new Error('PostgreSQL is not running');
    process.kill(postmaster, 'SIGSTOP');
    this.paused = true;
    for (const pid of this.childrenOf(postmaster)) process.kill(pid, 'SIGSTOP');
  }

  resume(): void {
    if (!this.paused) return;
    const postmaster = this.postmaster();
    if (postmaster === undefined) return;
    for (const pid of this.childrenOf(postmaster)) process.kill(pid, 'SIGCONT');
    process.kill(postmaster, 'SIGCONT');
    this.paused = false;
  }

  /** Fast shutdown (clients disconnected), data kept: `start()` brings it back on the same port. */
  async stop(): Promise<void> {
    if (!this.dir) return;
    this.resume(); // a paused server would not act on the shutdown
    await this.asPostgres('pg_ctl', ['-D', this.dataDir, '-m', 'fast', '-w', 'stop']).catch(() => undefined);
  }

  /** Stops the server and removes its dir. */
  async dispose(): Promise<void> {
    await this.stop();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  /** Creates an empty database (one per test that needs a clean store). */
  async createDatabase(name: string): Promise<string> {
    await run(join(POSTGRES_BIN, 'createdb'), ['-h', '127.0.0.1', '-p', String(this.port), '-U', 'postgres', name], { timeout: 30_000 });
    return this.url(name);
  }
}
