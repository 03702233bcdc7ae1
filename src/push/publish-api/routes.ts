/**
 * Publish API routes (P1, P2): `POST /publish_api/v1/instances/:instanceId/publishes/interests`
 * (also the older `.../publishes`) and `.../publishes/users`.
 *
 * Checks, in order: instance id (400/404), `Authorization: Bearer <secret key>` (400 missing,
 * 401 wrong, constant time), rate (429), Content-Type (400), JSON object (400), schema (422),
 * notification quota (402). The body size is checked while it is read (400
 * PUBLISH_BODY_TOO_LARGE above 10 KiB / 200 KiB). A 200 `{"publishId": "pubid-<uuid>"}` is
 * answered only after every shard has stored the publish durably; each then fans out over its
 * own devices in the background. When some shard fails to store it, every shard is told to
 * cancel it before the 500 goes out, so a publish the client was refused is not sent.
 */
import { countPushPublish } from '../../metrics/node-counters.js';
import { randomUUID } from 'node:crypto';
import { log } from '../../log.js';
import type { ServerContext } from '../../server-context.js';
import type { Route } from '../../http/router.js';
import type { Reply, RequestContext } from '../../http/uws-http.js';
import { okReply, parseJsonObject, pushRouteOptions, requireInstance, requireJsonContentType, requireSecretKey } from '../api-common.js';
import { pathFallback, pathTemplate } from '../device-api/path-fallback.js';
import type { PublishJob } from '../publish/shard-api.js';
import { checkNotificationQuota } from './notification-quota.js';
import { PublishRateLimiter } from './rate-limiter.js';
import { P1_BODY_LIMIT, P2_BODY_LIMIT, validatePublishRequest, type PublishRequest } from './request-schema.js';

const PREFIX = '/publish_api/v1/instances/:instanceId/publishes';

/**
 * Stores the publish on every shard; resolves once all have it durably. If any shard fails
 * (crash, timeout), sends `publish.cancel` to every shard (those that stored it stop and drop
 * it; one whose start is still queued will not run it) and then rejects with that failure.
 */
async function startOnEveryShard(ctx: ServerContext, job: PublishJob): Promise<void> {
  const shards = Array.from({ length: ctx.shards.shardCount }, (_, shard) => shard);
  const started = await Promise.allSettled(shards.map((shard) => ctx.shards.request(shard, { type: 'publish.start', job })));
  const failure = started.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (!failure) return;
  const cancels = await Promise.allSettled(shards.map((shard) => ctx.shards.request(shard, { type: 'publish.cancel', publishId: job.publishId })));
  cancels.forEach((result, shard) => {
    // A shard that did not store the publish cannot send it; one that did and missed the cancel would.
    if (result.status === 'rejected' && started[shard]!.status === 'fulfilled') {
      log.error('publish stored on a shard that could not be told to cancel it: it may be sent although the request failed', {
        publishId: job.publishId, shard, error: String(result.reason),
      });
    }
  });
  throw failure.reason;
}

/** The P1/P2 routes and the `/publish_api/*` fallback. */
export function publishApiRoutes(ctx: ServerContext): Route[] {
  const limiter = new PublishRateLimiter();

  const publish = (kind: PublishRequest['kind']) => async (rc: RequestContext): Promise<Reply> => {
    const instance = requireInstance(ctx, rc.params.instanceId);
    requireSecretKey(rc.headers, instance);
    limiter.take(instance.instanceId, instance.maxPublishesPerSecond);
    requireJsonContentType(rc.headers);
    const request = validatePublishRequest(kind, parseJsonObject(rc.body));
    await checkNotificationQuota(ctx.shards, instance);
    const job: PublishJob = {
      publishId: `pubid-${randomUUID()}`,
      instanceId: instance.instanceId,
      kind: request.kind,
      targets: request.targets,
      payloads: request.payloads,
      acceptedAt: Date.now(),
      ...(request.webhookUrl !== undefined ? { webhookUrl: request.webhookUrl } : {}),
    };
    await startOnEveryShard(ctx, job);
    countPushPublish(instance.instanceId);
    return okReply({ publishId: job.publishId });
  };

  const interests = pushRouteOptions({ bodyLimit: P1_BODY_LIMIT, bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE' });
  const users = pushRouteOptions({ bodyLimit: P2_BODY_LIMIT, bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE' });
  // uWS matches no empty segment to a parameter: `/instances//publishes/...` lands in the
  // fallback, which answers 400 "instance id missing from path" (and 404/405 otherwise). The
  // statistics route (reporting area) is listed so that its empty-instance paths answer alike.
  const templates = [
    pathTemplate(`${PREFIX}/interests`, ['post']),
    pathTemplate(PREFIX, ['post']),
    pathTemplate(`${PREFIX}/users`, ['post']),
    pathTemplate(`${PREFIX}/:publishId`, ['get']),
  ];
  return [
    { method: 'post', pattern: `${PREFIX}/interests`, options: interests, handler: publish('interests') },
    { method: 'post', pattern: PREFIX, options: interests, handler: publish('interests') },
    { method: 'post', pattern: `${PREFIX}/users`, options: users, handler: publish('users') },
    { method: 'any', pattern: '/publish_api/*', options: pushRouteOptions({ bodyLimit: 0 }), handler: pathFallback(templates, { cors: false }) },
  ];
}
