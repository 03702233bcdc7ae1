/**
 * Shard LMDB environments in temporary folders for unit tests, opened with the server's settings
 * (src/shards/storage.ts); each closes and is deleted after its test.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RootDatabase } from 'lmdb';
import { afterEach } from 'vitest';
import { openShardDatabase } from '../../src/shards/storage.js';

/** Call at the top of a test file; the function it answers opens a fresh environment. */
export function temporaryShardDatabases(name: string): () => RootDatabase {
  const opened: { dir: string; root: RootDatabase }[] = [];
  afterEach(async () => {
    for (const { dir, root } of opened.splice(0)) {
      await root.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
  return () => {
    const dir = mkdtempSync(join(tmpdir(), `herald-${name}-`));
    const root = openShardDatabase(join(dir, 'shard-0'));
    opened.push({ dir, root });
    return root;
  };
}
