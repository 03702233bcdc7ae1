/**
 * `npm test` sets itself up (scripts/test-setup.mjs): with Chromium, redis-server and
 * PostgreSQL installed it passes silently; when one is missing and it cannot install it (not
 * root), it stops at once with the exact command to run.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../helpers/herald-process.js';

const SCRIPT = join(REPO_ROOT, 'scripts', 'test-setup.mjs');
const asRoot = process.getuid?.() === 0;

function setup(env: Record<string, string>, asNobody = false) {
  return spawnSync(process.execPath, [SCRIPT], {
    encoding: 'utf8',
    timeout: 20_000,
    env,
    ...(asNobody ? { uid: 65534, gid: 65534 } : {}),
  });
}

describe('npm test setup', () => {
  it('passes silently when the suite has what it needs', () => {
    const run = setup({ ...(process.env as Record<string, string>) });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });

  it('stops at once with the exact apt-get command when something is missing and it cannot install it', () => {
    const started = Date.now();
    // Not root (run as nobody when the suite runs as root), no redis-server on the PATH, no
    // Chromium or PostgreSQL where named.
    const run = setup(
      { PATH: '/nonexistent', HERALD_CHROMIUM: '/nonexistent/chromium', HERALD_TEST_POSTGRES_BIN: '/nonexistent/bin' },
      asRoot,
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('the test suite needs Chromium, redis-server, PostgreSQL (initdb, pg_ctl), not installed here');
    expect(run.stderr).toContain('sudo apt-get install -y chromium redis-server postgresql');
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
