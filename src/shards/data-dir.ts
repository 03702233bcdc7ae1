/**
 * The data dir's identity file (`herald.json`): the shard count the data was written with
 * (keys are placed by hash modulo that count, so it cannot change silently) and a
 * per-installation secret used for unguessable ids. Written once, on first start.
 */
import { mkdirSync, readFileSync, writeFileSync, renameSync, openSync, fsyncSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';

export interface DataDirIdentity {
  formatVersion: 1;
  shards: number;
  installSecret: string;
  createdAt: string;
}

export class DataDirError extends Error {
  override readonly name = 'DataDirError';
}

/** Creates the data dir and its identity on first use; checks the shard count afterwards. */
export function openDataDir(dataDir: string, shards: number): DataDirIdentity {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'herald.json');
  let existing: DataDirIdentity | undefined;
  try {
    existing = JSON.parse(readFileSync(file, 'utf8')) as DataDirIdentity;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      throw new DataDirError(`cannot read ${file}: ${(err as Error).message}`);
    }
  }
  if (existing) {
    if (existing.shards !== shards) {
      throw new DataDirError(
        `data dir ${dataDir} was created with ${existing.shards} shards; this start asks for ${shards}. ` +
          `Start with shards=${existing.shards} (HERALD_SHARDS=${existing.shards}) or use a new data dir. ` +
          'Without "shards" in the config the count is this machine\'s cores − 1, so a data dir moved to a machine with ' +
          'another number of cores asks for another count: set "shards" explicitly (any count runs on any machine).',
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
  writeFileSync(tmp, JSON.stringify(identity, null, 2) + '\n', { mode: 0o600 });
  const fd = openSync(tmp, 'r');
  fsyncSync(fd);
  closeSync(fd);
  renameSync(tmp, file);
  return identity;
}
