/**
 * `herald reshard --shards N`: rewrites a stopped data dir's LMDB environments for another shard
 * count, so a data dir can move to a host with more (or fewer) cores with nothing lost.
 *
 * Keys are placed by hash modulo the shard count (hash.ts), so every record is read from the old
 * environments and written to the environment of the shard that owns it under the new count.
 * Which databases there are and where each record goes is each area's to say: its layout,
 * declared next to its store (shards/shard-layout.ts; listed in shard-layouts.ts). This file
 * knows no area: it reads the old environments, lets each layout check them (a publish in
 * flight refuses the reshard) and copy them, and checks that every database a layout copies
 * one for one has as many records in the new environments as in the old ones.
 *
 * Safety, in this order:
 * 1. The data dir's lock (`herald.lock`, the flock a running server holds for its life, see
 *    data-dir.ts) is taken first and held to the end: a running server refuses the reshard,
 *    naming its pid, and a server started meanwhile refuses to start. Then `reshard.json` (the
 *    plan, phase `copy`) is written: from then on a server start is refused even once the lock
 *    is gone (data-dir.ts). As a second check, a process other than a current Herald server
 *    with a shard environment open (a live POSIX lock on a shard's lock.mdb, from /proc/locks)
 *    refuses the reshard too.
 * 2. The new environments are written beside the old ones (`reshard-new/shard-<j>`) with synced
 *    commits, counted against the old ones, closed and their directories fsynced. The old ones
 *    are only read. Interrupted here, a re-run discards `reshard-new` and copies again.
 * 3. The plan turns to phase `switch` (atomic rename, fsynced): the commit point. The old
 *    directories move to `reshard-old/`, the new ones into place, herald.json gets the new count,
 *    the plan is removed, then `reshard-old/` is deleted. Every step checks what is already done,
 *    so a re-run after an interruption finishes the switch.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Database, Key, RootDatabase } from 'lmdb';
import { openShardDatabase } from './shards/storage.js';
import { RESHARD_PLAN_FILE, lockDataDir, type DataDirIdentity } from './shards/data-dir.js';
import { ReshardError, type DatabaseDeclaration, type DatabaseEncoding, type NewShards, type OldShards, type ShardLayout, type StoredRecord } from './shards/shard-layout.js';
import { SHARD_LAYOUTS } from './shard-layouts.js';
import { testHookNumber } from './test-hooks.js';

const NEW_DIR = 'reshard-new';
const OLD_DIR = 'reshard-old';
type AnyDatabase = Database<unknown, Key>;
/** Records written per synced transaction. */
const WRITE_BATCH = 10_000;

export interface ReshardPlan {
  formatVersion: 1;
  from: number;
  to: number;
  phase: 'copy' | 'switch';
  startedAt: string;
}

export interface ReshardOptions {
  dataDir: string;
  /** The new shard count (1–64, as the `shards` config field). */
  shards: number;
  /** Progress lines for the operator. */
  log?: (line: string) => void;
}

export interface ReshardResult {
  from: number;
  to: number;
  /** Records written to the new environments, by database name (empty when nothing was to do). */
  records: Record<string, number>;
}

/** How the reshard opens a database of each encoding (as its store does). */
const OPEN_OPTIONS: Record<DatabaseEncoding, { keyEncoding?: 'binary'; encoding?: 'binary' | 'msgpack' }> = {
  bytes: { keyEncoding: 'binary', encoding: 'binary' },
  'binary-keys': { keyEncoding: 'binary', encoding: 'msgpack' },
  default: {},
};

function shardDir(dataDir: string, index: number): string {
  return join(dataDir, `shard-${index}`);
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes a JSON file atomically (temp file, fsync, rename, fsync of the directory). */
function writeJsonAtomic(dataDir: string, name: string, value: unknown): void {
  const file = join(dataDir, name);
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, JSON.stringify(value, null, 2) + '\n', { mode: 0o600 });
  fsyncPath(tmp);
  renameSync(tmp, file);
  fsyncPath(dataDir);
}

function readJson<T>(file: string): T | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as T;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new ReshardError(`cannot read ${file}: ${(err as Error).message}`);
  }
}

/** The plan of an interrupted reshard in this data dir, if any. */
export function readReshardPlan(dataDir: string): ReshardPlan | undefined {
  return readJson<ReshardPlan>(join(dataDir, RESHARD_PLAN_FILE));
}

/**
 * Process ids other than ours holding a POSIX lock on a shard's `lock.mdb`: LMDB keeps a shared
 * lock on it for as long as an environment is open, so a process with the data open that does
 * not take `herald.lock` (a Herald from before that lock, an LMDB tool) shows up here. Linux
 * only (/proc/locks); elsewhere nothing is found.
 */
export function processesHoldingDataDir(dataDir: string, shards: number): number[] {
  let locks: string;
  try {
    locks = readFileSync('/proc/locks', 'utf8');
  } catch {
    return [];
  }
  const wanted = new Set<string>();
  for (let i = 0; i < shards; i++) {
    const lockFile = join(shardDir(dataDir, i), 'lock.mdb');
    if (!existsSync(lockFile)) continue;
    const { dev, ino } = statSync(lockFile);
    const major = ((dev >> 8) & 0xfff) | (Math.floor(dev / 2 ** 32) & ~0xfff);
    const minor = (dev & 0xff) | ((dev >> 12) & ~0xff);
    wanted.add(`${major.toString(16).padStart(2, '0')}:${minor.toString(16).padStart(2, '0')}:${ino}`);
  }
  const pids = new Set<number>();
  for (const line of locks.split('\n')) {
    // "1: POSIX  ADVISORY  READ 12952 fe:00:2147294 0 0" (blocked waiters are marked "->").
    const fields = line.trim().split(/\s+/);
    if (fields[1] === '->') fields.splice(1, 1);
    const pid = Number(fields[4]);
    const file = fields[5];
    if (!file || !Number.isInteger(pid) || pid === process.pid) continue;
    const [maj, min, ino] = file.split(':');
    if (maj === undefined || min === undefined || ino === undefined) continue;
    if (wanted.has(`${maj.padStart(2, '0')}:${min.padStart(2, '0')}:${ino}`)) pids.add(pid);
  }
  return [...pids];
}

/** Test hook (HERALD_TEST_HOOKS=1): end the process abruptly after this many records / renames. */
function testHook(name: 'HERALD_RESHARD_EXIT_AFTER_RECORDS' | 'HERALD_RESHARD_EXIT_AFTER_RENAMES'): number {
  return testHookNumber(name, 0) ?? Infinity;
}

/** Test hook (HERALD_TEST_HOOKS=1): milliseconds to wait once the data dir's lock is held. */
function pauseAfterLockMs(): number {
  return testHookNumber('HERALD_RESHARD_PAUSE_AFTER_LOCK_MS') ?? 0;
}

function killNow(): never {
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable');
}

/** Rewrites `dataDir` for `shards` shards, or finishes an interrupted reshard; see the module comment. */
export async function reshard(options: ReshardOptions): Promise<ReshardResult> {
  const { dataDir, shards: to } = options;
  const log = options.log ?? (() => undefined);
  if (!Number.isInteger(to) || to < 1 || to > 64) throw new ReshardError(`--shards must be an integer from 1 to 64, got ${to}`);
  if (!existsSync(join(dataDir, 'herald.json'))) throw new ReshardError(`${dataDir} is not a Herald data dir (no herald.json)`);
  // The server's lock (a DataDirError naming the holder when a server runs), held to the end.
  const lock = lockDataDir(dataDir, 'stop the server first');
  try {
    const pause = pauseAfterLockMs();
    if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
    return await reshardLocked(dataDir, to, log);
  } finally {
    lock.release();
  }
}

/** reshard() once the data dir's lock is held. */
async function reshardLocked(dataDir: string, to: number, log: (line: string) => void): Promise<ReshardResult> {
  const identity = readJson<DataDirIdentity>(join(dataDir, 'herald.json'));
  if (!identity) throw new ReshardError(`${dataDir} is not a Herald data dir (no herald.json)`);
  const existing = readReshardPlan(dataDir);
  if (existing?.phase === 'switch') {
    if (existing.to !== to) {
      throw new ReshardError(
        `an interrupted reshard from ${existing.from} to ${existing.to} shards is past its commit point; ` +
          `run \`herald reshard --shards ${existing.to}\` to finish it first`,
      );
    }
    log(`finishing the interrupted reshard from ${existing.from} to ${existing.to} shards`);
    switchOver(dataDir, existing, identity);
    return { from: existing.from, to, records: {} };
  }
  const from = identity.shards;
  if (from === to) {
    // An interrupted copy changed nothing of the old data: dropping it is all there is to do.
    rmSync(join(dataDir, NEW_DIR), { recursive: true, force: true });
    rmSync(join(dataDir, OLD_DIR), { recursive: true, force: true });
    if (existing) {
      rmSync(join(dataDir, RESHARD_PLAN_FILE), { force: true });
      fsyncPath(dataDir);
      log(`the interrupted copy to ${existing.to} shards is discarded`);
    }
    log(`data dir has ${to} shards; nothing to do`);
    return { from, to, records: {} };
  }
  if (existing) log(`an interrupted copy to ${existing.to} shards is discarded; copying again`);

  const plan: ReshardPlan = { formatVersion: 1, from, to, phase: 'copy', startedAt: new Date().toISOString() };
  writeJsonAtomic(dataDir, RESHARD_PLAN_FILE, plan);
  const holders = processesHoldingDataDir(dataDir, from);
  if (holders.length > 0) {
    if (!existing) rmSync(join(dataDir, RESHARD_PLAN_FILE), { force: true });
    throw new ReshardError(`data dir ${dataDir} is in use by process ${holders.join(', ')}; stop the server first`);
  }
  rmSync(join(dataDir, OLD_DIR), { recursive: true, force: true });
  rmSync(join(dataDir, NEW_DIR), { recursive: true, force: true });
  mkdirSync(join(dataDir, NEW_DIR));

  log(`copying ${from} shard(s) into ${to}`);
  let records: Record<string, number>;
  try {
    records = await copyShards(dataDir, from, to);
  } catch (err) {
    // Nothing of the old data changed: leave no plan behind, so the server starts as before.
    rmSync(join(dataDir, NEW_DIR), { recursive: true, force: true });
    rmSync(join(dataDir, RESHARD_PLAN_FILE), { force: true });
    fsyncPath(dataDir);
    throw err;
  }
  for (let j = 0; j < to; j++) fsyncPath(join(dataDir, NEW_DIR, `shard-${j}`));
  fsyncPath(join(dataDir, NEW_DIR));

  const committed: ReshardPlan = { ...plan, phase: 'switch' };
  writeJsonAtomic(dataDir, RESHARD_PLAN_FILE, committed);
  switchOver(dataDir, committed, identity);
  log(`done: ${to} shard(s); ${Object.entries(records).map(([name, n]) => `${name} ${n}`).join(', ')}`);
  return { from, to, records };
}

/** Phase `switch`: idempotent renames, then herald.json, then the plan goes. */
function switchOver(dataDir: string, plan: ReshardPlan, identity: DataDirIdentity): void {
  let renamesLeft = testHook('HERALD_RESHARD_EXIT_AFTER_RENAMES');
  const rename = (src: string, dst: string): void => {
    if (renamesLeft-- <= 0) killNow();
    renameSync(src, dst);
  };
  const oldDir = join(dataDir, OLD_DIR);
  const newDir = join(dataDir, NEW_DIR);
  mkdirSync(oldDir, { recursive: true });
  // Every old directory moves out before any new one moves in: after that, shard-<i> is new.
  for (let i = 0; i < plan.from; i++) {
    const parked = join(oldDir, `shard-${i}`);
    if (!existsSync(parked) && existsSync(shardDir(dataDir, i))) rename(shardDir(dataDir, i), parked);
  }
  fsyncPath(oldDir);
  fsyncPath(dataDir);
  for (let j = 0; j < plan.to; j++) {
    const ready = join(newDir, `shard-${j}`);
    if (!existsSync(ready)) {
      if (!existsSync(shardDir(dataDir, j))) throw new ReshardError(`reshard: ${ready} is missing and ${shardDir(dataDir, j)} too`);
      continue; // moved in before the interruption
    }
    if (existsSync(shardDir(dataDir, j))) throw new ReshardError(`reshard: ${shardDir(dataDir, j)} is in the way of ${ready}`);
    rename(ready, shardDir(dataDir, j));
  }
  fsyncPath(dataDir);
  if (identity.shards !== plan.to) writeJsonAtomic(dataDir, 'herald.json', { ...identity, shards: plan.to });
  rmSync(join(dataDir, RESHARD_PLAN_FILE), { force: true });
  fsyncPath(dataDir);
  rmSync(oldDir, { recursive: true, force: true });
  rmSync(newDir, { recursive: true, force: true });
}

/** Buffers writes per new environment and commits them in synced batches. */
class ShardWriter implements NewShards {
  private readonly pending: { db: AnyDatabase; key: Key; value: unknown }[][];
  readonly counts: Record<string, number> = {};
  private recordsLeft = testHook('HERALD_RESHARD_EXIT_AFTER_RECORDS');

  constructor(
    readonly roots: RootDatabase[],
    private readonly databases: Map<string, AnyDatabase>[],
  ) {
    this.pending = roots.map(() => []);
  }

  get count(): number {
    return this.roots.length;
  }

  put(shard: number, name: string, key: Key, value: unknown): void {
    const db = this.databases[shard]!.get(name);
    if (!db) throw new Error(`reshard: no handle for ${name}`);
    this.pending[shard]!.push({ db, key, value });
    this.counts[name] = (this.counts[name] ?? 0) + 1;
    if (this.pending[shard]!.length >= WRITE_BATCH) this.commit(shard);
  }

  commit(shard: number): void {
    const batch = this.pending[shard]!;
    if (batch.length === 0) return;
    this.pending[shard] = [];
    this.roots[shard]!.transactionSync(() => {
      for (const { db, key, value } of batch) db.putSync(key, value);
    });
    this.recordsLeft -= batch.length;
    if (this.recordsLeft <= 0) killNow();
  }

  commitAll(): void {
    for (let j = 0; j < this.roots.length; j++) this.commit(j);
  }
}

/** Every database the layouts declare, opened on one environment as its store opens it. */
function openHandles(root: RootDatabase, declared: readonly DatabaseDeclaration[]): Map<string, AnyDatabase> {
  const handles = new Map<string, AnyDatabase>();
  for (const { name, encoding } of declared) handles.set(name, root.openDB({ name, ...OPEN_OPTIONS[encoding] }) as AnyDatabase);
  return handles;
}

function copyBytes(value: unknown): Buffer {
  const bytes = value as Uint8Array;
  return Buffer.from(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

/** The old environments as the layouts read them: binary keys and values copied out (lmdb reuses its buffers). */
function oldShardsOf(oldDbs: Map<string, AnyDatabase>[], declared: readonly DatabaseDeclaration[]): OldShards {
  const encodings = new Map(declared.map((d) => [d.name, d.encoding]));
  return {
    count: oldDbs.length,
    *records(shard: number, name: string): Iterable<StoredRecord> {
      const db = oldDbs[shard]?.get(name);
      if (!db) throw new Error(`reshard: no handle for ${name} on shard-${shard}`);
      const encoding = encodings.get(name);
      for (const { key, value } of db.getRange({})) {
        if (encoding === 'default') yield { key, value };
        else yield { key: copyBytes(key), value: encoding === 'bytes' ? copyBytes(value) : value };
      }
    },
  };
}

async function copyShards(dataDir: string, from: number, to: number, layouts: readonly ShardLayout[] = SHARD_LAYOUTS): Promise<Record<string, number>> {
  const declared = layouts.flatMap((l) => l.databases);
  const oldRoots: RootDatabase[] = [];
  const newRoots: RootDatabase[] = [];
  try {
    for (let i = 0; i < from; i++) oldRoots.push(openOldShard(dataDir, i, from));
    refuseUnknownDatabases(oldRoots, declared);
    const old = oldShardsOf(oldRoots.map((root) => openHandles(root, declared)), declared);
    for (const layout of layouts) layout.check?.(old);

    for (let j = 0; j < to; j++) newRoots.push(openShardDatabase(join(dataDir, NEW_DIR, `shard-${j}`)));
    const writer = new ShardWriter(newRoots, newRoots.map((root) => openHandles(root, declared)));
    for (const layout of layouts) layout.copy(old, writer);
    writer.commitAll();

    checkCopiedOneForOne(oldRoots, newRoots, declared);
    return writer.counts;
  } finally {
    await Promise.all([...newRoots, ...oldRoots].map((root) => root.close()));
  }
}

function openOldShard(dataDir: string, index: number, from: number): RootDatabase {
  if (!existsSync(shardDir(dataDir, index))) throw new ReshardError(`${shardDir(dataDir, index)} is missing; herald.json says ${from} shards`);
  return openShardDatabase(shardDir(dataDir, index));
}

/** A database no layout declares refuses the reshard rather than be dropped. */
function refuseUnknownDatabases(oldRoots: RootDatabase[], declared: readonly DatabaseDeclaration[]): void {
  const known = new Set<unknown>(declared.map((d) => d.name));
  for (const [i, root] of oldRoots.entries()) {
    for (const name of root.getKeys({})) {
      if (!known.has(name)) {
        throw new ReshardError(`shard-${i} holds a database this version does not know (${String(name)}); refusing to reshard rather than drop it`);
      }
    }
  }
}

/** Every record of a database copied one for one is in the new environments. */
function checkCopiedOneForOne(oldRoots: RootDatabase[], newRoots: RootDatabase[], declared: readonly DatabaseDeclaration[]): void {
  const total = (roots: RootDatabase[], name: string): number => roots.reduce((n, root) => n + root.openDB(name, OPEN_OPTIONS.bytes).getCount(), 0);
  for (const { name, oneForOne } of declared) {
    if (!oneForOne) continue;
    const n = total(oldRoots, name);
    const written = total(newRoots, name);
    if (written !== n) throw new ReshardError(`reshard check failed: ${name} has ${n} records in the old shards and ${written} in the new ones`);
  }
}
