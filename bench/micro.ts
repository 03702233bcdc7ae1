/**
 * `npm run bench [-- [--quick] [filter ...]]`: runs every micro-benchmark module under bench/
 * (`*.bench.ts`, each mirroring a src/ path and exporting `suite`, see micro-suite.ts) with
 * tinybench, one suite at a time, and prints ops/s (1 / mean), mean, p50 and p99 per task. A filter keeps the
 * suites whose path or task names contain it. Writes bench/results/micro-<timestamp>.json.
 * Figures only: never pass/fail.
 */
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { Bench } from 'tinybench';
import type { MicroSuite } from './micro-suite.js';

const HERE = fileURLToPath(new URL('.', import.meta.url));
const REPO_ROOT = resolve(HERE, '../..');

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { quick: { type: 'boolean', default: false } },
});
const quick = values.quick!;

interface Row {
  suite: string;
  task: string;
  /** 1 / mean latency (tinybench's throughput.mean averages per-sample rates and hides GC pauses). */
  opsPerSec: number;
  /** Milliseconds. */
  mean: number;
  p50: number;
  p99: number;
  samples: number;
}

function findSuites(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.bench.js'))
    .map((file) => join(dir, file))
    .sort();
}

function formatTime(ms: number): string {
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  if (ms >= 0.001) return `${(ms * 1000).toFixed(2)} µs`;
  return `${(ms * 1e6).toFixed(0)} ns`;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const skipped: string[] = [];
  for (const file of findSuites(HERE)) {
    const name = relative(HERE, file).replace(/\.bench\.js$/, '');
    const { suite } = (await import(pathToFileURL(file).href)) as { suite: MicroSuite };
    if (positionals.length && !positionals.some((f) => name.includes(f) || suite.source.includes(f))) continue;
    const bench = new Bench({ time: quick ? 100 : 1_000, warmupTime: quick ? 20 : 200, ...(suite.minIterations ? { iterations: suite.minIterations } : {}) });
    process.stdout.write(`${name} (${suite.source})\n`);
    const setup = await suite.setup(bench, { quick });
    if (setup && 'skip' in setup) {
      process.stdout.write(`  skipped: ${setup.skip}\n`);
      skipped.push(`${name}: ${setup.skip}`);
      continue;
    }
    try {
      await bench.run();
    } finally {
      await setup?.teardown?.();
    }
    for (const task of bench.tasks) {
      const result = task.result;
      if (!result || result.error) {
        process.stdout.write(`  ${task.name}: ERROR ${String(result?.error ?? 'no result')}\n`);
        continue;
      }
      rows.push({
        suite: name,
        task: task.name,
        opsPerSec: 1000 / result.latency.mean,
        mean: result.latency.mean,
        p50: result.latency.p50 ?? Number.NaN,
        p99: result.latency.p99 ?? Number.NaN,
        samples: result.latency.samples.length,
      });
    }
  }
  const table = [['suite', 'task', 'ops/s', 'mean', 'p50', 'p99', 'samples']];
  for (const r of rows) {
    table.push([r.suite, r.task, Math.round(r.opsPerSec).toLocaleString('en-US'), formatTime(r.mean), formatTime(r.p50), formatTime(r.p99), String(r.samples)]);
  }
  const widths = table[0]!.map((_, i) => Math.max(...table.map((row) => row[i]!.length)));
  const lines = table.map((row) => row.map((cell, i) => (i >= 2 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  '));
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  process.stdout.write(`\n${lines.join('\n')}\n`);
  if (skipped.length) process.stdout.write(`\nskipped:\n${skipped.map((s) => `  ${s}`).join('\n')}\n`);
  const resultsDir = join(REPO_ROOT, 'bench/results');
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `micro-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, JSON.stringify({ startedAt: new Date().toISOString(), quick, node: process.version, rows, skipped }, null, 2));
  process.stdout.write(`\nresults: ${file}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
