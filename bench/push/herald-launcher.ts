/**
 * Starts the built Herald (`dist/src/cli.js`) on a seeded data dir, as users run it: its own
 * process on a free loopback port, HERALD_SHARDS shards, a config file whose push instance
 * points APNs and FCM at the benchmark's fake gateway (the test CA as `caFile`, the test keys
 * of test/fixtures), every pushDelivery setting at its default.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BENCH_INSTANCE } from './dataset.js';
import type { FakeGatewayProcess } from './fake-gateway-control.js';

/** APNs/FCM account fields of the bench instance; the fake does not check them. */
export const BENCH_APNS = { teamId: 'HERALDTEAM', keyId: 'HERALDKEY1' } as const;
export const BENCH_FCM = { projectId: 'herald-bench', clientEmail: 'herald@herald-bench.iam.gserviceaccount.com' } as const;

export interface HeraldLaunchOptions {
  repoRoot: string;
  dataDir: string;
  shards: number;
  gateway: FakeGatewayProcess;
  /** Write V8 CPU profiles (one per thread) into this directory. */
  cpuProfDir?: string;
  /** Herald must print its listening line within this long, ms. */
  startTimeoutMs?: number;
  /** More config fields (a `cluster` block, say), beside the push instance. */
  config?: Record<string, unknown>;
}

export interface RunningHerald {
  pid: number;
  baseUrl: string;
  /** SIGTERM, SIGKILL after `graceMs`; resolves with the exit code (null when killed). */
  stop(graceMs?: number): Promise<number | null>;
  /** What Herald wrote to stderr (warnings and errors). */
  stderr(): string;
}

/** The push instance config pointing at the fake gateway. */
export function benchInstanceConfig(repoRoot: string, gateway: FakeGatewayProcess): Record<string, unknown> {
  const fixture = (name: string): string => readFileSync(join(repoRoot, 'test/fixtures', name), 'utf8');
  return {
    ...BENCH_INSTANCE,
    apns: { endpoint: gateway.origin, ...BENCH_APNS, privateKey: fixture('apns-key.pem'), caFile: gateway.caFile },
    fcm: {
      endpoint: gateway.origin,
      tokenUri: gateway.tokenUri,
      ...BENCH_FCM,
      privateKey: fixture('fcm-key.pem'),
      caFile: gateway.caFile,
    },
  };
}

/** Starts Herald and resolves once it listens. */
export async function launchHerald(options: HeraldLaunchOptions): Promise<RunningHerald> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-push-'));
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify({ ...options.config, push: [benchInstanceConfig(options.repoRoot, options.gateway)] }));
  const execArgs = options.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', options.cpuProfDir] : [];
  const child = spawn(process.execPath, [...execArgs, join(options.repoRoot, 'dist/src/cli.js'), '--config', configPath], {
    cwd: options.repoRoot,
    env: {
      ...process.env,
      HERALD_HOST: '127.0.0.1',
      HERALD_PORT: '0',
      HERALD_DATA_DIR: options.dataDir,
      HERALD_SHARDS: String(options.shards),
      HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => {
    stdout += d.toString();
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (process.env.BENCH_VERBOSE) process.stderr.write(d);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timeoutMs = options.startTimeoutMs ?? 60_000;
  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`Herald did not listen within ${timeoutMs / 1000} s\n${stderr}`)), timeoutMs);
      child.stdout!.on('data', () => {
        const match = /listening on http:\/\/[^:]+:(\d+)/.exec(stdout);
        if (match) {
          clearTimeout(timer);
          resolve(Number(match[1]));
        }
      });
      void exited.then((code) => {
        clearTimeout(timer);
        reject(new Error(`Herald exited with ${code} before listening\n${stderr}`));
      });
    });
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    pid: child.pid!,
    baseUrl: `http://127.0.0.1:${port}`,
    stderr: () => stderr,
    stop: async (graceMs = 20_000) => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
      return child.exitCode;
    },
  };
}
