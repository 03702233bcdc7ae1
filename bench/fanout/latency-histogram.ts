/**
 * A mergeable latency histogram: log-spaced buckets 2 % wide from 1 µs to ~100 s, so every
 * delivered frame can be recorded for the cost of one Math.log, and the load-client
 * processes can ship their histograms to the orchestrator as a short array of counts.
 * Percentiles are accurate to the bucket width (±2 %); the maximum is exact.
 */

const GROWTH = 1.02;
const LOG_GROWTH = Math.log(GROWTH);
/** Buckets up to GROWTH^BUCKETS µs ≈ 100 s. */
const BUCKETS = Math.ceil(Math.log(100e6) / LOG_GROWTH) + 1;

/** The plain-data form sent between processes. */
export interface HistogramData {
  counts: number[];
  count: number;
  /** Microseconds. */
  maxUs: number;
}

export interface LatencySummary {
  count: number;
  /** Milliseconds. */
  p50: number;
  p99: number;
  max: number;
}

export class LatencyHistogram {
  private counts = new Float64Array(BUCKETS);
  count = 0;
  /** Microseconds. */
  maxUs = 0;

  /** Records one latency in microseconds (negative values, from clock skew, count as 0). */
  record(us: number): void {
    const index = us <= 1 ? 0 : Math.min(BUCKETS - 1, Math.ceil(Math.log(us) / LOG_GROWTH));
    this.counts[index]!++;
    this.count++;
    if (us > this.maxUs) this.maxUs = us;
  }

  reset(): void {
    this.counts.fill(0);
    this.count = 0;
    this.maxUs = 0;
  }

  toData(): HistogramData {
    return { counts: Array.from(this.counts), count: this.count, maxUs: this.maxUs };
  }

  merge(data: HistogramData): void {
    for (let i = 0; i < BUCKETS; i++) this.counts[i]! += data.counts[i] ?? 0;
    this.count += data.count;
    if (data.maxUs > this.maxUs) this.maxUs = data.maxUs;
  }

  /** The upper bound of the bucket holding quantile `q` (0..1), in microseconds. */
  quantileUs(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return Math.min(this.maxUs, i === 0 ? 1 : GROWTH ** i);
    }
    return this.maxUs;
  }

  summary(): LatencySummary {
    return {
      count: this.count,
      p50: this.quantileUs(0.5) / 1000,
      p99: this.quantileUs(0.99) / 1000,
      max: this.maxUs / 1000,
    };
  }
}
