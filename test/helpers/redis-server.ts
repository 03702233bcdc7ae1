/**
 * A private redis-server for one test file: a free port (never 6379), no persistence, its own
 * temporary `--dir` (a replica's full sync still writes an RDB file there, never into the
 * working tree), stopped after. `kill()` + `start()` again on the same port simulates an outage and a restart with an
 * empty Redis.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { sleep, until } from './wait.js';

export async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
      });
    });
    if (port !== 6379 && port !== 0) return port;
  }
}

/**
 * A free port below Linux's ephemeral range (32768 and up), for a server that must come back on
 * the same port after a restart: a freed port in the ephemeral range can be taken meanwhile as
 * the local port of any outgoing connection (another test's client), and the restart then fails.
 */
export async function freeStablePort(): Promise<number> {
  for (;;) {
    const candidate = 20_000 + Math.floor(Math.random() * 12_000);
    const free = await new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once('error', () => resolve(false));
      server.listen(candidate, '127.0.0.1', () => server.close(() => resolve(true)));
    });
    if (free) return candidate;
  }
}

export interface RedisServerOptions {
  /** Extra redis-server arguments, e.g. ['--requirepass', 'secret']. */
  args?: string[];
}

export class RedisServer {
  port = 0;
  /** The server's working directory (`--dir`): kept across kill() and start(), removed by stop(). */
  dir: string | undefined;
  private child: ChildProcess | undefined;
  private output = '';

  constructor(private readonly options: RedisServerOptions = {}) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts redis-server (on the previous port after a kill) and waits until it answers. */
  async start(): Promise<this> {
    if (!this.port) this.port = await freePort();
    for (let attempt = 0; ; attempt++) {
      try {
        await this.startOnce();
        return this;
      } catch (err) {
        if (attempt >= 20) throw err;
        // time: the port is still held for a moment after a kill; try again a little later.
        await sleep(250);
      }
    }
  }

  private async startOnce(): Promise<void> {
    this.output = '';
    this.dir ??= mkdtempSync(join(tmpdir(), 'herald-redis-'));
    const child = spawn(
      'redis-server',
      ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--appendonly', 'no', '--protected-mode', 'no', ...(this.options.args ?? [])],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.child = child;
    child.stdout!.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.output += d.toString()));
    const exitedOrReady = (): boolean => child.exitCode !== null || /Ready to accept connections/.test(this.output);
    await until(exitedOrReady, () => `redis-server ready: ${this.output.slice(-500)}`, 10_000);
    if (child.exitCode !== null) throw new Error(`redis-server exited ${child.exitCode}: ${this.output.slice(-500)}`);
  }

  /** SIGKILL (an outage): clients see the connection drop. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  async stop(): Promise<void> {
    this.resume(); // a paused server would not act on SIGTERM
    await this.signal('SIGTERM');
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
    this.dir = undefined;
  }

  /**
   * SIGSTOP: Redis hangs with its connections open (the kernel still accepts and acknowledges),
   * like a stalled server or a path that silently drops packets; `resume()` lets it go on.
   */
  pause(): void {
    this.child?.kill('SIGSTOP');
  }

  resume(): void {
    this.child?.kill('SIGCONT');
  }

  /** A plain client for assertions (caller quits it). */
  client(): Redis {
    return new Redis(this.url, { lazyConnect: false, maxRetriesPerRequest: 1 });
  }

  private async signal(sig: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill(sig);
    await exited;
  }
}
