/**
 * A PostgreSQL fan-out scan as ScanSteps: each query brings a batch of steps, which `next()`
 * then answers synchronously (no promise per device, as LMDB), and the next batch's query is
 * sent as soon as one arrives, so the database reads it while the caller handles this one.
 */
import type { ScanStep, ScanSteps } from '../device-store.js';

/** The steps of one query (possibly none), and whether the scan has more. */
export interface ScanBatch {
  steps: ScanStep[];
  more: boolean;
}

export class BatchedScanSteps implements ScanSteps {
  private steps: ScanStep[] = [];
  private at = 0;
  private prefetched: Promise<ScanBatch> | undefined;
  private finished = false;

  /** @param fetch the next batch; called again only after the previous call has resolved */
  constructor(private readonly fetch: () => Promise<ScanBatch>) {}

  next(): IteratorResult<ScanStep, void> | Promise<IteratorResult<ScanStep, void>> {
    if (this.at < this.steps.length) return { done: false, value: this.steps[this.at++]! };
    if (this.finished) return { done: true, value: undefined };
    return this.refill().then(() => this.next());
  }

  /** Ends the scan: a batch being read is dropped (its failure too). */
  return(): IteratorResult<ScanStep, void> {
    this.finished = true;
    this.steps = [];
    this.at = 0;
    this.prefetched = undefined;
    return { done: true, value: undefined };
  }

  private async refill(): Promise<void> {
    const batch = await (this.prefetched ?? this.fetch());
    this.prefetched = undefined;
    if (this.finished) return;
    this.steps = batch.steps;
    this.at = 0;
    if (!batch.more) {
      this.finished = true;
      return;
    }
    const next = this.fetch();
    // Awaited by the refill that takes it; a scan ended before then drops its failure.
    next.catch(() => undefined);
    this.prefetched = next;
  }
}
