/**
 * Starts the built Herald (dist/src/cli.js) as a child process on a free port with its own
 * temporary data dir, exactly as users run it. Tests talk to it over real sockets.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { registerLogFile } from './test-logs.js';
import { sleep } from './wait.js';

export const REPO_ROOT = resolve(import.meta.dirname, '../..');
export const CLI = join(REPO_ROOT, 'dist/src/cli.js');

export const DEFAULT_APP = { id: 'app-id', key: 'app-key', secret: 'app-secret' } as const;
export const DEFAULT_PUSH = { instanceId: '8d1c0b3e-5a57-4d3c-9d0c-2f1e6c1b7a10', secretKey: 'push-secret' } as const;

/** How long a start may take to print its listening line: three nodes starting at once on a loaded 2-core machine need far more than one. */
const START_TIMEOUT_MS = 60_000;

/** Config dirs not yet removed; whatever a test left (a process killed, no dispose) goes when the test process exits. */
const configDirs = new Set<string>();
process.once('exit', () => {
  for (const dir of configDirs) rmSync(dir, { recursive: true, force: true });
});

function removeConfigDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  configDirs.delete(dir);
}

export interface HeraldOptions {
  /**
   * Config object written to a temp file and passed with --config. Herald gives a config file
   * no app and no push instance of its own; for the tests' convenience one without `apps` gets
   * the test app DEFAULT_APP and one without `push` the instance DEFAULT_PUSH, unless `bare`.
   */
  config?: Record<string, unknown>;
  /** Write `config` exactly as given (tests of what a config file means). */
  bare?: boolean;
  /** Extra environment variables. */
  env?: Record<string, string>;
  /** Reuse a data dir (restart tests); a fresh temp dir otherwise. */
  dataDir?: string;
  /** Shards (HERALD_SHARDS); default 2 so cross-shard paths are exercised. */
  shards?: number;
  /** The executable to run (default: this checkout's dist/src/cli.js); a packed install's bin, say. */
  cli?: string;
}

export class HeraldProcess {
  readonly dataDir: string;
  port = 0;
  child: ChildProcess | undefined;
  stdout = '';
  stderr = '';
  private readonly ownsDataDir: boolean;
  /** The config file, alone in its own temp dir (removed by dispose, or when the test process exits). */
  private configPath: string | undefined;
  /** Its stdout and stderr, in a file shown when a test fails (test/helpers/test-logs.ts). */
  private readonly logFile = registerLogFile('herald');

  constructor(private readonly options: HeraldOptions = {}) {
    this.ownsDataDir = !options.dataDir;
    this.dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'herald-test-'));
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /**
   * Starts the process and resolves once it prints its listening line. On a restart the old
   * port may be briefly unavailable (TIME_WAIT): retry for a few seconds.
   */
  async start(): Promise<this> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.startOnce();
      } catch (err) {
        if (attempt >= 40 || !/cannot listen/.test(String(err))) throw err;
        // time: the port is held for a moment after the last process; try again a little later.
        await sleep(250);
      }
    }
  }

  private async startOnce(): Promise<this> {
    if (this.options.config && !this.configPath) {
      const dir = mkdtempSync(join(tmpdir(), 'herald-config-'));
      configDirs.add(dir);
      this.configPath = join(dir, 'config.json');
      writeFileSync(this.configPath, JSON.stringify(this.options.bare ? this.options.config : withTestDefaults(this.options.config)));
    }
    const args = [this.options.cli ?? CLI];
    if (this.configPath) args.push('--config', this.configPath);
    this.stdout = '';
    this.stderr = '';
    const child = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        HERALD_HOST: '127.0.0.1',
        HERALD_PORT: String(this.port || 0),
        HERALD_DATA_DIR: this.dataDir,
        HERALD_SHARDS: String(this.options.shards ?? 2),
        HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'warn',
        ...this.options.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    child.stderr!.on('data', (d: Buffer) => {
      this.stderr += d.toString();
      this.logFile.append(d.toString());
      if (process.env.HERALD_TEST_VERBOSE) process.stderr.write(d);
    });
    await new Promise<void>((resolvePromise, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`herald did not start in ${START_TIMEOUT_MS / 1000} s\nstdout: ${this.stdout}\nstderr: ${this.stderr}`)),
        START_TIMEOUT_MS,
      );
      child.stdout!.on('data', (d: Buffer) => {
        this.stdout += d.toString();
        this.logFile.append(d.toString());
        const m = /listening on https?:\/\/[^:]+:(\d+)/.exec(this.stdout);
        if (m) {
          this.port = Number(m[1]);
          clearTimeout(timer);
          resolvePromise();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`herald exited with ${code} before listening\nstdout: ${this.stdout}\nstderr: ${this.stderr}`));
      });
    });
    return this;
  }

  /** Rewrites the config file (a later SIGHUP reloads it). */
  writeConfig(config: Record<string, unknown>): void {
    if (!this.configPath) throw new Error('writeConfig needs a process started with a config');
    writeFileSync(this.configPath, JSON.stringify(config));
  }

  /** Writes raw text to the config file (invalid-config tests). */
  writeConfigText(text: string): void {
    if (!this.configPath) throw new Error('writeConfigText needs a process started with a config');
    writeFileSync(this.configPath, text);
  }

  /** Sends a signal without waiting for anything (SIGHUP). */
  signal(signal: NodeJS.Signals): void {
    this.child?.kill(signal);
  }

  /** Sends a signal and resolves with the exit code (null when killed by a signal). */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return child?.exitCode ?? null;
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill(signal);
    const code = await exited;
    this.child = undefined;
    return code;
  }

  /** kill -9: no chance to flush anything. */
  kill9(): Promise<number | null> {
    return this.stop('SIGKILL');
  }

  /**
   * Stops (if running) and starts again on the same data dir. The port changes: the old one
   * may sit in TIME_WAIT for a minute after the server closed its keep-alive connections.
   */
  async restart(): Promise<this> {
    await this.stop();
    this.port = 0;
    return this.start();
  }

  /** Stops the process and removes the temp data dir. */
  async dispose(): Promise<void> {
    await this.stop('SIGKILL');
    this.logFile.unregister();
    if (this.configPath) removeConfigDir(dirname(this.configPath));
    if (this.ownsDataDir) rmSync(this.dataDir, { recursive: true, force: true });
  }
}

/** `config` with the test app and push instance where it names none, and one front-end thread (HeraldOptions.config). */
export function withTestDefaults(config: Record<string, unknown>): Record<string, unknown> {
  // One front-end thread whatever the host's CPUs (the default grows with them), unless the test
  // names its own or HERALD_FRONT_END_THREADS (which wins over the file: npm run test:threads) does.
  return { apps: [{ ...DEFAULT_APP }], push: [{ ...DEFAULT_PUSH }], frontEndThreads: 1, ...config };
}

/** Starts a Herald process; call dispose() in afterAll. */
export function startHerald(options: HeraldOptions = {}): Promise<HeraldProcess> {
  return new HeraldProcess(options).start();
}

/** The default config objects, for tests that extend them. */
export function appConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...DEFAULT_APP, ...overrides };
}
export function pushConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { ...DEFAULT_PUSH, ...overrides };
}
