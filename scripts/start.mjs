/**
 * `npm start [-- <herald options>]`: builds dist/ only when the sources changed since the last
 * build (or it was never built), then runs Herald in this process, so signals (SIGTERM,
 * SIGHUP) reach it. A production install (`npm ci --omit=dev` with a built dist/) never builds.
 */
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { buildState, writeStamp } from './build-state.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const state = buildState(root);
if (state !== 'current') {
  let tsc;
  try {
    tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  } catch {
    process.stderr.write(
      `herald: dist/ is ${state === 'missing' ? 'missing' : 'older than the sources'} and TypeScript is not installed ` +
        '(a production install: npm ci --omit=dev). Build on a machine with the dev dependencies (npm ci && npm run build) and copy dist/.\n',
    );
    process.exit(1);
  }
  process.stderr.write(`herald: dist/ is ${state === 'missing' ? 'missing' : 'out of date'}: building\n`);
  const built = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.build.json')], { stdio: 'inherit', cwd: root });
  if (built.status !== 0) process.exit(built.status ?? 1);
  const dashboard = spawnSync(process.execPath, [join(root, 'dashboard', 'build.mjs')], { stdio: 'inherit', cwd: root });
  if (dashboard.status !== 0) process.exit(dashboard.status ?? 1);
  writeStamp(root);
}
await import(pathToFileURL(join(root, 'dist', 'src', 'cli.js')).href);
