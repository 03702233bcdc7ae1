/**
 * First step of `npm test`: the suite needs three programs from Debian's packages, which npm
 * cannot install: `chromium` (the dashboard tests drive it with playwright-core),
 * `redis-server` (the cluster tests start private servers) and `postgresql` (the push store
 * tests start private servers with its initdb and pg_ctl). When one is missing, it is installed
 * with apt-get where that can work (root on Debian); otherwise the run stops at once with the
 * exact command to run.
 *
 * HERALD_CHROMIUM names another Chromium binary (HERALD_SKIP_BROWSER=1: none needed);
 * HERALD_TEST_POSTGRES_BIN another directory holding initdb and pg_ctl.
 */
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';

function executable(path) {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name) {
  return (process.env.PATH ?? '').split(delimiter).some((dir) => dir && executable(join(dir, name)));
}

/** Debian's PostgreSQL keeps its server programs in /usr/lib/postgresql/<major>/bin. */
function postgresInstalled() {
  const named = process.env.HERALD_TEST_POSTGRES_BIN;
  if (named) return executable(join(named, 'initdb'));
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return false;
  return readdirSync(root).some((major) => executable(join(root, major, 'bin', 'initdb')));
}

/** Each needed program: how to tell it is there, and the Debian package that brings it. */
const NEEDS = [
  {
    what: 'Chromium',
    package: 'chromium',
    present: () => process.env.HERALD_SKIP_BROWSER === '1' || executable(process.env.HERALD_CHROMIUM ?? '/usr/bin/chromium'),
  },
  { what: 'redis-server', package: 'redis-server', present: () => onPath('redis-server') },
  { what: 'PostgreSQL (initdb, pg_ctl)', package: 'postgresql', present: postgresInstalled },
];

const missing = NEEDS.filter((need) => !need.present());
if (missing.length === 0) process.exit(0);

const packages = missing.map((need) => need.package).join(' ');
const names = missing.map((need) => need.what).join(', ');
const isRoot = process.getuid?.() === 0;
const debian = existsSync('/etc/debian_version') && executable('/usr/bin/apt-get');

if (!isRoot || !debian) {
  const command = `${isRoot ? '' : 'sudo '}apt-get install -y ${packages}`;
  process.stderr.write(
    `npm test: the test suite needs ${names}, not installed here.\n` +
      (debian
        ? `Run: ${command}\nthen npm test again.\n`
        : `On Debian or Ubuntu: ${command}. Elsewhere install the equivalent packages ` +
          '(HERALD_CHROMIUM names a Chromium binary, HERALD_TEST_POSTGRES_BIN the directory of initdb and pg_ctl).\n'),
  );
  process.exit(1);
}

process.stderr.write(`npm test: installing ${packages} (Debian packages the test suite needs)\n`);
const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
for (const args of [['update'], ['install', '-y', ...missing.map((need) => need.package)]]) {
  const run = spawnSync('/usr/bin/apt-get', args, { stdio: ['ignore', 'inherit', 'inherit'], env });
  if (run.status !== 0) {
    process.stderr.write(`npm test: apt-get ${args.join(' ')} failed (exit ${run.status ?? run.signal})\n`);
    process.exit(1);
  }
}
const still = missing.filter((need) => !need.present());
if (still.length > 0) {
  process.stderr.write(`npm test: still missing after apt-get: ${still.map((need) => need.what).join(', ')}\n`);
  process.exit(1);
}
