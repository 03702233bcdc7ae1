import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultMaxConnections, fdHeadroom, openFileLimit } from '../../../src/config/fd-limit.js';
import { loadConfig } from '../../../src/config/load.js';

const dir = mkdtempSync(join(tmpdir(), 'herald-fd-limit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function limitsFile(line: string): string {
  const file = join(dir, `limits-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, `Limit                     Soft Limit           Hard Limit           Units\nMax processes             63590                63590                processes\n${line}\n`);
  return file;
}

describe('the default node-wide maxConnections', () => {
  const budget = { shards: 1, pushConcurrency: 256, webhookConcurrencyPerUrl: 4 };

  it('reads the soft open-file limit from /proc/self/limits', () => {
    expect(openFileLimit(limitsFile('Max open files            20000                20000                files'))).toBe(20000);
    expect(openFileLimit(limitsFile('Max open files            unlimited            unlimited            files'))).toBeNull();
    expect(openFileLimit(join(dir, 'missing'))).toBeNull();
  });

  it('is the limit less the headroom, never below half the limit, none when unknown', () => {
    expect(fdHeadroom(budget)).toBe(128 + 32 + 256 + 32);
    expect(defaultMaxConnections(budget, 20000)).toBe(20000 - 448);
    expect(defaultMaxConnections(budget, 1024)).toBe(1024 - 448);
    expect(defaultMaxConnections(budget, 256)).toBe(128);
    expect(defaultMaxConnections(budget, null)).toBeNull();
  });

  it('is filled in by loadConfig unless configured', () => {
    expect(loadConfig({ env: {}, overrides: { maxConnections: 7 } }).maxConnections).toBe(7);
    expect(loadConfig({ env: {}, overrides: { maxConnections: null } }).maxConnections).toBeNull();
    const derived = loadConfig({ env: {}, overrides: { shards: 1 } }).maxConnections;
    expect(derived).toBe(defaultMaxConnections(budget));
  });
});
