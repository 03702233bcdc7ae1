/**
 * A shard's answer to a full disk (worker side only). LMDB reports a full disk as a failed
 * commit: ENOSPC, EDQUOT, or EIO (a short write while the file grows). Without care that
 * failure surfaces as a rejected promise nobody holds and the worker dies, again and again.
 *
 * An episode starts when a commit fails that way (EIO counts only while the file system has
 * less than FULL_BELOW_BYTES free). During it the shard refuses the request types its areas
 * list as `storageWrites` with STORAGE_FULL (507) before they touch LMDB; reads and deletes
 * go on. Deletes need a few free pages too (LMDB copies on write), so each shard keeps a
 * reserve file of RESERVE_BYTES in its directory and removes it when the episode starts; the
 * deletes of the episode write into that room. While full, the shard checks the free space every
 * RECHECK_MS (and on refused writes); once RESUME_ABOVE_BYTES are free it writes its reserve
 * again and accepts writes. One warning per episode names the data dir; the figures go to
 * /metrics (`herald_storage_full`, `herald_storage_full_episodes_total`,
 * `herald_storage_writes_refused_total`).
 */
import { closeSync, fsyncSync, openSync, rmSync, statSync, statfsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import type { DiskFullFigures } from './shard-metrics.js';

/** Size of each shard's reserve file (`<dataDir>/shard-<n>/space-reserve`), bytes. */
export const RESERVE_BYTES = 2 * 1024 * 1024;
/** An EIO from a commit means a full disk while less than this is free, bytes. */
const FULL_BELOW_BYTES = 1024 * 1024;
/** Writes are accepted again once this much is free (the reserve is rewritten from it), bytes. */
export const RESUME_ABOVE_BYTES = RESERVE_BYTES + 2 * 1024 * 1024;
/** How often a full shard looks at the free space, ms. */
const RECHECK_MS = 1000;
/** Refused writes look at the free space at most this often, ms. */
const RECHECK_ON_REQUEST_MS = 100;
/** The reserve file's name inside the shard's directory. */
export const RESERVE_FILE = 'space-reserve';

const ENOSPC = 28;
const EDQUOT = 122;
const EIO = 5;
const FULL_CODES = new Set<unknown>([ENOSPC, EDQUOT, EIO, 'ENOSPC', 'EDQUOT', 'EIO']);
const ERRNO_NAMES = new Map<unknown, string>([
  [ENOSPC, 'ENOSPC'],
  [EDQUOT, 'EDQUOT'],
  [EIO, 'EIO'],
]);


/** The errno of a storage failure (an lmdb-js error code, or a Node errno string). */
function errnoOf(err: unknown): unknown {
  return err && typeof err === 'object' ? (err as { code?: unknown }).code : undefined;
}

/** True when `err` is an lmdb-js error carrying an errno of a write that found no room. */
export function isWriteSpaceError(err: unknown): boolean {
  return err instanceof Error && FULL_CODES.has(errnoOf(err));
}

export class DiskFullGuard {
  private full = false;
  private episodes = 0;
  private refusedWrites = 0;
  private freeBytes = -1;
  private checkedAt = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly reserveFile: string;

  constructor(
    /** The shard's LMDB directory (the reserve lives there; statfs looks at its file system). */
    private readonly shardDir: string,
    /** The data dir, as the log line and the metric name it. */
    private readonly dataDir: string,
    private readonly shardIndex: number,
  ) {
    this.reserveFile = join(shardDir, RESERVE_FILE);
    if (!this.writeReserve()) this.startEpisode('the space reserve could not be written');
  }

  get isFull(): boolean {
    return this.full;
  }

  /** Throws STORAGE_FULL while the disk is full (for a request that would write). */
  refuseWrite(): void {
    if (!this.full) return;
    if (Date.now() - this.checkedAt >= RECHECK_ON_REQUEST_MS) this.recheck();
    if (!this.full) return;
    this.refusedWrites++;
    throw this.error();
  }

  /**
   * Looks at a failure from LMDB: true (and an episode started, if none is on) when it is a
   * full disk. An `lmdb` commit failure carries its cause in `commitError` (a promise).
   */
  async noteFailure(err: unknown): Promise<boolean> {
    let cause = err;
    const commitError = (err as { commitError?: Promise<unknown> } | undefined)?.commitError;
    if (commitError && typeof commitError.then === 'function') cause = await commitError.then(() => err, (e: unknown) => e);
    return this.noteCause(cause);
  }

  /** The synchronous half of noteFailure, for an errno error in hand. */
  noteCause(cause: unknown): boolean {
    if (!isWriteSpaceError(cause)) return false;
    const code = errnoOf(cause);
    // During an episode the reserve is free room, so the free space says nothing: count it in.
    if (!this.full && (code === EIO || code === 'EIO') && this.lookAtFreeSpace() >= FULL_BELOW_BYTES) return false;
    if (!this.full) this.startEpisode(`a commit failed with ${ERRNO_NAMES.get(code) ?? String(code)}`);
    this.refusedWrites++;
    return true;
  }

  /** The STORAGE_FULL error, naming the data dir. */
  error(): HeraldError {
    return new HeraldError(
      'STORAGE_FULL',
      `The disk of the data dir (${this.dataDir}) is full: writes are refused until space is freed; reads and deletes still work`,
    );
  }

  figures(): DiskFullFigures {
    return { dataDir: this.dataDir, full: this.full, episodes: this.episodes, refusedWrites: this.refusedWrites, freeBytes: this.freeBytes };
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private startEpisode(why: string): void {
    this.full = true;
    this.episodes++;
    rmSync(this.reserveFile, { force: true });
    const free = this.lookAtFreeSpace();
    log.warn('data dir disk full: writes refused until space is freed (reads and deletes go on)', {
      dataDir: this.dataDir,
      shard: this.shardIndex,
      freeBytes: free,
      resumeAboveBytes: RESUME_ABOVE_BYTES,
      cause: why,
    });
    this.timer ??= setInterval(() => this.recheck(), RECHECK_MS);
    this.timer.unref();
  }

  /** Ends the episode once enough is free and the reserve is back in place. */
  private recheck(): void {
    if (!this.full) return;
    if (this.lookAtFreeSpace() < RESUME_ABOVE_BYTES) return;
    if (!this.writeReserve()) return;
    this.full = false;
    this.close();
    log.info('data dir has space again: writes accepted', { dataDir: this.dataDir, shard: this.shardIndex, freeBytes: this.lookAtFreeSpace() });
  }

  private lookAtFreeSpace(): number {
    this.checkedAt = Date.now();
    try {
      const s = statfsSync(this.shardDir);
      this.freeBytes = Number(s.bavail) * Number(s.bsize);
    } catch {
      // Unknown: keep the last figure.
    }
    return this.freeBytes;
  }

  /** Writes the reserve file (zeros, synced) unless it is there at full size; false when there is no room. */
  private writeReserve(): boolean {
    try {
      if (statSync(this.reserveFile).size === RESERVE_BYTES) return true;
    } catch {
      // Missing: write it.
    }
    let fd: number | undefined;
    try {
      fd = openSync(this.reserveFile, 'w', 0o600);
      const chunk = Buffer.alloc(256 * 1024);
      for (let written = 0; written < RESERVE_BYTES; written += chunk.length) writeSync(fd, chunk);
      fsyncSync(fd);
      return true;
    } catch (err) {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
      rmSync(this.reserveFile, { force: true });
      if (!isWriteSpaceError(err)) log.warn('could not write the space reserve', { file: this.reserveFile, error: String(err) });
      return false;
    } finally {
      if (fd !== undefined) closeSync(fd);
    }
  }
}

let installed: DiskFullGuard | undefined;

/** Creates this worker's guard (one per shard worker), which storageWriteFailed reports to. */
export function installDiskFullGuard(shardDir: string, dataDir: string, shardIndex: number): DiskFullGuard {
  installed = new DiskFullGuard(shardDir, dataDir, shardIndex);
  return installed;
}

/**
 * For background writes (webhook outbox, publish records): true when `err` is a full disk, which
 * the guard has counted and logged once for its episode; false for any other failure, which the
 * caller logs.
 */
export async function storageWriteFailed(err: unknown): Promise<boolean> {
  return installed ? installed.noteFailure(err) : false;
}

/** Logs a failed background write at error level, unless it was a full disk (logged once per episode). */
export function logWriteFailure(err: unknown, message: string, fields: Record<string, unknown> = {}): void {
  void storageWriteFailed(err).then((full) => {
    if (!full) log.error(message, { ...fields, error: describeError(err) });
  });
}
