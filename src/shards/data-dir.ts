/**
 * The data dir's identity file (`herald.json`): the shard count the data was written with
 * (keys are placed by hash modulo that count, so it cannot change silently; `herald reshard`
 * rewrites the data for another count, see reshard.ts) and a
 * per-installation secret used for unguessable ids. Written once, on first start.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync, renameSync, openSync, fsyncSync, closeSync } from 'node:fs';
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

/** The plan file of a `herald reshard` under way (src/shards/reshard.ts); while it exists the data dir is not served. */
export const RESHARD_PLAN_FILE = 'reshard.json';

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
          `(with the same --config / HERALD_DATA_DIR); or start with shards=${existing.shards} (HERALD_SHARDS=${existing.shards}).`,
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
