/**
 * The disk-full guard's decisions on a real file system with room to spare: which failures
 * start an episode (ENOSPC, EDQUOT; EIO only when little is free), what a write gets during
 * it, the reserve file given up and written back, and the end of the episode once space is there.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DiskFullGuard, RESERVE_BYTES, RESERVE_FILE } from '../../../src/shards/disk-full.js';
import { HeraldError } from '../../../src/errors.js';
import { until } from '../../helpers/wait.js';

const dirs: string[] = [];
const guards: DiskFullGuard[] = [];
afterEach(() => {
  for (const g of guards.splice(0)) g.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function guard(): { guard: DiskFullGuard; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'herald-diskfull-unit-'));
  dirs.push(dir);
  const g = new DiskFullGuard(dir, '/data/dir', 0);
  guards.push(g);
  return { guard: g, dir };
}

/** An error as lmdb-js throws it: an Error with a numeric errno code. */
function lmdbError(code: number, message: string): Error {
  return Object.assign(new Error(message), { code });
}

describe('DiskFullGuard', () => {
  it('writes its reserve file at start', () => {
    const { dir } = guard();
    expect(statSync(join(dir, RESERVE_FILE)).size).toBe(RESERVE_BYTES);
  });

  it('takes an EIO with plenty of room for what it is: not a full disk', () => {
    const { guard: g } = guard();
    expect(g.noteCause(lmdbError(5, 'Input/output error'))).toBe(false);
    expect(g.isFull).toBe(false);
    expect(() => g.refuseWrite()).not.toThrow();
    expect(g.noteCause(new Error('not an errno'))).toBe(false);
  });

  it('starts an episode on ENOSPC: writes refused with STORAGE_FULL naming the data dir, the reserve given up', async () => {
    const { guard: g, dir } = guard();
    expect(g.noteCause(lmdbError(28, 'No space left on device'))).toBe(true);
    expect(g.isFull).toBe(true);
    expect(existsSync(join(dir, RESERVE_FILE))).toBe(false);
    expect(g.figures()).toMatchObject({ dataDir: '/data/dir', full: true, episodes: 1, refusedWrites: 1 });
    // A commit failure as lmdb-js reports it: the errno comes in `commitError`.
    const commitFailure = Object.assign(new Error('Commit failed (see commitError for details)'), { commitError: Promise.reject(lmdbError(122, 'Disk quota exceeded')) });
    expect(await g.noteFailure(commitFailure)).toBe(true);
    expect(g.figures().episodes).toBe(1);
    // Within the recheck interval the refusal holds, with the catalogue's 507.
    let refused: unknown;
    try {
      g.refuseWrite();
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(HeraldError);
    expect((refused as HeraldError).status).toBe(507);
    expect((refused as HeraldError).message).toContain('/data/dir');
  });

  it('ends the episode once space is there, with the reserve written back', async () => {
    const { guard: g, dir } = guard();
    g.noteCause(lmdbError(28, 'No space left on device'));
    // This file system has room: a write after the on-request recheck interval is accepted.
    const accepted = (): boolean => {
      try {
        g.refuseWrite();
        return true;
      } catch {
        return false;
      }
    };
    await until(accepted, 'writes accepted again', 5_000);
    expect(g.isFull).toBe(false);
    expect(statSync(join(dir, RESERVE_FILE)).size).toBe(RESERVE_BYTES);
    g.noteCause(lmdbError(28, 'No space left on device'));
    expect(g.figures()).toMatchObject({ full: true, episodes: 2 });
  });
});
