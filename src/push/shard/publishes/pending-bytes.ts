/**
 * The bound on what waits to be sent on one node's shard: the stored jobs of an instance's
 * unfinished publishes here, against `pushDelivery.maxPendingBytesPerInstance`. One publish
 * alone is never refused, however large: the bound is on what waits beside it.
 */
import { HeraldError } from '../../../errors.js';
import type { PublishJob } from '../../messages/publishes.js';
import { packedBytes, storedJob } from '../../store/publish-record-store.js';

export class PendingBytes {
  /** Bytes per instance. */
  private readonly byInstance = new Map<string, number>();
  /** Bytes of each publish counted, so it is taken off once. */
  private readonly byPublish = new Map<string, number>();

  constructor(private max: number) {}

  /** Counts a new publish's job; throws PUBLISH_BACKLOG_FULL, counting nothing, when the instance's waiting jobs would pass the bound. */
  admit(job: PublishJob): void {
    const bytes = packedBytes(storedJob(job));
    const queued = this.byInstance.get(job.instanceId) ?? 0;
    if (queued > 0 && queued + bytes > this.max) {
      throw new HeraldError('PUBLISH_BACKLOG_FULL', `The instance has ${queued} bytes of publishes waiting to be sent on a shard, over pushDelivery.maxPendingBytesPerInstance (${this.max}); retry in a second`);
    }
    this.add(job, bytes);
  }

  /** Counts a publish's job unless it is counted already (a publish resumed after a restart), without the bound. */
  track(job: PublishJob): void {
    if (!this.byPublish.has(job.publishId)) this.add(job, packedBytes(storedJob(job)));
  }

  /** The publish is finished, cancelled or was never stored: its job no longer waits. */
  release(job: PublishJob): void {
    const bytes = this.byPublish.get(job.publishId);
    if (bytes === undefined) return;
    this.byPublish.delete(job.publishId);
    const left = (this.byInstance.get(job.instanceId) ?? 0) - bytes;
    if (left > 0) this.byInstance.set(job.instanceId, left);
    else this.byInstance.delete(job.instanceId);
  }

  /** A reloaded bound; applies to the next publish. */
  reload(max: number): void {
    this.max = max;
  }

  private add(job: PublishJob, bytes: number): void {
    this.byPublish.set(job.publishId, bytes);
    this.byInstance.set(job.instanceId, (this.byInstance.get(job.instanceId) ?? 0) + bytes);
  }
}
