/**
 * The data dir: locked by the running process, and its identity file (`herald.json`): the
 * shard count the data was written with (keys are placed by hash modulo that count, so it
 * cannot change silently; `herald reshard` rewrites the data for another count, see
 * src/reshard.ts) and a per-installation secret used for unguessable ids. Written once, on first
 * start.
 *
 * The lock is an OS file lock (flock(2), LOCK_EX) on `<dataDir>/herald.lock`, held by an open
 * descriptor for the life of the process: the kernel releases it when the process ends, however
 * it ends (kill -9 included), so there is never a stale lock to clean up. The file holds the
 * holder's pid, for the message a second process prints. A server and `herald reshard` take the
 * same lock, so they exclude each other.
 */
import { accessSync, constants, existsSync, statSync, ftruncateSync, mkdirSync, readFileSync, writeFileSync, writeSync, renameSync, openSync, fsyncSync, closeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { flockSync } from 'fs-ext';

export interface DataDirIdentity {
  formatVersion: 1;
  shards: number;
  installSecret: string;
  createdAt: string;
}

export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

/** The lock file's name inside the data dir. */
export const LOCK_FILE = 'herald.lock';

/** The plan file of a `herald reshard` under way (src/reshard.ts); while it exists the data dir is not served. */
export const RESHARD_PLAN_FILE = 'reshard.json';

/** The data dir's lock, held until released or until the process ends. */
export interface DataDirLock {
  /** Closes the descriptor, which releases the lock (the server never does: it holds it for life). */
  release(): void;
}

/** A file-system failure as an operator reads it: the errno code, what was attempted, the path. */
function fsError(err: unknown, doing: string, path: string): DataDirError {
  const code = (err as NodeJS.ErrnoException).code ?? 'error';
  const why =
    code === 'EACCES' || code === 'EPERM'
      ? ': permission denied (the user running Herald needs read and write access)'
      : code === 'EROFS'
        ? ': read-only file system'
        : code === 'ENOTDIR' || code === 'EEXIST'
          ? ': a file stands where a directory is expected'
          : '';
  return new DataDirError(`data dir ${path}: cannot ${doing} (${code})${why}`);
}

/**
 * mkdir -p. Not `mkdirSync(dir, { recursive: true })`: on a file system that answers ENOENT
 * under an existing parent (procfs) Node's recursive mkdir loops forever.
 */
function makeDir(dir: string): void {
  try {
    mkdirSync(dir);
    return;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && statSync(dir).isDirectory()) return;
    if (code !== 'ENOENT' || dirname(dir) === dir || existsSync(dirname(dir))) throw err;
  }
  makeDir(dirname(dir));
  mkdirSync(dir);
}

/**
 * Takes the data dir's lock for this process, or throws naming the process that holds it
 * (`whatToDo` ends that message). The dir must exist. Exclusive against every other open of
 * the lock file, in this process too (flock locks belong to the open file description).
 */
export function lockDataDir(dataDir: string, whatToDo = 'stop it first, or give this one a data dir of its own (dataDir, or HERALD_DATA_DIR); each node of a cluster needs its own'): DataDirLock {
  const file = join(dataDir, LOCK_FILE);
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDWR | constants.O_CREAT, 0o600);
  } catch (err) {
    throw fsError(err, `create ${file}`, dataDir);
  }
  try {
    flockSync(fd, 'exnb');
  } catch (err) {
    closeSync(fd);
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EAGAIN' && code !== 'EWOULDBLOCK') throw fsError(err, `lock ${file}`, dataDir);
    let holder = '';
    try {
      holder = readFileSync(file, 'utf8').trim();
    } catch {
      // Unreadable: the message goes without the pid.
    }
    throw new DataDirError(`data dir ${dataDir} is in use by another Herald process${/^\d+$/.test(holder) ? ` (pid ${holder})` : ''}: ${whatToDo}`);
  }
  ftruncateSync(fd, 0);
  writeSync(fd, `${process.pid}\n`, 0);
  let held = true;
  return {
    release: () => {
      if (!held) return;
      held = false;
      closeSync(fd);
    },
  };
}

/** Fails with the path when an existing shard environment cannot be written (LMDB would fail later, less clearly). */
function checkShardDirs(dataDir: string, shards: number): void {
  for (let i = 0; i < shards; i++) {
    for (const path of [join(dataDir, `shard-${i}`), join(dataDir, `shard-${i}`, 'data.mdb'), join(dataDir, `shard-${i}`, 'lock.mdb')]) {
      if (!existsSync(path)) continue;
      try {
        accessSync(path, constants.R_OK | constants.W_OK);
      } catch (err) {
        throw fsError(err, `write ${path}`, dataDir);
      }
    }
  }
}

/**
 * Creates and locks the data dir, creates its identity on first use and checks the shard count
 * afterwards. Throws DataDirError with the path and the errno code when the dir cannot be used.
 * The server holds the lock for the life of the process; a tool that prepares a data dir for a
 * server it starts afterwards (the push benchmark's seeder) passes `releaseLock`.
 */
export function openDataDir(dataDir: string, shards: number, options: { releaseLock?: boolean } = {}): DataDirIdentity {
  try {
    makeDir(dataDir);
  } catch (err) {
    throw fsError(err, 'create it', dataDir);
  }
  const lock = lockDataDir(dataDir);
  try {
    return identityOf(dataDir, shards);
  } finally {
    if (options.releaseLock) lock.release();
  }
}

/** The data dir's identity, created on first use; checks the shard count and an unfinished reshard. */
function identityOf(dataDir: string, shards: number): DataDirIdentity {
  checkShardDirs(dataDir, shards);
  const file = join(dataDir, 'herald.json');
  let existing: DataDirIdentity | undefined;
  try {
    existing = JSON.parse(readFileSync(file, 'utf8')) as DataDirIdentity;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new DataDirError(`cannot read ${file}: ${(err as Error).message}`);
    }
  }
  if (existsSync(join(dataDir, RESHARD_PLAN_FILE))) {
    let plan: { to?: number } = {};
    try {
      plan = JSON.parse(readFileSync(join(dataDir, RESHARD_PLAN_FILE), 'utf8')) as { to?: number };
    } catch {
      // An unreadable plan still means a reshard is under way.
    }
    throw new DataDirError(
      `data dir ${dataDir} has an unfinished reshard (${RESHARD_PLAN_FILE}); ` +
        `run \`herald reshard --shards ${plan.to ?? '<n>'}\` again to finish it, then start.`,
    );
  }
  if (existing) {
    if (existing.shards !== shards) {
      throw new DataDirError(
        `data dir ${dataDir} was created with ${existing.shards} shards; this start asks for ${shards}. ` +
          `To move it to ${shards} shards, stop every server using it and run \`herald reshard --shards ${shards}\` ` +
          `(with the same --config / HERALD_DATA_DIR); or start with shards=${existing.shards} (HERALD_SHARDS=${existing.shards}). ` +
          'Without "shards" in the config the count is this machine\'s cores − 1, so a data dir moved to a machine with ' +
          'another number of cores asks for another count: set "shards" explicitly or reshard.',
      );
    }
    return existing;
  }
  const identity: DataDirIdentity = {
    formatVersion: 1,
    shards,
    installSecret: randomBytes(32).toString('hex'),
    createdAt: new Date().toISOString(),
  };
  const tmp = `${file}.tmp`;
  try {
    writeFileSync(tmp, JSON.stringify(identity, null, 2) + '\n', { mode: 0o600 });
    const fd = openSync(tmp, 'r');
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, file);
  } catch (err) {
    throw fsError(err, `write ${file}`, dataDir);
  }
  return identity;
}
