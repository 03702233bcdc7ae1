/**
 * Memory and CPU of a process from /proc (Linux): a sampler that records the peaks of a
 * process's resident memory while a publish runs, and CPU-time readings to turn into
 * "percent of one core" over a phase.
 *
 * VmRSS counts LMDB's memory-mapped pages a process has touched (RssFile) as well as its heap
 * and buffers (RssAnon); only RssAnon is memory the process holds on to, so both are kept.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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

/** Peaks over a sampling period, KiB, and how many samples they come from. */
export interface MemoryPeaks {
  peakRssKb: number;
  peakAnonKb: number;
  peakFileKb: number;
  /** VmHWM at the end of the period (a lifetime peak, so it includes earlier phases). */
  hwmKb: number;
  samples: number;
}

/** Samples a process's memory every `intervalMs` until stop(). */
export class MemorySampler {
  private readonly timer: NodeJS.Timeout;
  private peaks: MemoryPeaks = { peakRssKb: 0, peakAnonKb: 0, peakFileKb: 0, hwmKb: 0, samples: 0 };

  constructor(private readonly pid: number, intervalMs = 50) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  /** Takes a last sample and returns the peaks. */
  stop(): MemoryPeaks {
    clearInterval(this.timer);
    this.sample();
    return { ...this.peaks };
  }

  private sample(): void {
    const now = readMemoryKb(this.pid);
    if (now.rss === 0) return;
    this.peaks = {
      peakRssKb: Math.max(this.peaks.peakRssKb, now.rss),
      peakAnonKb: Math.max(this.peaks.peakAnonKb, now.anon),
      peakFileKb: Math.max(this.peaks.peakFileKb, now.file),
      hwmKb: now.hwm,
      samples: this.peaks.samples + 1,
    };
  }
}

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

/** utime + stime of a process (all its threads), µs; 0 when it is gone. */
export function processCpuUs(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) / clockTicks()) * 1e6;
  } catch {
    return 0;
  }
}

/** Busy CPU time of the whole machine (every core, every process), µs. */
export function machineBusyCpuUs(): number {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
    const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
    return ((user! + nice! + system! + irq! + softirq! + (steal ?? 0)) / clockTicks()) * 1e6;
  } catch {
    return 0;
  }
}

/** CPU readings of several sources taken together; `percentSince` gives % of one core each. */
export class CpuClock {
  private readonly startedAt = performance.now();
  private readonly start: number[];

  constructor(private readonly read: () => number[]) {
    this.start = read();
  }

  /** Percent of one core per source since construction (100 = one core busy all along). */
  percentSince(): number[] {
    const seconds = (performance.now() - this.startedAt) / 1000;
    return this.read().map((value, i) => (seconds > 0 ? (value - this.start[i]!) / 1e4 / seconds : 0));
  }
}
