/**
 * The webhooks of a publish's life, as both publish areas queue them in the webhook outbox
 * (src/webhooks/): STARTED once the publish is stored, FINISHED and, for a user publish,
 * v1.PublishToUsersAttempt once every part is finished. Queued, not sent: the outbox delivers
 * them at least once.
 */
import { instanceOfNamespace } from '../../store/namespaces.js';
import type { WebhookEmitter } from '../../../webhooks/emitter.js';
import { PLATFORMS, type Platform } from '../../platform.js';
import { addGatewayCounts, emptyGatewayCounts, userAttemptOutcome, webhookResults } from '../../publish-results.js';
import type { GatewayCounts, PublishJob, UserOutcomes } from '../../messages/publishes.js';

/** What the closing webhooks need of each finished part of a publish. */
export interface FinishedPart {
  gateways: Readonly<Record<Platform, GatewayCounts>>;
  users?: Partial<UserOutcomes>;
}

function platformsOf(job: PublishJob): Platform[] {
  return PLATFORMS.filter((platform) => job.payloads[platform] !== undefined);
}

/** Queues STARTED, when the publish has a webhook URL. */
export function queueStarted(webhooks: WebhookEmitter, job: PublishJob): void {
  if (!job.webhookUrl) return;
  webhooks.pushEvent({
    instanceId: instanceOfNamespace(job.instanceId),
    kind: 'publish.STARTED',
    url: job.webhookUrl,
    payload: { publishId: job.publishId, status: 'STARTED', results: webhookResults(platformsOf(job), emptyGatewayCounts()) },
  });
}

/**
 * Queues FINISHED (the gateway counts of every part summed, when the publish has a webhook
 * URL) and, for a user publish, v1.PublishToUsersAttempt over every part's user outcomes.
 */
export function queueClosing(webhooks: WebhookEmitter, job: PublishJob, parts: readonly FinishedPart[]): void {
  const gatewayCounts = emptyGatewayCounts();
  for (const part of parts) addGatewayCounts(gatewayCounts, part.gateways);
  if (job.webhookUrl) {
    webhooks.pushEvent({
      instanceId: instanceOfNamespace(job.instanceId),
      kind: 'publish.FINISHED',
      url: job.webhookUrl,
      payload: { publishId: job.publishId, status: 'FINISHED', results: webhookResults(platformsOf(job), gatewayCounts) },
    });
  }
  if (job.kind === 'users') {
    const outcome = userAttemptOutcome(job.targets, parts.map((p) => p.users ?? {}));
    webhooks.pushEvent({
      instanceId: instanceOfNamespace(job.instanceId),
      kind: 'v1.PublishToUsersAttempt',
      payload: { instance_id: instanceOfNamespace(job.instanceId), publish_id: job.publishId, ...outcome },
    });
  }
}
