/**
 * Keeps a cluster node's tenants in step with the shared store when change notices are lost:
 * pub/sub delivers at most once, so a node whose subscriber reconnected, or that was paused
 * while another node made a change, would otherwise serve the old tenant until it restarts.
 * The node remembers the store's version it has applied; on every notice, every time its
 * subscription is made again and every `checkMs`, it compares it with the store's and reads
 * only the tenants changed since (the store's change log). A store whose version went back
 * (Redis restarted without its data) is read whole.
 */
import { log } from '../log.js';
import type { TenantKind } from './tenant-record.js';
import type { SharedTenantStore } from './tenant-store.js';

/** What the sync applies changes to (the tenant registry). */
export interface TenantHolder {
  /** Reads these tenants from the store and applies those that changed. */
  refresh(tenants: readonly { kind: TenantKind; id: string }[]): Promise<void>;
  /** Reads every tenant from the store and applies the differences. */
  resync(): Promise<void>;
}

/** How often the store's version is compared with the applied one, ms. */
export const VERSION_CHECK_MS = 5000;

/** Changed tenants read from the store per round of requests. */
const REFRESH_BATCH = 500;

export class TenantSync {
  /** The store's version whose changes are all applied here. */
  private applied = 0;
  private running: Promise<void> | undefined;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private unsubscribe: (() => void) | undefined;

  constructor(
    private readonly store: SharedTenantStore,
    private readonly registry: TenantHolder,
    private readonly checkMs = VERSION_CHECK_MS,
  ) {}

  /** Before the start-up read of the store: what is read then includes every change up to this version. */
  async begin(): Promise<void> {
    this.applied = await this.store.version();
  }

  /** From now on: catches up on resubscription and every `checkMs`. */
  start(): void {
    this.unsubscribe = this.store.onResubscribed(() => void this.catchUp());
    this.timer = setInterval(() => void this.catchUp(), this.checkMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.unsubscribe?.();
  }

  /** Applies every change made since the applied version (one run at a time; a call during a run runs again after it). */
  catchUp(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        try {
          await this.step();
        } catch (err) {
          // Redis away: the next notice, resubscription or check catches up.
          log.warn('tenants: catching up with the shared store failed; retried', { error: String(err) });
          this.again = false;
        }
      } while (this.again);
      this.running = undefined;
    })();
    return this.running;
  }

  private async step(): Promise<void> {
    const now = await this.store.version();
    if (now === this.applied) return;
    if (now < this.applied) {
      log.warn('tenants: the shared store\'s version went back (its data was lost?): reading every tenant', { applied: this.applied, store: now });
      await this.registry.resync();
      this.applied = now;
      return;
    }
    const changes = await this.store.changesSince(this.applied);
    for (let i = 0; i < changes.length; i += REFRESH_BATCH) {
      const batch = changes.slice(i, i + REFRESH_BATCH);
      await this.registry.refresh(batch);
      this.applied = Math.max(this.applied, batch[batch.length - 1]!.version);
    }
  }
}
