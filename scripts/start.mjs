/**
 * `npm start [-- <herald options>]`: builds dist/ only when the sources changed since the last
 * build (or it was never built), then runs Herald in this process, so signals (SIGTERM,
 * SIGHUP) reach it. A production install (`npm ci --omit=dev` with a built dist/) never builds.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { buildState, writeStamp } from './build-state.mjs';

/** While a build step runs, a line every this many ms says it still does. */
const PROGRESS_EVERY_MS = 10_000;

/** The .ts files under the build's `include` folders (what tsc compiles), for the progress line. */
function sourceCount(root) {
  let include = ['src'];
  try {
    include = JSON.parse(readFileSync(join(root, 'tsconfig.build.json'), 'utf8')).include ?? include;
  } catch {
    // No build config of its own: src/ alone.
  }
  let count = 0;
  for (const entry of include) {
    if (entry.endsWith('.ts')) count++;
    else {
      try {
        count += readdirSync(join(root, entry), { recursive: true }).filter((f) => String(f).endsWith('.ts')).length;
      } catch {
        // A folder the tree does not have.
      }
    }
  }
  return count;
}

/** Runs one build step, saying what it is, that it still runs, and how long it took. */
async function step(label, args) {
  const started = Date.now();
  const seconds = () => Math.round((Date.now() - started) / 1000);
  process.stderr.write(`herald: ${label}\n`);
  const ticker = setInterval(() => process.stderr.write(`herald:   … still working (${seconds()} s)\n`), PROGRESS_EVERY_MS);
  const status = await new Promise((resolveStatus) => {
    const child = spawn(process.execPath, args, { stdio: 'inherit', cwd: root });
    child.on('exit', (code) => resolveStatus(code ?? 1));
    child.on('error', () => resolveStatus(1));
  });
  clearInterval(ticker);
  if (status !== 0) process.exit(status);
  process.stderr.write(`herald:   done in ${seconds()} s\n`);
}

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
  process.stderr.write(
    `herald: dist/ is ${state === 'missing' ? 'missing (first start)' : 'out of date'}: building it (two steps; about a minute on a small machine, once)\n`,
  );
  await step(`building 1/2: compiling the server, ${sourceCount(root)} TypeScript files, into dist/ (tsc)`, [tsc, '-p', join(root, 'tsconfig.build.json')]);
  await step('building 2/2: bundling the dashboard into dist/dashboard (esbuild)', [join(root, 'dashboard', 'build.mjs')]);
  writeStamp(root);
}
await import(pathToFileURL(join(root, 'dist', 'src', 'cli.js')).href);
