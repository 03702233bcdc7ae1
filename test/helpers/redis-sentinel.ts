/**
 * A private Redis high-availability set for one test file: a master, one replica and one
 * Sentinel watching them (Debian's redis-server, run with `--sentinel` for the sentinel), each
 * on a free port, nothing persisted, all stopped after. `killMaster()` is a master crash; the
 * sentinel then promotes the replica (`down-after-milliseconds` 1000, quorum 1).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, RedisServer } from './redis-server.js';
import { until } from './wait.js';

export const MASTER_NAME = 'herald-test-master';

export interface RedisSentinelOptions {
  /** `requirepass` of the sentinel itself (not of the master). */
  sentinelPassword?: string;
}

export class RedisSentinelSet {
  readonly master = new RedisServer();
  replica: RedisServer | undefined;
  sentinelPort = 0;
  private sentinel: ChildProcess | undefined;
  private sentinelOutput = '';
  private dir: string | undefined;

  constructor(private readonly options: RedisSentinelOptions = {}) {}

  /** `host:port` of the sentinel, as the `cluster.sentinel.addresses` config takes it. */
  get sentinelAddress(): string {
    return `127.0.0.1:${this.sentinelPort}`;
  }

  /** Starts the master, the replica (waits until it is in sync) and the sentinel. */
  async start(): Promise<this> {
    await this.master.start();
    this.replica = await new RedisServer({ args: ['--replicaof', '127.0.0.1', String(this.master.port)] }).start();
    await until(async () => /master_link_status:up/.test(await this.info(this.replica!.port, 'replication')), 'the replica in sync', 10_000);
    this.dir = mkdtempSync(join(tmpdir(), 'herald-sentinel-'));
    this.sentinelPort = await freePort();
    const conf = join(this.dir, 'sentinel.conf'); // the sentinel rewrites its config: a file of its own
    writeFileSync(
      conf,
      [
        `port ${this.sentinelPort}`,
        'bind 127.0.0.1',
        'protected-mode no',
        `dir ${this.dir}`,
        `sentinel monitor ${MASTER_NAME} 127.0.0.1 ${this.master.port} 1`,
        `sentinel down-after-milliseconds ${MASTER_NAME} 1000`,
        `sentinel failover-timeout ${MASTER_NAME} 5000`,
        `sentinel parallel-syncs ${MASTER_NAME} 1`,
        ...(this.options.sentinelPassword ? [`requirepass ${this.options.sentinelPassword}`] : []),
        '',
      ].join('\n'),
    );
    const child = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.sentinel = child;
    child.stdout!.on('data', (d: Buffer) => (this.sentinelOutput += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (this.sentinelOutput += d.toString()));
    // Ready once it has found the replica through the master.
    await until(async () => {
        if (child.exitCode !== null) throw new Error(`redis-server --sentinel exited ${child.exitCode}: ${this.sentinelOutput.slice(-500)}`);
        return /\+slave slave/.test(this.sentinelOutput) && (await this.masterPort()) === this.master.port;
      }, 'the sentinel watching the master and its replica', 15_000);
    return this;
  }

  /** The master's port as the sentinel reports it now. */
  async masterPort(): Promise<number> {
    const reply = (await this.sentinelCall('get-master-addr-by-name', MASTER_NAME)) as [string, string] | null;
    return reply ? Number(reply[1]) : 0;
  }

  /** SIGKILL of the master; resolves once the sentinel has promoted the replica. */
  async failOver(timeoutMs = 20_000): Promise<void> {
    await this.master.kill();
    await this.replicaPromoted(timeoutMs);
  }

  /**
   * A planned failover (`SENTINEL FAILOVER`): the replica is promoted and the old master, still
   * running, becomes its replica. Resolves once the sentinel reports the new master.
   */
  async switchOver(timeoutMs = 20_000): Promise<void> {
    await this.sentinelCall('failover', MASTER_NAME);
    await this.replicaPromoted(timeoutMs);
  }

  /** Names of the clients connected to the server on `port` (CLIENT LIST), sorted. */
  async clientNames(port: number): Promise<string[]> {
    const list = (await withClient(port, undefined, (client) => client.client('LIST'))) as string;
    return [...list.matchAll(/ name=(\S+)/g)].map((m) => m[1]!).sort();
  }

  /** A plain client of whichever server is the master now (caller quits it). */
  async masterClient(): Promise<Redis> {
    return new Redis(await this.masterPort(), '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 1 });
  }

  /** Everything the sentinel printed (for failures). */
  get log(): string {
    return this.sentinelOutput;
  }

  async stop(): Promise<void> {
    const sentinel = this.sentinel;
    if (sentinel && sentinel.exitCode === null && sentinel.signalCode === null) {
      const exited = new Promise<void>((r) => sentinel.once('exit', () => r()));
      sentinel.kill('SIGKILL');
      await exited;
    }
    await Promise.allSettled([this.master.kill(), this.replica?.kill()]);
    await Promise.allSettled([this.master.stop(), this.replica?.stop()]); // removes their --dir
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }

  private info(port: number, section: string): Promise<string> {
    return withClient(port, undefined, (client) => client.info(section));
  }

  /** One `SENTINEL <args>` command to the sentinel. */
  private sentinelCall(...args: string[]): Promise<unknown> {
    return withClient(this.sentinelPort, this.options.sentinelPassword, (client) => client.call('SENTINEL', ...args));
  }

  private async replicaPromoted(timeoutMs: number): Promise<void> {
    await until(async () => (await this.masterPort()) === this.replica!.port, 'the sentinel promoting the replica', timeoutMs);
  }

}

/** Runs `call` on a short-lived client of the server on `port`, then drops the client. */
async function withClient<T>(port: number, password: string | undefined, call: (client: Redis) => Promise<T>): Promise<T> {
  const client = new Redis(port, '127.0.0.1', { lazyConnect: false, maxRetriesPerRequest: 1, ...(password && { password }) });
  try {
    return await call(client);
  } finally {
    client.disconnect();
  }
}
