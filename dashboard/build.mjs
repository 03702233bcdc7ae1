// Builds the dashboard into dist/dashboard: one JS bundle and one CSS file (no CDN, works
// offline), plus index.html. Run by `npm run build`.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, '..', 'dist', 'dashboard');
rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, 'assets'), { recursive: true });
const result = await build({
  entryPoints: { app: join(here, 'src', 'main.tsx') },
  outdir: join(out, 'assets'),
  bundle: true,
  minify: true,
  format: 'esm',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});
copyFileSync(join(here, 'index.html'), join(out, 'index.html'));
const bytes = Object.values(result.metafile.outputs).reduce((n, o) => n + o.bytes, 0);
if (process.env.DASHBOARD_BUILD_VERBOSE) process.stdout.write(`dashboard: ${bytes} bytes in dist/dashboard/assets\n`);
