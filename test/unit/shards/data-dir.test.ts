/**
 * lockDataDir: the one data dir lock a server (openDataDir) and `herald reshard` take. flock
 * locks belong to the open file description, so two takers in one process exclude each other
 * as two processes do.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DataDirError, LOCK_FILE, lockDataDir, openDataDir } from '../../../src/shards/data-dir.js';

const dirs: string[] = [];
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'herald-data-dir-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('lockDataDir', () => {
  it('is exclusive until released, names the holder and ends the message with what to do', () => {
    const dir = dataDir();
    const lock = lockDataDir(dir);
    expect(readFileSync(join(dir, LOCK_FILE), 'utf8').trim()).toBe(String(process.pid));
    expect(() => lockDataDir(dir, 'stop the server first')).toThrow(
      new DataDirError(`data dir ${dir} is in use by another Herald process (pid ${process.pid}): stop the server first`),
    );
    lock.release();
    lock.release(); // twice is harmless
    lockDataDir(dir).release();
  });

  it('excludes openDataDir (a server start) while held, and the other way round', () => {
    const dir = dataDir();
    const lock = lockDataDir(dir);
    expect(() => openDataDir(dir, 1)).toThrow(/is in use by another Herald process/);
    lock.release();
    const other = dataDir();
    openDataDir(other, 1); // held for the life of this process, as a server holds it
    expect(() => lockDataDir(other)).toThrow(/is in use by another Herald process/);
  });
});
