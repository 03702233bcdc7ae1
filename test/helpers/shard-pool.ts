/**
 * Real shard pools for tests: the compiled pool and worker (dist/src, built here when older
 * than src/) on a temp data dir. `loadShardModules()` in beforeAll, `newShardPool()` per test,
 * `removeShardPoolDirs()` in afterAll.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { REPO_ROOT } from './herald-process.js';
import type { ShardPool } from '../../src/shards/pool.js';
import type { HeraldShardApi } from '../../src/shard-api.js';

type PoolModule = typeof import('../../src/shards/pool.js');
type LoadModule = typeof import('../../src/config/load.js');
type DataDirModule = typeof import('../../src/shards/data-dir.js');

const DIST_POOL = join(REPO_ROOT, 'dist/src/shards/pool.js');

/** The app of newShardPool's config: channel requests use it. */
export const SHARD_POOL_APP_ID = 'app-id';

/** The file URL of a compiled module, `path` relative to dist/src. */
export function distModule(path: string): string {
  return pathToFileURL(join(REPO_ROOT, 'dist/src', path)).href;
}

/** Newest modification time (ms) of the .ts files under a directory. */
function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestSource(path));
    else if (entry.name.endsWith('.ts')) newest = Math.max(newest, statSync(path).mtimeMs);
  }
  return newest;
}

/** `npm run build` (tsc) unless dist is newer than every source file: the workers run compiled JS. */
function ensureBuilt(): void {
  let built = 0;
  try {
    built = statSync(DIST_POOL).mtimeMs;
  } catch {
    // not built yet
  }
  if (built >= newestSource(join(REPO_ROOT, 'src'))) return;
  const tsc = spawnSync(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: REPO_ROOT, encoding: 'utf8' });
  // tsc still emits when another file has a type error; the workers only need the output.
  if (tsc.status !== 0) process.stderr.write(`shard-pool helper: tsc reported errors:\n${tsc.stdout}${tsc.stderr}\n`);
  statSync(DIST_POOL);
}

let modules: { ShardPool: PoolModule['ShardPool']; parseConfig: LoadModule['parseConfig']; openDataDir: DataDirModule['openDataDir'] } | undefined;
const dirs: string[] = [];

/** Builds if needed and loads the compiled pool (call in beforeAll, with a long timeout). */
export async function loadShardModules(): Promise<void> {
  ensureBuilt();
  const { ShardPool: Pool } = (await import(distModule('shards/pool.js'))) as PoolModule;
  const { parseConfig } = (await import(distModule('config/load.js'))) as LoadModule;
  const { openDataDir } = (await import(distModule('shards/data-dir.js'))) as DataDirModule;
  modules = { ShardPool: Pool, parseConfig, openDataDir };
}

export function removeShardPoolDirs(): void {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/** A started pool of `shards` workers on a fresh temp data dir (every shard answered a ping). */
export async function newShardPool(
  shards: number,
  requestTimeoutMs = 30_000,
  maxQueuePerShard?: number,
  configFields: Record<string, unknown> = {},
  poolFields: { holdUntilServing?: boolean } = {},
): Promise<ShardPool<HeraldShardApi>> {
  if (!modules) throw new Error('loadShardModules() first');
  const dataDir = mkdtempSync(join(tmpdir(), 'herald-pool-test-'));
  dirs.push(dataDir);
  const identity = modules.openDataDir(dataDir, shards);
  const config = modules.parseConfig({ dataDir, shards, apps: [{ id: SHARD_POOL_APP_ID, key: 'app-key', secret: 'app-secret' }], ...configFields });
  const pool = new modules.ShardPool<HeraldShardApi>({
    workerFile: join(REPO_ROOT, 'dist/src/shard-worker.js'),
    shardCount: shards,
    dataDir,
    config,
    installSecret: identity.installSecret,
    requestTimeoutMs,
    ...(maxQueuePerShard === undefined ? {} : { maxQueuePerShard }),
    ...poolFields,
  });
  await pool.broadcast({ type: 'core.ping' }, 30_000);
  return pool;
}

/** Settles a request into 'ok' or its error code. */
export function outcome(p: Promise<unknown>): Promise<string> {
  return p.then(
    () => 'ok',
    (err: unknown) => String((err as { code?: string }).code ?? err),
  );
}

/** With HERALD_TEST_HOOKS set to `value` (unset if undefined) in the environment the workers are created with (they copy it). */
export async function withTestHooks<T>(value: string | undefined, fn: () => Promise<T>): Promise<T> {
  const before = process.env.HERALD_TEST_HOOKS;
  if (value === undefined) delete process.env.HERALD_TEST_HOOKS;
  else process.env.HERALD_TEST_HOOKS = value;
  try {
    return await fn();
  } finally {
    if (before === undefined) delete process.env.HERALD_TEST_HOOKS;
    else process.env.HERALD_TEST_HOOKS = before;
  }
}
