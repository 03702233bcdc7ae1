/**
 * The container image recipe (Dockerfile), checked without a container engine: its build stage
 * runs the same script as CI's Debian 13 run, it is based on Node 24 on Debian 13, the paths it
 * copies and starts exist after a build and are not excluded by .dockerignore, it runs as a
 * non-root user with the data dir as a volume, and Node is PID 1 with a health check on /ready.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../helpers/herald-process.js';

interface Instruction {
  op: string;
  args: string;
}

/** The Dockerfile's instructions (continuation lines joined, comments dropped), split by stage. */
function stages(): Instruction[][] {
  const text = readFileSync(join(REPO_ROOT, 'Dockerfile'), 'utf8').replace(/\\\n/g, ' ');
  const out: Instruction[][] = [];
  for (const line of text.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith('#')) continue;
    const [, op, args] = /^(\S+)\s+(.*)$/.exec(trimmed)!;
    if (op!.toUpperCase() === 'FROM') out.push([]);
    out[out.length - 1]!.push({ op: op!.toUpperCase(), args: args!.replace(/\s+/g, ' ').trim() });
  }
  return out;
}

const all = (stage: Instruction[], op: string): string[] => stage.filter((i) => i.op === op).map((i) => i.args);
const one = (stage: Instruction[], op: string): string => {
  const found = all(stage, op);
  expect(found, op).toHaveLength(1);
  return found[0]!;
};

/** .dockerignore patterns (top-level names and paths only, as this repository writes them). */
const ignored = readFileSync(join(REPO_ROOT, '.dockerignore'), 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith('#'));
const isIgnored = (path: string): boolean =>
  ignored.some((p) => path === p || path.startsWith(`${p}/`) || (p.startsWith('*.') && path.endsWith(p.slice(1))));

describe('Dockerfile', () => {
  const [build, runtime] = stages() as [Instruction[], Instruction[]];

  it('has a build stage and a runtime stage, both on Node 24 on Debian 13 (trixie) slim', () => {
    expect(stages()).toHaveLength(2);
    expect(one(build, 'FROM')).toBe('node:24-trixie-slim AS build');
    expect(one(runtime, 'FROM')).toBe('node:24-trixie-slim');
  });

  it('builds with scripts/build-on-debian.sh, the script CI runs in its Debian 13 root', () => {
    expect(one(build, 'RUN')).toBe('sh scripts/build-on-debian.sh && npm prune --omit=dev');
    const ci = readFileSync(join(REPO_ROOT, '.ci', 'debian13'), 'utf8');
    expect(ci).toMatch(/sh scripts\/build-on-debian\.sh && \$COMMAND/);
    expect(ci).toContain('COMMAND="${*:-npm test}"');
    expect(readFileSync(join(REPO_ROOT, '.ci', 'run'), 'utf8')).toMatch(/^bash \.ci\/debian13$/m);
    // The build stage's sources: everything the script and npm ci need is sent to the builder.
    expect(one(build, 'COPY')).toBe('. .');
    for (const path of ['package.json', 'package-lock.json', 'scripts/build-on-debian.sh', 'src/cli.ts', 'dashboard/build.mjs', 'tsconfig.build.json']) {
      expect(existsSync(join(REPO_ROOT, path)), path).toBe(true);
      expect(isIgnored(path), path).toBe(false);
    }
    for (const path of ['node_modules', 'dist', '.git', 'data', 'bench/results']) expect(isIgnored(path), path).toBe(true);
  });

  it('copies what a build produces and starts the built CLI with node as PID 1', () => {
    const workdir = one(runtime, 'WORKDIR');
    const copies = all(runtime, 'COPY').map((args) => /^--from=build \/build\/(\S+) (\S+)$/.exec(args)!);
    expect(copies.map((m) => m[1])).toEqual(['package.json', 'node_modules', 'dist']);
    // Each exists in the working tree after `npm ci && npm run build` (which npm test runs first).
    for (const m of copies) expect(existsSync(join(REPO_ROOT, m[1]!)), m[1]).toBe(true);
    const entry = JSON.parse(one(runtime, 'ENTRYPOINT')) as string[];
    expect(entry).toEqual(['node', '--max-semi-space-size=2', 'dist/src/cli.js']);
    expect(workdir).toBe('/opt/herald');
    expect(existsSync(join(REPO_ROOT, entry[2]!))).toBe(true);
    expect(one(runtime, 'STOPSIGNAL')).toBe('SIGTERM');
  });

  it('runs as the non-root node user with the data dir as a volume it owns', () => {
    expect(one(runtime, 'USER')).toBe('node');
    const env = one(runtime, 'ENV');
    const dataDir = /HERALD_DATA_DIR=(\S+)/.exec(env)![1];
    expect(dataDir).toBe('/var/lib/herald');
    expect(one(runtime, 'VOLUME')).toBe(dataDir);
    expect(one(runtime, 'RUN')).toBe(`mkdir -p ${dataDir} && chown node:node ${dataDir}`);
    // The RUN that gives the data dir to the user comes before USER (it needs root).
    const ops = runtime.map((i) => i.op);
    expect(ops.indexOf('RUN')).toBeLessThan(ops.indexOf('USER'));
    expect(env).toMatch(/HERALD_HOST=0\.0\.0\.0/);
    expect(one(runtime, 'EXPOSE')).toBe(/HERALD_PORT=(\d+)/.exec(env)![1]);
  });

  it('checks health on /ready of HERALD_PORT', () => {
    const check = one(runtime, 'HEALTHCHECK');
    expect(check).toMatch(/^--interval=\S+ --timeout=\S+ --start-period=\S+ --retries=\d+ CMD \[/);
    const command = JSON.parse(check.slice(check.indexOf('CMD ') + 4)) as string[];
    expect(command[0]).toBe('node');
    expect(command[2]).toContain("'/ready'");
    expect(command[2]).toContain('process.env.HERALD_PORT');
  });
});
