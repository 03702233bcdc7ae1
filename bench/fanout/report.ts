/**
 * The fan-out run's record: the JSON written to bench/results/<timestamp>.json and the table
 * printed at the end, Herald beside the ceiling with the Herald/ceiling ratio per figure.
 */
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import type { Metric } from './scenarios.js';

export interface TargetOutcome {
  metrics?: Metric[];
  error?: string;
  /** Wall time of the scenario on this target, ms. */
  elapsedMs: number;
}

export interface ScenarioRecord {
  name: string;
  description: string;
  herald?: TargetOutcome;
  ceiling?: TargetOutcome;
}

export interface MachineInfo {
  nproc: number;
  cpuModel: string;
  memGiB: number;
  node: string;
  /** Soft and hard RLIMIT_NOFILE of this process (children inherit them). */
  openFilesSoft: string;
  openFilesHard: string;
  loadAverageAtStart: string;
}

export interface RunRecord {
  startedAt: string;
  command: string;
  quick: boolean;
  options: Record<string, unknown>;
  machine: MachineInfo;
  scenarios: ScenarioRecord[];
}

export function machineInfo(): MachineInfo {
  let soft = '?';
  let hard = '?';
  try {
    const m = /Max open files\s+(\S+)\s+(\S+)/.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (m) [soft, hard] = [m[1]!, m[2]!];
  } catch {
    // Not Linux: leave unknown.
  }
  let load = '?';
  try {
    load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    // Not Linux.
  }
  return {
    nproc: cpus().length,
    cpuModel: cpus()[0]?.model ?? '?',
    memGiB: Math.round(totalmem() / 1024 ** 3),
    node: process.version,
    openFilesSoft: soft,
    openFilesHard: hard,
    loadAverageAtStart: load,
  };
}

/** A figure as printed: thousands separated, fewer decimals as it grows, `-` when absent. */
export function format(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '-';
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/**
 * One scenario's block of a comparison table: a title row, then every figure of either outcome
 * as [name, unit, left, right, ratio], the ratio (`left/right` or `right/left`) only where the
 * figure has a good direction.
 */
export function comparisonRows(name: string, left: TargetOutcome | undefined, right: TargetOutcome | undefined, ratioOf: 'left/right' | 'right/left'): string[][] {
  const rows: string[][] = [[name, '', left?.error ? 'ERROR' : '', right?.error ? 'ERROR' : '', '']];
  const names: Metric[] = [];
  for (const m of [...(left?.metrics ?? []), ...(right?.metrics ?? [])]) {
    if (!names.some((n) => n.name === m.name)) names.push(m);
  }
  for (const m of names) {
    const l = left?.metrics?.find((x) => x.name === m.name)?.value;
    const r = right?.metrics?.find((x) => x.name === m.name)?.value;
    const [top, bottom] = ratioOf === 'left/right' ? [l, r] : [r, l];
    const ratio = top !== undefined && bottom !== undefined && bottom !== 0 && m.better !== 'none' ? (top / bottom).toFixed(2) : '';
    rows.push([`  ${m.name}`, m.unit, format(l), format(r), ratio]);
  }
  return rows;
}

/** Fixed-width text of a table whose first row is the header: the first `leftAligned` columns padded right, the rest left. */
export function formatTable(rows: string[][], leftAligned = 2): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const lines = rows.map((r) => r.map((cell, i) => (i >= leftAligned ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  ').trimEnd());
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return lines.join('\n');
}

/** The results as fixed-width text: one block per scenario. */
export function renderTable(run: RunRecord): string {
  const rows: string[][] = [['scenario / figure', 'unit', 'herald', 'ceiling', 'herald/ceiling']];
  for (const s of run.scenarios) rows.push(...comparisonRows(s.name, s.herald, s.ceiling, 'left/right'));
  const lines = [formatTable(rows)];
  const errors = run.scenarios.flatMap((s) =>
    (['herald', 'ceiling'] as const).flatMap((t) => (s[t]?.error ? [`${s.name} on ${t}: ${s[t]!.error!.split('\n')[0]}`] : [])),
  );
  if (errors.length) lines.push('', 'errors:', ...errors.map((e) => `  ${e}`));
  return lines.join('\n');
}
