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

function format(value: number | undefined): string {
  if (value === undefined || Number.isNaN(value)) return '-';
  if (Math.abs(value) >= 1000) return Math.round(value).toLocaleString('en-US');
  if (Math.abs(value) >= 100) return value.toFixed(0);
  if (Math.abs(value) >= 10) return value.toFixed(1);
  return value.toFixed(2);
}

/** The results as fixed-width text: one block per scenario. */
export function renderTable(run: RunRecord): string {
  const rows: string[][] = [['scenario / figure', 'unit', 'herald', 'ceiling', 'herald/ceiling']];
  for (const s of run.scenarios) {
    rows.push([`${s.name}`, '', s.herald?.error ? 'ERROR' : '', s.ceiling?.error ? 'ERROR' : '', '']);
    const names: Metric[] = [];
    for (const m of [...(s.herald?.metrics ?? []), ...(s.ceiling?.metrics ?? [])]) {
      if (!names.some((n) => n.name === m.name)) names.push(m);
    }
    for (const m of names) {
      const h = s.herald?.metrics?.find((x) => x.name === m.name)?.value;
      const c = s.ceiling?.metrics?.find((x) => x.name === m.name)?.value;
      const ratio = h !== undefined && c !== undefined && c !== 0 && m.better !== 'none' ? (h / c).toFixed(2) : '';
      rows.push([`  ${m.name}`, m.unit, format(h), format(c), ratio]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const lines = rows.map((r) => r.map((cell, i) => (i >= 2 ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!))).join('  '));
  lines.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  const errors = run.scenarios.flatMap((s) =>
    (['herald', 'ceiling'] as const).flatMap((t) => (s[t]?.error ? [`${s.name} on ${t}: ${s[t]!.error!.split('\n')[0]}`] : [])),
  );
  if (errors.length) lines.push('', 'errors:', ...errors.map((e) => `  ${e}`));
  return lines.join('\n');
}
