/**
 * `GET /publish_api/v1/instances/<instance_id>/publishes/<publish_id>` (Bearer secret key):
 * one publish's statistics, a Herald extension (the hosted service has no such endpoint).
 * Every shard holds a part of the publish (its devices' fan-out) and the delivery/open reports
 * of its devices; this asks every shard for both, in parallel, and sums them.
 */
import { HeraldError } from '../../../errors.js';
import type { Handler, Reply } from '../../../http/uws-http.js';
import type { ServerContext } from '../../../server-context.js';
import type { Platform } from '../../platform.js';
import type { MergedPublishStats } from '../../publish-results.js';
import type { GatewayCounts, PublishKind, PublishState } from '../../messages/publishes.js';
import { okReply, requireInstance, requireSecretKey } from '../common.js';

/** The answer of the statistics endpoint (docs/push-api.md "Publish statistics"). */
export interface PublishStatsResponse {
  publishId: string;
  /** `interests` (P1) or `users` (P2). */
  kind: PublishKind;
  /** `queued` until a shard starts, `sending`, `finished` once every shard has. */
  state: PublishState;
  /** ISO 8601 times; null until it happens. */
  acceptedAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /** Devices the publish was addressed to, over every gateway. */
  recipients: number;
  /**
   * Per gateway: addressed, accepted by the gateway, not accepted, of those deleted as dead
   * tokens, and `errors`: the failures by reason.
   */
  gateways: Record<Platform, GatewayCounts>;
  /** Devices that reported a delivery (R1), each once. */
  delivered: number;
  /** Devices that reported an open (R2), each once. */
  opened: number;
  /** User publishes only: the target users by outcome (as in v1.PublishToUsersAttempt). */
  users?: { deliveredToGateway: string[]; noDevices: string[]; gatewayFailed: string[] };
}

/** Every gateway's counts with its `errors` (reason → failures), `{}` when nothing failed. */
function withErrors(gateways: Record<Platform, GatewayCounts>): Record<Platform, GatewayCounts> {
  const out = {} as Record<Platform, GatewayCounts>;
  for (const platform of Object.keys(gateways) as Platform[]) out[platform] = { ...gateways[platform], errors: gateways[platform].errors ?? {} };
  return out;
}

function isoOrNull(ms: number | null): string | null {
  return ms === null ? null : new Date(ms).toISOString();
}

function response(merged: MergedPublishStats, delivered: number, opened: number): PublishStatsResponse {
  const body: PublishStatsResponse = {
    publishId: merged.publishId,
    kind: merged.kind,
    state: merged.state,
    acceptedAt: new Date(merged.acceptedAt).toISOString(),
    startedAt: isoOrNull(merged.startedAt),
    finishedAt: isoOrNull(merged.finishedAt),
    recipients: merged.recipients,
    gateways: withErrors(merged.gateways),
    delivered,
    opened,
  };
  if (merged.users) {
    body.users = {
      deliveredToGateway: merged.users.users_delivered_to_gateway,
      noDevices: merged.users.users_no_devices,
      gatewayFailed: merged.users.users_gateway_failed,
    };
  }
  return body;
}

/** The statistics handler: 400/401 as the publish API, 404 PUBLISH_NOT_FOUND when no shard knows the publish. */
export function publishStatsHandler(ctx: Pick<ServerContext, 'pushInstances' | 'publishes' | 'reports'>): Handler {
  return async (req): Promise<Reply> => {
    const instance = requireInstance(ctx, req.params.instanceId);
    requireSecretKey(req.headers, instance);
    const publishId = req.params.publishId;
    if (!publishId) throw new HeraldError('PUBLISH_NOT_FOUND', 'Publish id missing from path');
    const [merged, { delivered, opened }] = await Promise.all([
      ctx.publishes.stats(instance.instanceId, publishId),
      ctx.reports.counts(instance.instanceId, publishId),
    ]);
    if (!merged) throw new HeraldError('PUBLISH_NOT_FOUND', `Could not find the publish ${publishId} in this instance`);
    return okReply(response(merged, delivered, opened));
  };
}
