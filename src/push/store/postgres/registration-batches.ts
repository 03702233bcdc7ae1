/**
 * Group commit of device registrations: the registrations a shard receives while one batch
 * commits wait together and go out as the next batch, one statement and one (synchronous)
 * commit for all of them. A registration resolves only once its batch has committed, with the
 * answer it would have had alone: a batch is applied in the order its registrations arrived,
 * and a device id registered twice in one batch ends the batch before its second registration
 * (that one waits for it to commit), so every upsert sees the one before it. Up to
 * `concurrency` batches are written at once on their own connections.
 */
import { fnv1a32 } from '../../../shards/hash.js';
import type { DeviceRegistration, RegisterResult } from '../device-store.js';

/** The most registrations one commit carries. */
export const MAX_REGISTRATION_BATCH = 500;

/** A registration as a batch writes it: the time it was asked for is the device's `createdAt` when new. */
export interface Registration extends DeviceRegistration {
  createdAt: number;
}

/** What one registration learns from its batch: whether it created the device, and the interests it kept. */
export interface RegistrationOutcome {
  created: boolean;
  interests: string[];
}

/** Runs one batch in one transaction (one commit); resolves to one outcome per registration, in order. */
export type RegistrationWriter = (batch: readonly Registration[]) => Promise<RegistrationOutcome[]>;

interface Waiting {
  registration: Registration;
  resolve(result: RegisterResult): void;
  reject(err: unknown): void;
}

export class RegistrationBatches {
  private queue: Waiting[] = [];
  /** Batches being written. */
  private writing = 0;
  /** The devices (instance and id) of the batches being written. */
  private readonly inFlight = new Set<string>();
  private scheduled = false;

  /**
   * @param write applies one batch (one statement, its own commit)
   * @param isUnavailable a failure of the store itself, given to every registration of the
   *   batch and to every one waiting for a batch; any other failure of a batch retries its
   *   registrations one by one, so only the registration that causes it fails
   * @param concurrency batches written at once (PostgreSQL flushes their commits together)
   */
  constructor(
    private readonly write: RegistrationWriter,
    private readonly isUnavailable: (err: unknown) => boolean,
    private readonly concurrency: number,
  ) {}

  register(registration: Registration): Promise<RegisterResult> {
    return new Promise<RegisterResult>((resolve, reject) => {
      this.queue.push({ registration, resolve, reject });
      // After the current task: the registrations that arrive with this one share its batch.
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.startBatches();
        });
      }
    });
  }

  private startBatches(): void {
    while (this.writing < this.concurrency && this.queue.length > 0) {
      const batch = this.takeBatch();
      if (batch.length === 0) return;
      const keys = batch.map((w) => keyOf(w.registration));
      for (const key of keys) this.inFlight.add(key);
      this.writing++;
      void this.commit(batch).finally(() => {
        for (const key of keys) this.inFlight.delete(key);
        this.writing--;
        this.startBatches();
      });
    }
  }

  /**
   * The longest prefix of the queue, at most MAX_REGISTRATION_BATCH, without a device
   * registered twice or being written by another batch.
   */
  private takeBatch(): Waiting[] {
    const seen = new Set<string>();
    let end = 0;
    while (end < this.queue.length && end < MAX_REGISTRATION_BATCH) {
      const key = keyOf(this.queue[end]!.registration);
      if (seen.has(key) || this.inFlight.has(key)) break;
      seen.add(key);
      end++;
    }
    return this.queue.splice(0, end);
  }

  private async commit(batch: Waiting[]): Promise<void> {
    try {
      const outcomes = await this.write(batch.map((w) => w.registration));
      batch.forEach((w, k) => w.resolve(resultOf(w.registration, outcomes[k]!)));
    } catch (err) {
      if (this.isUnavailable(err)) {
        // The store is away: the registrations waiting behind this batch would wait for a
        // writer and then fail alike, so they are answered now (each one's answer stays
        // within one call's bounds, never a queue of them).
        for (const w of [...batch, ...this.queue.splice(0)]) w.reject(err);
        return;
      }
      if (batch.length === 1) {
        for (const w of batch) w.reject(err);
        return;
      }
      for (const w of batch) await this.commit([w]);
    }
  }
}

function keyOf(registration: Registration): string {
  return `${registration.instanceId}\u0000${registration.deviceId}`;
}

function resultOf(registration: Registration, outcome: RegistrationOutcome): RegisterResult {
  return { id: registration.deviceId, initialInterestSet: outcome.created ? [] : outcome.interests, created: outcome.created };
}

/**
 * The batch as one statement's parameters: parallel arrays, sorted by (instance, device) so
 * that two nodes' batches lock rows in the same order (no deadlock); `order` gives each
 * registration's row in the sorted arrays.
 */
export function registrationParameters(batch: readonly Registration[]): { values: unknown[][]; order: number[] } {
  const sorted = batch.map((r, k) => ({ r, k })).sort((a, b) => compare(a.r.instanceId, b.r.instanceId) || compare(a.r.deviceId, b.r.deviceId));
  const order = new Array<number>(batch.length);
  sorted.forEach(({ k }, row) => (order[k] = row));
  const rs = sorted.map(({ r }) => r);
  return {
    order,
    values: [
      rs.map((r) => r.instanceId),
      rs.map((r) => r.deviceId),
      rs.map((r) => fnv1a32(r.deviceId)),
      rs.map((r) => r.platform),
      rs.map((r) => r.token),
      rs.map((r) => r.bundleIdentifier ?? null),
      rs.map((r) => (r.metadata === undefined ? null : JSON.stringify(r.metadata))),
      rs.map((r) => r.createdAt),
    ],
  };
}

/** Any order every node shares does for the lock order: UTF-16 code units. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
