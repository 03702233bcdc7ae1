/**
 * The background purge of retired push namespaces (store/namespaces.ts) on one shard: a batch of
 * PURGE_BATCH records per transaction, the event loop let go between batches, so that deleting
 * an instance with millions of devices never holds the shard's other requests for long. Runs
 * at start-up (a purge cut short by a stop resumes) and after every retirement; a failure (the
 * store away) is retried after PURGE_RETRY_MS.
 */
import { log } from '../../log.js';
import { setPushPurgesPending } from '../../shards/shard-counters.js';
import type { PushNamespaces } from '../store/namespaces.js';

/** Records removed per transaction. */
export const PURGE_BATCH = 500;
/** Wait after a failed step before trying again (ms). */
const PURGE_RETRY_MS = 1000;

export class NamespacePurge {
  private running: Promise<void> | undefined;
  private again = false;
  private closed = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly namespaces: PushNamespaces,
    private readonly shardIndex: number,
  ) {}

  /** Purges every pending namespace, now or once the pass under way ends. */
  wake(): void {
    if (this.closed) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.pass().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  /** Stops between two batches; what is left goes on at the next start. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    await this.running;
  }

  private async pass(): Promise<void> {
    try {
      const pending = await this.namespaces.pending();
      setPushPurgesPending(pending.length);
      for (const [i, namespace] of pending.entries()) {
        let batches = 0;
        while (!this.closed && !(await this.namespaces.purgeStep(namespace, PURGE_BATCH))) {
          batches++;
          await new Promise((resolve) => setImmediate(resolve));
        }
        if (this.closed) return;
        setPushPurgesPending(pending.length - i - 1);
        log.info('records of a deleted push instance purged', { shard: this.shardIndex, batches: batches + 1 });
      }
    } catch (err) {
      if (this.closed) return;
      log.warn('purge of a deleted push instance failed; retrying', { shard: this.shardIndex, error: String(err) });
      this.retryTimer = setTimeout(() => this.wake(), PURGE_RETRY_MS).unref();
    }
  }
}
