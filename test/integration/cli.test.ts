/**
 * The built CLI's own options: --version, --help listing every environment variable Herald
 * reads (found in the sources, so a new one cannot be left out), and a stray argument or an
 * unknown option answered with the usage and exit code 2, never a stack trace; a bad config
 * value ends the start with exit code 1 and the name of the field.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { CLI, REPO_ROOT } from '../helpers/herald-process.js';

function run(...args: string[]) {
  return runWith({}, ...args);
}

function runWith(env: Record<string, string>, ...args: string[]) {
  return spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000, env: { ...process.env, HERALD_CONFIG: '', ...env } });
}

/** HERALD_* names read in src/, less the test-only hooks. */
function environmentVariables(): string[] {
  const names = new Set<string>();
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir)) {
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else if (path.endsWith('.ts')) for (const m of readFileSync(path, 'utf8').matchAll(/\bHERALD_[A-Z_]+\b/g)) names.add(m[0]);
    }
  };
  walk(join(REPO_ROOT, 'src'));
  // Test hooks (read only with HERALD_TEST_HOOKS=1) are not for users.
  return [...names].filter((n) => !n.startsWith('HERALD_TEST_') && !n.startsWith('HERALD_RESHARD_') && !n.startsWith('HERALD_PUSH_TO_POSTGRES_')).sort();
}

describe('herald CLI', () => {
  it('--version prints the package version', () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-v']) {
      const r = run(flag);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toBe(`herald ${pkg.version}\n`);
    }
  });

  it('--help lists every environment variable and points at the docs', () => {
    const r = run('--help');
    expect(r.status, r.stderr).toBe(0);
    const names = environmentVariables();
    expect(names).toContain('HERALD_REDIS_SENTINELS');
    for (const name of names) expect(r.stdout, name).toContain(name);
    expect(r.stdout).toContain('docs/configuration.md');
    expect(r.stdout).toContain('--version');
  });

  it('answers a stray argument or an unknown option with the usage and exit code 2', () => {
    for (const args of [['start'], ['--port', '7000'], ['reshard', '--shards', '2', 'extra']]) {
      const r = run(...args);
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toContain('usage: herald');
      expect(r.stderr).not.toMatch(/\n\s+at /);
      expect(r.stdout).toBe('');
    }
  });

  it('refuses to start on a bad frontEndThreads with exit code 1, naming the field, before touching the data dir', () => {
    const dir = mkdtempSync(join(tmpdir(), 'herald-cli-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ frontEndThreads: 0 }));
    const r = runWith({ HERALD_DATA_DIR: join(dir, 'data'), HERALD_HOST: '127.0.0.1', HERALD_PORT: '0' }, '--config', config);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('invalid config at frontEndThreads: must be a whole number from 1 up');
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(r.stdout).not.toContain('listening on');
    expect(existsSync(join(dir, 'data'))).toBe(false);
  });
});
