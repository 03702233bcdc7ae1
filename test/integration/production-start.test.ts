/**
 * The production path: `npm start` runs dist/ as built, building only when the sources changed
 * (scripts/start.mjs, scripts/build-state.mjs), and a stale dist/ without TypeScript (a
 * production install, `npm ci --omit=dev`) is a clear error rather than `tsc: not found`.
 * Stand-in trees in a temp dir keep these fast: no real compile happens.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/herald-process.js';

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A tree with scripts/, one source file and a stand-in dist/src/cli.js that prints a marker. */
function standIn(): string {
  const root = mkdtempSync(join(tmpdir(), 'herald-start-'));
  dirs.push(root);
  cpSync(join(REPO_ROOT, 'scripts'), join(root, 'scripts'), { recursive: true });
  mkdirSync(join(root, 'src'));
  writeFileSync(join(root, 'src', 'cli.ts'), 'export {};\n');
  writeFileSync(join(root, 'tsconfig.json'), '{}\n');
  mkdirSync(join(root, 'dist', 'src'), { recursive: true });
  writeFileSync(join(root, 'dist', 'src', 'cli.js'), "process.stdout.write('cli ran ' + process.argv.slice(2).join(' ') + '\\n');\n");
  return root;
}

function start(root: string, ...args: string[]) {
  // A build (one test) compiles with tsc: slow on a loaded machine.
  return spawnSync(process.execPath, [join(root, 'scripts', 'start.mjs'), ...args], { cwd: root, encoding: 'utf8', timeout: 120_000 });
}

describe('npm start', () => {
  it('is scripts/start.mjs with a small young generation, and a bin entry points at the built CLI', () => {
    const pkg = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string>; bin: Record<string, string> };
    // 2 MB young-generation semi-spaces for the main thread (docs/operations.md: ~2 KB less RSS per connection).
    expect(pkg.scripts.start).toBe('node --max-semi-space-size=2 scripts/start.mjs');
    expect(pkg.bin.herald).toBe('dist/src/cli.js');
    expect(readFileSync(join(REPO_ROOT, 'src', 'cli.ts'), 'utf8').startsWith('#!/usr/bin/env node')).toBe(true);
  });

  it('does not build when dist/ is current (the repository, after npm run build)', () => {
    const stamp = join(REPO_ROOT, 'dist', 'build-stamp.json');
    const before = statSync(stamp).mtimeMs;
    const cliBefore = statSync(join(REPO_ROOT, 'dist', 'src', 'cli.js')).mtimeMs;
    const run = start(REPO_ROOT, '--help');
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toContain('usage: herald');
    expect(run.stderr).not.toContain('building');
    expect(statSync(stamp).mtimeMs).toBe(before);
    expect(statSync(join(REPO_ROOT, 'dist', 'src', 'cli.js')).mtimeMs).toBe(cliBefore);
  });

  it('says what a first build is doing, step by step, and then starts', { timeout: 240_000 }, () => {
    // A tree with TypeScript (the repository's node_modules), a one-file server and a dashboard
    // step that only marks it ran: a real build of both steps, quickly.
    const root = mkdtempSync(join(tmpdir(), 'herald-start-build-'));
    dirs.push(root);
    cpSync(join(REPO_ROOT, 'scripts'), join(root, 'scripts'), { recursive: true });
    symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'));
    mkdirSync(join(root, 'src'));
    writeFileSync(join(root, 'src', 'cli.ts'), "declare const process: { stdout: { write(text: string): void } };\nprocess.stdout.write('cli ran\\n');\n");
    writeFileSync(join(root, 'tsconfig.json'), JSON.stringify({ compilerOptions: { outDir: 'dist', rootDir: '.', module: 'nodenext', target: 'es2022', types: [] } }));
    writeFileSync(join(root, 'tsconfig.build.json'), JSON.stringify({ extends: './tsconfig.json', include: ['src'] }));
    mkdirSync(join(root, 'dashboard'));
    writeFileSync(join(root, 'dashboard', 'build.mjs'), "import { mkdirSync } from 'node:fs';\nmkdirSync('dist/dashboard', { recursive: true });\n");
    const run = start(root);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toContain('herald: dist/ is missing (first start): building it (two steps');
    expect(run.stderr).toContain('herald: building 1/2: compiling the server, 1 TypeScript files, into dist/ (tsc)');
    expect(run.stderr).toContain('herald: building 2/2: bundling the dashboard into dist/dashboard (esbuild)');
    expect(run.stderr.match(/herald: {3}done in \d+ s/g)).toHaveLength(2);
    expect(run.stdout).toContain('cli ran');
    // Built once: the next start runs it as is.
    const again = start(root);
    expect(again.stderr).not.toContain('building');
    expect(again.stdout).toContain('cli ran');
  });

  it('runs a stamped dist/ without TypeScript installed, and refuses a stale one clearly', async () => {
    const root = standIn();
    const { writeStamp } = (await import(join(REPO_ROOT, 'scripts', 'build-state.mjs'))) as { writeStamp(root: string): void };
    writeStamp(root);
    const fresh = start(root, '--config', 'x.json');
    expect(fresh.status, fresh.stderr).toBe(0);
    expect(fresh.stdout).toBe('cli ran --config x.json\n');

    writeFileSync(join(root, 'src', 'cli.ts'), 'export const changed = 1;\n');
    const stale = start(root);
    expect(stale.status).toBe(1);
    expect(stale.stdout).toBe('');
    expect(stale.stderr).toMatch(/dist\/ is older than the sources and TypeScript is not installed/);
  });

  it('does not count benchmark results as sources: a benchmark run leaves dist/ current', async () => {
    const root = standIn();
    mkdirSync(join(root, 'bench', 'results'), { recursive: true });
    writeFileSync(join(root, 'bench', 'fanout.ts'), 'export {};\n');
    const { writeStamp } = (await import(join(REPO_ROOT, 'scripts', 'build-state.mjs'))) as { writeStamp(root: string): void };
    writeStamp(root);
    writeFileSync(join(root, 'bench', 'results', 'fanout-2026-11-25.json'), '{"rows":[]}\n');
    const afterBench = start(root);
    expect(afterBench.status, afterBench.stderr).toBe(0);
    expect(afterBench.stdout).toBe('cli ran \n');

    writeFileSync(join(root, 'bench', 'fanout.ts'), 'export const changed = 1;\n');
    expect(start(root).stderr).toMatch(/dist\/ is older than the sources/);
  });

  it('runs dist/ shipped without sources (a packed install)', () => {
    const root = standIn();
    rmSync(join(root, 'src'), { recursive: true });
    const run = start(root);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toBe('cli ran \n');
  });
});
