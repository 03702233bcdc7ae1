/**
 * `herald reshard --shards N`: rewrites a stopped data dir's LMDB environments for another shard
 * count, so a data dir can move to a host with more (or fewer) cores with nothing lost.
 *
 * Keys are placed by hash modulo the shard count (hash.ts), so every record is read from the old
 * environments and written to the environment of the shard that owns it under the new count:
 *
 *   push/devices, push/device-interests, push/interests, push/users, push/reports
 *                                  the device's shard (the device id part of the key); copied as bytes
 *   push/report-counts             recounted from the moved reports per new shard; what the old
 *                                  counts held beyond their records goes to the publish's home shard
 *   push/publish                   finished publishes: the parts of every old shard merged into one
 *                                  (counts summed, times min/max, user outcomes joined) on the
 *                                  publish's home shard, an empty finished part on the others, the
 *                                  retention index rebuilt; monthly usage summed onto shard 0.
 *                                  A publish still in flight refuses the reshard (see below).
 *   webhooks/outbox, webhooks/dead entries renumbered per new shard in the order they happened;
 *                                  channel events go to the channel's shard (reload debounce holds)
 *   channels/occupied              the channel's shard
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
import { channelShardFor, deviceShardFor, shardForKey } from './shards/hash.js';
import { DataDirError, RESHARD_PLAN_FILE, lockDataDir, type DataDirIdentity } from './shards/data-dir.js';
import { decodeKey, encodeKey } from './push/keys.js';
import type { UserOutcomes } from './push/messages/publishes.js';
import { addGatewayCounts, emptyGatewayCounts } from './push/publish-results.js';
import type { CoordinatorRecord, ProgressRecord, ShardReport } from './push/shard/publishes/publish-store.js';
import type { OutboxEntry, DeadLetter } from './webhooks/outbox-store.js';

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

/** A reshard that cannot run (server running, publish in flight, unknown data); nothing was changed. */
export class ReshardError extends DataDirError {}

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

/** The databases a shard environment may hold; any other name refuses the reshard rather than drop it. */
const KNOWN_DATABASES = [
  'push/devices',
  'push/interests',
  'push/device-interests',
  'push/users',
  'push/reports',
  'push/report-counts',
  'push/publish',
  'webhooks/outbox',
  'webhooks/dead',
  'channels/occupied',
  'tenants/records',
] as const;
type DatabaseName = (typeof KNOWN_DATABASES)[number];

/** Device-keyed databases copied as bytes: which key part is the device id. */
const DEVICE_KEY_PART: Partial<Record<DatabaseName, (parts: string[]) => string | undefined>> = {
  'push/devices': (p) => p[1],
  'push/interests': (p) => p[2],
  'push/device-interests': (p) => p[1],
  'push/users': (p) => p[2],
  'push/reports': (p) => p[3],
};

const BINARY = { keyEncoding: 'binary', encoding: 'binary' } as const;
const BINARY_KEY_MSGPACK = { keyEncoding: 'binary', encoding: 'msgpack' } as const;

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
  if (process.env.HERALD_TEST_HOOKS !== '1') return Infinity;
  const value = Number(process.env[name]);
  return Number.isInteger(value) && value >= 0 ? value : Infinity;
}

/** Test hook (HERALD_TEST_HOOKS=1): milliseconds to wait once the data dir's lock is held. */
function pauseAfterLockMs(): number {
  if (process.env.HERALD_TEST_HOOKS !== '1') return 0;
  const value = Number(process.env.HERALD_RESHARD_PAUSE_AFTER_LOCK_MS);
  return Number.isInteger(value) && value > 0 ? value : 0;
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
class ShardWriter {
  private readonly pending: { db: AnyDatabase; key: Key; value: unknown }[][];
  readonly counts: Record<string, number> = {};
  private recordsLeft = testHook('HERALD_RESHARD_EXIT_AFTER_RECORDS');

  constructor(
    readonly roots: RootDatabase[],
    private readonly databases: Map<string, AnyDatabase>[],
  ) {
    this.pending = roots.map(() => []);
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

function openHandles(root: RootDatabase): Map<string, AnyDatabase> {
  const handles = new Map<string, AnyDatabase>();
  for (const name of KNOWN_DATABASES) {
    let db: AnyDatabase;
    if (name in DEVICE_KEY_PART) db = root.openDB(name, BINARY) as AnyDatabase;
    else if (name === 'push/publish' || name === 'push/report-counts') db = root.openDB(name, BINARY_KEY_MSGPACK) as AnyDatabase;
    else db = root.openDB({ name }) as AnyDatabase;
    handles.set(name, db);
  }
  return handles;
}

function copyBytes(value: unknown): Buffer {
  const bytes = value as Uint8Array;
  return Buffer.from(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

interface ReportTally {
  instanceId: string;
  publishId: string;
  /** Counts of the old shards together. */
  oldTotal: { delivered: number; opened: number };
  /** Records per new shard. */
  perShard: Map<number, { delivered: number; opened: number }>;
}

async function copyShards(dataDir: string, from: number, to: number): Promise<Record<string, number>> {
  const oldRoots: RootDatabase[] = [];
  const newRoots: RootDatabase[] = [];
  try {
    for (let i = 0; i < from; i++) {
      if (!existsSync(shardDir(dataDir, i))) throw new ReshardError(`${shardDir(dataDir, i)} is missing; herald.json says ${from} shards`);
      oldRoots.push(openShardDatabase(shardDir(dataDir, i)));
    }
    for (const [i, root] of oldRoots.entries()) {
      for (const name of root.getKeys({})) {
        if (!(KNOWN_DATABASES as readonly unknown[]).includes(name)) {
          throw new ReshardError(`shard-${i} holds a database this version does not know (${String(name)}); refusing to reshard rather than drop it`);
        }
      }
    }
    const oldDbs = oldRoots.map(openHandles);
    checkPublishesSettled(oldDbs);

    for (let j = 0; j < to; j++) newRoots.push(openShardDatabase(join(dataDir, NEW_DIR, `shard-${j}`)));
    const writer = new ShardWriter(newRoots, newRoots.map(openHandles));
    const expected: Record<string, number> = {};
    const count = (name: string): void => {
      expected[name] = (expected[name] ?? 0) + 1;
    };

    // Device-keyed records: copied as bytes to the device's shard; reports tallied for their counts.
    const tallies = new Map<string, ReportTally>();
    const tallyOf = (instanceId: string, publishId: string): ReportTally => {
      const id = JSON.stringify([instanceId, publishId]);
      let tally = tallies.get(id);
      if (!tally) tallies.set(id, (tally = { instanceId, publishId, oldTotal: { delivered: 0, opened: 0 }, perShard: new Map() }));
      return tally;
    };
    for (const [name, devicePart] of Object.entries(DEVICE_KEY_PART)) {
      for (const dbs of oldDbs) {
        for (const { key, value } of dbs.get(name)!.getRange({})) {
          const parts = decodeKey(key as Uint8Array);
          const deviceId = devicePart(parts);
          if (deviceId === undefined) throw new ReshardError(`${name}: malformed key ${JSON.stringify(parts)}`);
          const shard = deviceShardFor(deviceId, to);
          writer.put(shard, name, copyBytes(key), copyBytes(value));
          count(name);
          if (name === 'push/reports') {
            const perShard = tallyOf(parts[0]!, parts[1]!).perShard;
            const c = perShard.get(shard) ?? { delivered: 0, opened: 0 };
            if (parts[2] === 'delivery') c.delivered++;
            else if (parts[2] === 'open') c.opened++;
            perShard.set(shard, c);
          }
        }
      }
    }

    // Report counts: recounted per new shard; what old counts held beyond their records stays, on the home shard.
    for (const dbs of oldDbs) {
      for (const { key, value } of dbs.get('push/report-counts')!.getRange({})) {
        const [instanceId, publishId] = decodeKey(key as Uint8Array) as [string, string];
        const c = value as { delivered?: number; opened?: number };
        const tally = tallyOf(instanceId, publishId);
        tally.oldTotal.delivered += c.delivered ?? 0;
        tally.oldTotal.opened += c.opened ?? 0;
      }
    }
    for (const tally of tallies.values()) {
      const home = shardForKey(tally.publishId, to);
      let delivered = 0;
      let opened = 0;
      for (const c of tally.perShard.values()) {
        delivered += c.delivered;
        opened += c.opened;
      }
      const extra = { delivered: Math.max(0, tally.oldTotal.delivered - delivered), opened: Math.max(0, tally.oldTotal.opened - opened) };
      if (extra.delivered > 0 || extra.opened > 0 || tally.perShard.size === 0) {
        const c = tally.perShard.get(home) ?? { delivered: 0, opened: 0 };
        tally.perShard.set(home, { delivered: c.delivered + extra.delivered, opened: c.opened + extra.opened });
      }
      for (const [shard, c] of tally.perShard) writer.put(shard, 'push/report-counts', encodeKey([tally.instanceId, tally.publishId]), c);
    }

    copyPublishes(oldDbs, writer, to);
    copyWebhooks(oldDbs, writer, to, count);

    for (const dbs of oldDbs) {
      for (const { key, value } of dbs.get('channels/occupied')!.getRange({})) {
        const parts = Array.isArray(value) ? (value as unknown[]) : (JSON.parse(String(key)) as unknown[]);
        writer.put(channelShardFor(String(parts[0]), String(parts[1]), to), 'channels/occupied', key, value);
        count('channels/occupied');
      }
    }
    // Admin API tenants live on shard 0 (tenants/shard-handlers.ts), which every layout has.
    for (const dbs of oldDbs) {
      for (const { key, value } of dbs.get('tenants/records')!.getRange({})) {
        writer.put(0, 'tenants/records', key, value);
        count('tenants/records');
      }
    }
    writer.commitAll();

    // Every record of a database copied one for one is in the new environments.
    for (const [name, n] of Object.entries(expected)) {
      let written = 0;
      for (const root of newRoots) written += root.openDB(name, BINARY).getCount();
      if (written !== n) throw new ReshardError(`reshard check failed: ${name} has ${n} records in the old shards and ${written} in the new ones`);
    }
    return writer.counts;
  } finally {
    await Promise.all([...newRoots, ...oldRoots].map((root) => root.close()));
  }
}

/**
 * A publish still in flight has a per-shard scan position that means nothing under another
 * count, so it refuses the reshard. A finished part whose acknowledgement from the coordinator
 * was not stored yet (`open`) is settled once the coordinator's record is finalized.
 */
function checkPublishesSettled(oldDbs: Map<string, AnyDatabase>[]): void {
  const finalized = new Set<string>();
  const open: string[] = [];
  const busy = new Set<string>();
  for (const [shard, dbs] of oldDbs.entries()) {
    for (const { key, value } of dbs.get('push/publish')!.getRange({})) {
      const [kind, publishId] = decodeKey(key as Uint8Array) as [string, string];
      if (kind === 'coord' && (value as CoordinatorRecord).finalized) finalized.add(publishId);
      else if (kind === 'open') open.push(publishId);
      else if (kind === 'coord-open') busy.add(`${publishId} on shard-${shard}: not finalized`);
      else if (kind === 'progress' && (value as ProgressRecord).state !== 'finished') busy.add(`${publishId} on shard-${shard}: ${(value as ProgressRecord).state}`);
    }
  }
  for (const publishId of open) if (!finalized.has(publishId)) busy.add(`${publishId}: part not reported`);
  if (busy.size > 0) {
    const some = [...busy].slice(0, 5).join('; ');
    throw new ReshardError(
      `${busy.size} publish(es) are still in flight (${some}${busy.size > 5 ? ', …' : ''}); ` +
        'start the server with its current shard count, let them finish, stop it and reshard then',
    );
  }
}

function union(lists: readonly (readonly string[])[]): string[] {
  return [...new Set(lists.flat())].sort();
}

/** Finished publishes: one merged part on the home shard, an empty finished part on the others. */
function copyPublishes(oldDbs: Map<string, AnyDatabase>[], writer: ShardWriter, to: number): void {
  const parts = new Map<string, ProgressRecord[]>();
  const coordinated = new Set<string>();
  const usage = new Map<string, { instanceId: string; month: string; notifications: number }>();
  for (const dbs of oldDbs) {
    for (const { key, value } of dbs.get('push/publish')!.getRange({})) {
      const decoded = decodeKey(key as Uint8Array);
      const [kind, id] = decoded as [string, string];
      if (kind === 'progress') {
        const list = parts.get(id) ?? [];
        list.push(value as ProgressRecord);
        parts.set(id, list);
      } else if (kind === 'coord') {
        coordinated.add(id);
      } else if (kind === 'usage') {
        const month = decoded[2]!;
        const entry = usage.get(JSON.stringify([id, month])) ?? { instanceId: id, month, notifications: 0 };
        entry.notifications += value as number;
        usage.set(JSON.stringify([id, month]), entry);
      } else if (kind !== 'done' && kind !== 'job' && kind !== 'open') {
        // done: rebuilt below; job and open: left by a settled publish whose ack was not stored, needed no more.
        throw new ReshardError(`push/publish: unknown record kind ${JSON.stringify(kind)}`);
      }
    }
  }
  for (const [publishId, list] of parts) {
    const merged = mergeParts(list);
    const home = shardForKey(publishId, to);
    const reports: Record<number, ShardReport> = {};
    for (let j = 0; j < to; j++) {
      const part = j === home ? merged : emptyPart(merged);
      writer.put(j, 'push/publish', encodeKey(['progress', publishId]), part);
      writer.put(j, 'push/publish', encodeKey(['done', String(Math.max(0, Math.floor(part.finishedAt ?? 0))).padStart(13, '0'), publishId]), true);
      reports[j] = {
        publishId,
        shard: j,
        recipients: part.recipients,
        gateways: part.gateways,
        ...(part.users ? { users: { withDevices: part.users.withDevices, deliveredToGateway: part.users.deliveredToGateway } } : {}),
        startedAt: part.startedAt,
        finishedAt: part.finishedAt ?? part.updatedAt,
      };
    }
    if (coordinated.has(publishId)) {
      writer.put(home, 'push/publish', encodeKey(['coord', publishId]), { parts: reports, finalized: true } satisfies CoordinatorRecord);
    }
  }
  for (const { instanceId, month, notifications } of usage.values()) {
    writer.put(0, 'push/publish', encodeKey(['usage', instanceId, month]), notifications);
  }
}

function mergeParts(list: ProgressRecord[]): ProgressRecord {
  const first = list[0]!;
  const gateways = emptyGatewayCounts();
  let recipients = 0;
  let startedAt: number | null = null;
  let finishedAt: number | null = null;
  let updatedAt = 0;
  for (const part of list) {
    addGatewayCounts(gateways, part.gateways);
    recipients += part.recipients;
    if (part.startedAt !== null) startedAt = startedAt === null ? part.startedAt : Math.min(startedAt, part.startedAt);
    if (part.finishedAt !== null) finishedAt = finishedAt === null ? part.finishedAt : Math.max(finishedAt, part.finishedAt);
    updatedAt = Math.max(updatedAt, part.updatedAt);
  }
  const merged: ProgressRecord = {
    ...first,
    state: 'finished',
    startedAt,
    finishedAt,
    updatedAt,
    recipients,
    gateways,
    position: null,
    reported: true,
  };
  if (list.some((p) => p.cancelled)) merged.cancelled = true;
  else delete merged.cancelled;
  if (first.users) {
    const outcomes: UserOutcomes[] = list.map((p) => p.users ?? { withDevices: [], deliveredToGateway: [] });
    merged.users = {
      targets: first.users.targets,
      withDevices: union(outcomes.map((o) => o.withDevices)),
      deliveredToGateway: union(outcomes.map((o) => o.deliveredToGateway)),
    };
  }
  return merged;
}

function emptyPart(merged: ProgressRecord): ProgressRecord {
  const part: ProgressRecord = { ...merged, recipients: 0, gateways: emptyGatewayCounts() };
  if (merged.users) part.users = { targets: merged.users.targets, withDevices: [], deliveredToGateway: [] };
  return part;
}

/** Outbox and dead letters, renumbered per new shard in the order the events happened. */
function copyWebhooks(
  oldDbs: Map<string, AnyDatabase>[],
  writer: ShardWriter,
  to: number,
  count: (name: string) => void,
): void {
  const shardOf = (entry: OutboxEntry): number => {
    const channel = entry.event?.channel;
    if (entry.target.kind === 'channel' && typeof channel === 'string') return channelShardFor(entry.target.appId, channel, to);
    return shardForKey(entry.id, to);
  };
  const dead: { shard: number; letter: DeadLetter }[] = [];
  const outbox: { shard: number; entry: OutboxEntry }[] = [];
  for (const dbs of oldDbs) {
    for (const { value } of dbs.get('webhooks/dead')!.getRange({})) {
      const letter = value as DeadLetter;
      dead.push({ shard: shardOf(letter.entry), letter });
      count('webhooks/dead');
    }
    for (const { value } of dbs.get('webhooks/outbox')!.getRange({})) {
      const entry = value as OutboxEntry;
      outbox.push({ shard: shardOf(entry), entry });
      count('webhooks/outbox');
    }
  }
  const seq = new Array<number>(to).fill(0);
  dead.sort((a, b) => a.letter.deadAt - b.letter.deadAt || a.letter.entry.createdAt - b.letter.entry.createdAt);
  for (const { shard, letter } of dead) {
    const next = ++seq[shard]!;
    writer.put(shard, 'webhooks/dead', next, { ...letter, entry: { ...letter.entry, seq: next } });
  }
  outbox.sort((a, b) => a.entry.createdAt - b.entry.createdAt);
  for (const { shard, entry } of outbox) {
    const next = ++seq[shard]!;
    writer.put(shard, 'webhooks/outbox', next, { ...entry, seq: next });
  }
}
