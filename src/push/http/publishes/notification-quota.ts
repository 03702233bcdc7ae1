/**
 * `notificationQuota` (402 above it): notifications (devices a publish is addressed to) per
 * instance per UTC month. The count lives on the shards, which count as they send: each keeps
 * its monthly total in LMDB, updated with every checkpoint, plus the sends its running
 * publishes made since. Before accepting a publish of an instance that has a quota, the main
 * thread asks every shard (`publish.usage`) and sums. So the check sees every send already
 * made; what it cannot see is the audience of publishes accepted but not yet sent, so a burst
 * of publishes can overshoot the quota by what they address. Instances without a quota cost
 * nothing.
 */
import type { PushInstanceConfig } from '../../../config/schema.js';
import { HeraldError } from '../../../errors.js';
import type { PublishesClient } from '../../clients/publishes.js';

/** Throws 402 PUBLISH_OVER_QUOTA when the instance has used its monthly notifications. */
export async function checkNotificationQuota(publishes: PublishesClient, instance: Pick<PushInstanceConfig, 'instanceId' | 'notificationQuota'>): Promise<void> {
  const quota = instance.notificationQuota;
  if (quota === null) return;
  const { month, notifications: used } = await publishes.usage(instance.instanceId);
  if (used >= quota) {
    throw new HeraldError(
      'PUBLISH_OVER_QUOTA',
      `Publishing is blocked: instance ${instance.instanceId} has sent ${used} of its ${quota} notifications for ${month} (UTC); the count resets on the 1st of the month`,
    );
  }
}
