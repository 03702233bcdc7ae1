/**
 * The two servers the fan-out benchmark drives, each started as its own process on a free
 * loopback port: the built Herald (`dist/src/cli.js`, temp data dir, a config file with the
 * bench app) and the bare-uWS ceiling (ceiling-server.ts). A fresh process per scenario, so
 * scenarios do not inherit each other's memory or state.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchApp } from './trigger-client.js';

export type TargetName = 'herald' | 'ceiling';

/** The app both servers are driven with (the ceiling ignores the secret). */
export const BENCH_APP: BenchApp = { id: 'bench-app', key: 'bench-key', secret: 'bench-secret' };

/** dist/ (this file is dist/bench/fanout/targets.js once built). */
const DIST = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const REPO_ROOT = resolve(DIST, '..');

export interface TargetOptions {
  /** Write V8 CPU profiles of the server process (one per thread) under this directory. */
  cpuProfDir?: string;
  /** Sub-directory of cpuProfDir for this start, e.g. `unicast-herald`. */
  profileLabel?: string;
  /**
   * Herald only: keep a dashboard watching the bench app for the whole run (its debug stream,
   * `/admin/v1/stream?app=`, read and discarded here), so the debug taps are on.
   */
  watchDashboard?: boolean;
  /**
   * Herald only: top-level config fields added to the bench config, e.g. a `cluster` block
   * (bench/cluster.ts).
   */
  extraConfig?: Record<string, unknown>;
  /**
   * Port to listen on (default 0: a free one). Several processes on one port: Herald with
   * `"reusePort": true` in extraConfig; the ceiling always sets SO_REUSEPORT (uWS's default).
   */
  port?: number;
}

/**
 * Node flags Herald is run with, as docs/operations.md tells (and `npm start` does): 2 MB
 * young-generation semi-spaces instead of V8's up to 16 MB, ~2 KB less RSS per connection at
 * 10,000 connections (docs/benchmarks.md).
 */
export const HERALD_NODE_ARGS = ['--max-semi-space-size=2'];

/** Admin token of the bench's Herald when a dashboard watches. */
const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789';

/** What the watching dashboard received during one run. */
export interface DashboardWatch {
  debugEvents: number;
  samplingNotices: number;
  /** Largest `every` announced (1: never sampled). */
  maxSampledEvery: number;
}

export interface RunningTarget {
  name: TargetName;
  pid: number;
  port: number;
  /**
   * Where triggers go: `http://127.0.0.1:<port>`, or for the ceiling its private trigger port
   * (the same app, reached on this process even when several share `port`).
   */
  baseUrl: string;
  /** WebSocket URL of the bench app. */
  wsUrl: string;
  /** Stops the process (graceful, then SIGKILL after 15 s) and removes its temp files. */
  stop(): Promise<void>;
  /** With watchDashboard: what the dashboard's stream carried so far. */
  dashboard?: DashboardWatch;
}

function herald(dir: string, watchDashboard: boolean, extraConfig: Record<string, unknown>, port: number): { nodeArgs: string[]; args: string[]; env: Record<string, string> } {
  const configPath = join(dir, 'config.json');
  writeFileSync(
    configPath,
    JSON.stringify({
      // bench-history-* channels keep their events (broadcast-1k-history); a cluster keeps no history yet.
      apps: [{ ...BENCH_APP, maxPresenceMembers: 20_000, activityTimeout: 120, ...(extraConfig.cluster ? {} : { history: { channels: ['bench-history-*'], maxEvents: 100, ttlSeconds: 300 } }) }],
      ...(watchDashboard ? { admin: { token: BENCH_ADMIN_TOKEN } } : {}),
      ...extraConfig,
    }),
  );
  return {
    nodeArgs: HERALD_NODE_ARGS,
    args: [join(DIST, 'src/cli.js'), '--config', configPath],
    env: {
      HERALD_HOST: '127.0.0.1',
      HERALD_PORT: String(port),
      HERALD_DATA_DIR: join(dir, 'data'),
      HERALD_LOG_LEVEL: process.env.HERALD_LOG_LEVEL ?? 'warn',
    },
  };
}

/** Starts a target and resolves once it prints the port it listens on. */
export async function startTarget(name: TargetName, options: TargetOptions = {}): Promise<RunningTarget> {
  const dir = mkdtempSync(join(tmpdir(), `herald-bench-${name}-`));
  const launch =
    name === 'herald'
      ? herald(dir, options.watchDashboard === true, options.extraConfig ?? {}, options.port ?? 0)
      : { nodeArgs: [], args: [join(DIST, 'bench/fanout/ceiling-server.js'), '--host', '127.0.0.1', '--port', String(options.port ?? 0)], env: {} };
  // One directory per target and scenario; Node names each thread's profile (main, shard workers).
  const execArgs = options.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', join(options.cpuProfDir, options.profileLabel ?? name)] : [];
  // Extra node flags for the server only (e.g. `--trace-gc`), from BENCH_SERVER_NODE_ARGS; they
  // come after Herald's own (HERALD_NODE_ARGS), so `--max-semi-space-size=16` there overrides it.
  const extraArgs = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...launch.nodeArgs, ...execArgs, ...extraArgs, ...launch.args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...launch.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
    if (process.env.BENCH_VERBOSE) process.stderr.write(d);
  });
  const listening = new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start in 30 s\n${stdout}\n${stderr}`)), 30_000);
    child.stdout!.on('data', (d: Buffer) => {
      if (process.env.BENCH_VERBOSE) process.stderr.write(d);
      stdout += d.toString();
      const m = /listening on (?:http:\/\/[^:]+:|port )(\d+)/.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolvePort(Number(m[1]));
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code} before listening\n${stdout}\n${stderr}`));
    });
  });
  let port: number;
  try {
    port = await listening;
  } catch (err) {
    await stopChild(child);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  // The ceiling takes triggers on its own port too (one process of several on a shared port).
  const triggerPort = name === 'ceiling' ? Number(/ceiling trigger port (\d+)/.exec(stdout)?.[1] ?? port) : port;
  const baseUrl = `http://127.0.0.1:${triggerPort}`;
  const watch = name === 'herald' && options.watchDashboard ? await watchDashboard(baseUrl) : undefined;
  return {
    name,
    pid: child.pid!,
    port,
    baseUrl,
    wsUrl: `ws://127.0.0.1:${port}/app/${BENCH_APP.key}?protocol=7&client=js&version=8.4.0&flash=false`,
    stop: async () => {
      watch?.close();
      await stopChild(child);
      rmSync(dir, { recursive: true, force: true });
    },
    ...(watch ? { dashboard: watch.counts } : {}),
  };
}

/** Opens the bench app's debug stream as the dashboard page does and counts what arrives. */
async function watchDashboard(baseUrl: string): Promise<{ counts: DashboardWatch; close: () => void }> {
  const controller = new AbortController();
  const res = await fetch(`${baseUrl}/admin/v1/stream?app=${BENCH_APP.id}`, { headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}` }, signal: controller.signal });
  if (res.status !== 200 || !res.body) throw new Error(`dashboard stream answered ${res.status}`);
  const counts: DashboardWatch = { debugEvents: 0, samplingNotices: 0, maxSampledEvery: 1 };
  void (async () => {
    const decoder = new TextDecoder();
    let tail = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        const text = tail + decoder.decode(chunk, { stream: true });
        const blocks = text.split('\n\n');
        tail = blocks.pop() ?? '';
        for (const block of blocks) {
          if (block.startsWith('event: debug')) counts.debugEvents++;
          else if (block.startsWith('event: sampling')) {
            counts.samplingNotices++;
            const every = Number(/"every":(\d+)/.exec(block)?.[1] ?? 1);
            counts.maxSampledEvery = Math.max(counts.maxSampledEvery, every);
          }
        }
      }
    } catch {
      // Aborted at stop.
    }
  })();
  return { counts, close: () => controller.abort() };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
