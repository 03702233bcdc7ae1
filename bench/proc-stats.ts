/**
 * Per-process figures from /proc (Linux only), shared by the fan-out and push benchmarks:
 * resident memory and CPU time, so a benchmark can report RSS per idle connection or per
 * publish and which process (server, its main thread, the load clients, the trigger sender,
 * the fake gateway) was saturated during a phase.
 *
 * VmRSS counts LMDB's memory-mapped pages a process has touched (RssFile) as well as its heap
 * and buffers (RssAnon); only RssAnon is memory the process holds on to, so both are kept.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Memory figures of /proc/<pid>/status, KiB. */
export interface MemoryKb {
  /** VmRSS: resident now. */
  rss: number;
  /** VmHWM: the highest VmRSS since the process started. */
  hwm: number;
  /** RssAnon: heap, stacks, buffers. */
  anon: number;
  /** RssFile: file-backed pages (LMDB maps, code). */
  file: number;
}

/** The memory figures of a process now (zeros when it is gone). */
export function readMemoryKb(pid: number): MemoryKb {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    return { rss: field('VmRSS'), hwm: field('VmHWM'), anon: field('RssAnon'), file: field('RssFile') };
  } catch {
    return { rss: 0, hwm: 0, anon: 0, file: 0 };
  }
}

/** Resident memory of a process, KiB: VmRSS and its anonymous (heap) and file-backed (mapped files, LMDB) parts. */
export interface Rss {
  total: number;
  anon: number;
  file: number;
}

/** VmRSS, RssAnon and RssFile of a process, in KiB (0 when unreadable). */
export function rssKb(pid: number): Rss {
  const { rss, anon, file } = readMemoryKb(pid);
  return { total: rss, anon, file };
}

/** utime + stime (or stime alone) from a /proc stat file, in µs (0 when unreadable). */
function statCpuUs(path: string, systemOnly = false): number {
  try {
    const text = readFileSync(path, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ticks = (systemOnly ? 0 : Number(fields[11])) + Number(fields[12]);
    return (ticks / clockTicks()) * 1e6;
  } catch {
    return 0;
  }
}

/** CPU time of a whole process (all threads), µs. */
export function processCpuUs(pid: number): number {
  return statCpuUs(`/proc/${pid}/stat`);
}

/** Kernel (system) CPU time of a whole process, µs: socket writes and reads show up here. */
export function processSystemCpuUs(pid: number): number {
  return statCpuUs(`/proc/${pid}/stat`, true);
}

/** CPU time of a process's main thread only, µs (for Herald: the uWS I/O loop). */
export function mainThreadCpuUs(pid: number): number {
  return statCpuUs(`/proc/${pid}/task/${pid}/stat`);
}

/** CPU time of each thread of a process, µs, by thread id (the main thread's id is the pid); empty when unreadable. */
export function threadCpuUs(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) out.set(Number(tid), statCpuUs(`/proc/${pid}/task/${tid}/stat`));
  return out;
}

/** Busy CPU time of the whole machine (all cores, every process), µs, from /proc/stat. */
export function machineBusyCpuUs(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    // cpu user nice system idle iowait irq softirq steal ...
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) / clockTicks()) * 1e6;
  } catch {
    return 0;
  }
}

/** A CPU snapshot of a set of processes, to turn into percentages of one core later. */
export class CpuMeter {
  private readonly start: number[];
  private readonly startAt = performance.now();

  constructor(private readonly read: () => number[]) {
    this.start = read();
  }

  /** Seconds since construction. */
  elapsedSeconds(): number {
    return (performance.now() - this.startAt) / 1000;
  }

  /** Percent of one core each reading used since construction (100 = one core busy). */
  percent(): number[] {
    const seconds = this.elapsedSeconds();
    const now = this.read();
    return now.map((v, i) => (seconds > 0 ? (v - this.start[i]!) / 1e4 / seconds : 0));
  }
}
