/**
 * `npm run bench:reload [-- --apps N] [--reloads N] [--change one|none|all] [--shards N]`: whether
 * config reloads (SIGHUP) keep memory. Starts the built CLI (as `npm start` runs it) with N apps
 * in its config file, then sends `--reloads` SIGHUPs one after the other, each once the previous
 * logged `config reloaded`; before each, the file is rewritten with one app's secret changed
 * (`one`), as it was (`none`) or every secret changed (`all`). Prints the resident memory
 * (VmRSS, RssAnon) every 10 reloads and 20 s after the last: memory that a reload leaks grows
 * with the count; what the allocator keeps after the first few reloads stays flat.
 * Figures only, never pass/fail.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { readMemoryKb } from '../proc-stats.js';

const { values } = parseArgs({
  options: {
    apps: { type: 'string', default: '10000' },
    reloads: { type: 'string', default: '100' },
    change: { type: 'string', default: 'one' },
    shards: { type: 'string', default: '2' },
  },
});
const APPS = Number(values.apps);
const RELOADS = Number(values.reloads);
const CHANGE = values.change as 'one' | 'none' | 'all';
const CLI = resolve(fileURLToPath(new URL('.', import.meta.url)), '../../src/cli.js');

function config(round: number): object {
  const apps = Array.from({ length: APPS }, (_, i) => {
    const id = String(i).padStart(6, '0');
    const changed = CHANGE === 'all' || (CHANGE === 'one' && i === round % APPS);
    return { id: `app-${id}`, key: `key-${id}`, secret: `secret-${id}-${changed ? round : 0}-0123456789abcdef` };
  });
  return { apps };
}

const dir = mkdtempSync(join(tmpdir(), 'herald-bench-reload-'));
const file = join(dir, 'herald.json');
let child: ChildProcess | undefined;
const rows: { step: string; rss: number; anon: number }[] = [];
const record = (step: string): void => {
  const m = readMemoryKb(child!.pid!);
  rows.push({ step, rss: m.rss / 1024, anon: m.anon / 1024 });
  process.stderr.write(`${step}: rss ${(m.rss / 1024).toFixed(0)} MB\n`);
};

try {
  writeFileSync(file, JSON.stringify(config(0)));
  child = spawn(process.execPath, ['--max-semi-space-size=2', CLI, '--config', file], {
    env: { ...process.env, HERALD_HOST: '127.0.0.1', HERALD_PORT: '0', HERALD_DATA_DIR: join(dir, 'data'), HERALD_SHARDS: values.shards, HERALD_LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let reloaded = 0;
  const waiters: (() => void)[] = [];
  // Log lines go to stderr, one per line (a chunk may end inside one).
  let partial = '';
  child.stderr!.on('data', (d: Buffer) => {
    const lines = (partial + d.toString()).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      if (line.includes('"config reloaded"')) {
        reloaded++;
        waiters.shift()?.();
      } else if (line.includes('"level":"error"') || line.includes('"level":"warn"')) process.stderr.write(`${line}\n`);
    }
  });
  child.stdout!.on('data', (d: Buffer) => {
    out = (out + d.toString()).slice(-4096);
  });
  await new Promise<void>((ok, fail) => {
    const check = (): void => {
      if (/listening on/.test(out)) ok();
    };
    child!.stdout!.on('data', check);
    child!.once('exit', (code) => fail(new Error(`herald exited with ${code}: ${out}`)));
  });
  await sleep(5000);
  record('started');
  for (let round = 1; round <= RELOADS; round++) {
    writeFileSync(file, JSON.stringify(config(round)));
    const done = new Promise<void>((ok) => waiters.push(ok));
    child.kill('SIGHUP');
    await done;
    if (round % 10 === 0 || round === 1) record(`after ${round} reloads`);
  }
  await sleep(20_000);
  record(`20 s after the last (${reloaded} reloaded)`);
} finally {
  child?.kill('SIGTERM');
  rmSync(dir, { recursive: true, force: true });
}

process.stdout.write(`\nreloads: ${APPS} apps, ${RELOADS} SIGHUPs, change ${CHANGE}, ${values.shards} shards\n\n`);
process.stdout.write(`${'step'.padEnd(36)} ${'VmRSS MB'.padStart(9)} ${'RssAnon MB'.padStart(11)}\n`);
for (const r of rows) process.stdout.write(`${r.step.padEnd(36)} ${r.rss.toFixed(0).padStart(9)} ${r.anon.toFixed(0).padStart(11)}\n`);
