/**
 * Retention of reports (worker side): a publish's reports and counts are removed once the
 * shard no longer keeps the publish itself (the publish retention, `pushDelivery.retentionDays`,
 * swept it). Reports of a swept publish serve nothing: the statistics endpoint answers 404 for
 * it, and new reports for it are ignored.
 */
import type { LmdbPublishStore } from '../publishes/lmdb-publish-store.js';
import type { ReportStore } from './report-store.js';

/** Publishes checked per event-loop turn, so a shard with many publishes keeps answering requests. */
const CHECKS_PER_TURN = 500;

/**
 * Removes the reports of every publish with counts on this shard that `publishes` no longer
 * holds for the same instance. Stops early once `shouldStop` answers true (the rest waits for
 * the next run); resolves to the publishes removed, with `onRemoved` called for each.
 */
export async function removeReportsOfGonePublishes(
  reports: ReportStore,
  publishes: LmdbPublishStore,
  shouldStop: () => boolean = () => false,
  onRemoved: (publishId: string) => void = () => undefined,
): Promise<number> {
  const gone: { instanceId: string; publishId: string }[] = [];
  let checked = 0;
  for (const p of reports.publishes()) {
    if (publishes.progress(p.publishId)?.instanceId !== p.instanceId) gone.push(p);
    if (++checked % CHECKS_PER_TURN === 0) {
      await new Promise((resolve) => setImmediate(resolve));
      if (shouldStop()) return 0;
    }
  }
  let removed = 0;
  for (const { instanceId, publishId } of gone) {
    if (shouldStop()) break;
    onRemoved(publishId);
    if (await reports.removePublish(instanceId, publishId, shouldStop)) removed++;
  }
  return removed;
}
