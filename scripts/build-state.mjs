/**
 * Whether dist/ was built from the sources as they are now: `npm run build` writes a hash of
 * every file the build reads (src/, bench/ without its results, dashboard/, tsconfig*.json) to
 * dist/build-stamp.json, and `npm start` compares it, so starting never recompiles a current
 * build (and a production install without TypeScript can start from a built dist/).
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const INPUTS = ['src', 'bench', 'dashboard', 'tsconfig.json', 'tsconfig.build.json', 'tsconfig.client.json'];
/** What a run writes under the inputs, never read by the build: benchmark results and caches. */
const OUTPUTS = new Set(['bench/results', 'bench/.cache']);
export const STAMP = join('dist', 'build-stamp.json');

function files(root, path) {
  const full = join(root, path);
  if (!existsSync(full)) return [];
  return readdirSync(full, { withFileTypes: true }).flatMap((e) => {
    const child = join(path, e.name);
    if (OUTPUTS.has(child.replaceAll('\\', '/'))) return [];
    if (e.isDirectory()) return files(root, child);
    if (e.name === 'node_modules') return [];
    return /\.(ts|tsx|mjs|json|html|css)$/.test(e.name) ? [child] : [];
  });
}

/** Hash of the build inputs under `root`; null when there are no sources (an install of dist/ only). */
export function sourceHash(root) {
  const hash = createHash('sha256');
  let count = 0;
  for (const input of INPUTS) {
    const full = join(root, input);
    if (!existsSync(full)) continue;
    const list = input.endsWith('.json') ? [input] : files(root, input);
    for (const file of list.sort()) {
      hash.update(relative(root, join(root, file)).replaceAll('\\', '/'));
      hash.update('\0');
      hash.update(readFileSync(join(root, file)));
      hash.update('\0');
      count++;
    }
  }
  return existsSync(join(root, 'src')) && count > 0 ? hash.digest('hex') : null;
}

/** `current` (start as is), `stale` (sources changed since the build) or `missing` (never built). */
export function buildState(root) {
  const cli = join(root, 'dist', 'src', 'cli.js');
  if (!existsSync(cli)) return 'missing';
  const source = sourceHash(root);
  // Only dist/ shipped (no sources): nothing to rebuild from.
  if (source === null) return 'current';
  let stamp;
  try {
    stamp = JSON.parse(readFileSync(join(root, STAMP), 'utf8'));
  } catch {
    return 'stale';
  }
  return stamp.sourceHash === source ? 'current' : 'stale';
}

export function writeStamp(root) {
  writeFileSync(join(root, STAMP), JSON.stringify({ sourceHash: sourceHash(root), builtAt: new Date().toISOString() }) + '\n');
}
