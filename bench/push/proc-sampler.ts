/**
 * A sampler that records the peaks of a process's resident memory while a publish runs,
 * over the shared /proc reader of bench/proc-stats.ts.
 */
import { readMemoryKb } from '../proc-stats.js';

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
