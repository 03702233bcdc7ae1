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
  /** With --repeat N > 1, the median of each figure over the runs; otherwise the one run. */
  herald?: TargetOutcome;
  ceiling?: TargetOutcome;
  /** With --repeat N > 1: every run, Herald and then the ceiling each time. */
  runs?: { herald?: TargetOutcome; ceiling?: TargetOutcome }[];
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

/** The median of a non-empty list. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * One outcome made of several runs of a scenario on one target: each figure is its median over
 * the runs that have it; an error only when every run failed. Elapsed time is summed.
 */
export function medianOutcome(outcomes: readonly TargetOutcome[]): TargetOutcome {
  const elapsedMs = outcomes.reduce((sum, o) => sum + o.elapsedMs, 0);
  const measured = outcomes.filter((o) => o.metrics);
  if (measured.length === 0) return { error: outcomes.find((o) => o.error)?.error ?? 'no run measured', elapsedMs };
  const metrics: Metric[] = [];
  for (const m of measured.flatMap((o) => o.metrics!)) {
    if (metrics.some((x) => x.name === m.name)) continue;
    const values = measured.flatMap((o) => o.metrics!.filter((x) => x.name === m.name).map((x) => x.value));
    metrics.push({ ...m, value: median(values) });
  }
  return { metrics, elapsedMs };
}

/** The smallest and largest `left/right` ratio of one figure over runs that measured both, or undefined. */
export function ratioRange(runs: readonly { left?: TargetOutcome; right?: TargetOutcome }[], name: string): [number, number] | undefined {
  const ratios: number[] = [];
  for (const { left, right } of runs) {
    const l = left?.metrics?.find((x) => x.name === name);
    const r = right?.metrics?.find((x) => x.name === name)?.value;
    if (l && l.better !== 'none' && r !== undefined && r !== 0) ratios.push(l.value / r);
  }
  return ratios.length ? [Math.min(...ratios), Math.max(...ratios)] : undefined;
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
export function comparisonRows(
  name: string,
  left: TargetOutcome | undefined,
  right: TargetOutcome | undefined,
  ratioOf: 'left/right' | 'right/left',
  runs?: readonly { left?: TargetOutcome; right?: TargetOutcome }[],
): string[][] {
  const repeated = runs !== undefined && runs.length > 1;
  const rows: string[][] = [[name, '', left?.error ? 'ERROR' : '', right?.error ? 'ERROR' : '', '', ...(repeated ? [''] : [])]];
  const names: Metric[] = [];
  for (const m of [...(left?.metrics ?? []), ...(right?.metrics ?? [])]) {
    if (!names.some((n) => n.name === m.name)) names.push(m);
  }
  for (const m of names) {
    const l = left?.metrics?.find((x) => x.name === m.name)?.value;
    const r = right?.metrics?.find((x) => x.name === m.name)?.value;
    const [top, bottom] = ratioOf === 'left/right' ? [l, r] : [r, l];
    const ratio = top !== undefined && bottom !== undefined && bottom !== 0 && m.better !== 'none' ? (top / bottom).toFixed(2) : '';
    const row = [`  ${m.name}`, m.unit, format(l), format(r), ratio];
    if (repeated) {
      const range = ratio ? ratioRange(ratioOf === 'left/right' ? runs : runs.map((x) => ({ left: x.right, right: x.left })), m.name) : undefined;
      row.push(range ? `${range[0].toFixed(2)}–${range[1].toFixed(2)}` : '');
    }
    rows.push(row);
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
  const repeated = run.scenarios.some((s) => (s.runs?.length ?? 0) > 1);
  const [left, right] = (run.options['labels'] as [string, string] | undefined) ?? ['herald', 'ceiling'];
  const header = ['scenario / figure', 'unit', left, right, `${left}/${right}`];
  if (repeated) {
    header[2] = `${left} (median)`;
    header[3] = `${right} (median)`;
    header.push('per-run ratios');
  }
  const rows: string[][] = [header];
  for (const s of run.scenarios) {
    const runs = repeated ? (s.runs ?? []).map((r) => ({ left: r.herald, right: r.ceiling })) : undefined;
    const block = comparisonRows(s.name, s.herald, s.ceiling, 'left/right', runs);
    rows.push(...(repeated && (s.runs?.length ?? 0) <= 1 ? block.map((r) => [...r, '']) : block));
  }
  const lines = [formatTable(rows)];
  const errors = run.scenarios.flatMap((s) =>
    (s.runs ?? [s]).flatMap((r, i) =>
      (['herald', 'ceiling'] as const).flatMap((t) => (r[t]?.error ? [`${s.name}${s.runs ? ` (run ${i + 1})` : ''} on ${t}: ${r[t]!.error!.split('\n')[0]}`] : [])),
    ),
  );
  if (errors.length) lines.push('', 'errors:', ...errors.map((e) => `  ${e}`));
  return lines.join('\n');
}
