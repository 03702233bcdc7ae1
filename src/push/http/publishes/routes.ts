/**
 * Publish API routes (P1, P2): `POST /publish_api/v1/instances/:instanceId/publishes/interests`
 * (also the older `.../publishes`) and `.../publishes/users`.
 *
 * Checks, in order: instance id (400/404), `Authorization: Bearer <secret key>` (400 missing,
 * 401 wrong, constant time), rate (429), Content-Type (400), JSON object (400), schema (422),
 * notification quota (402), the instance's queued publishes (429 PUBLISH_BACKLOG_FULL with
 * `Retry-After: 1`, past `pushDelivery.maxPendingBytesPerInstance` on a shard). The body size is checked while it is read (400
 * PUBLISH_BODY_TOO_LARGE above 10 KiB / 200 KiB). A 200 `{"publishId": "pubid-<uuid>"}` is
 * answered only after every shard has stored the publish durably; each then fans out over its
 * own devices in the background. When some shard fails to store it, every shard is told to
 * cancel it before the 500 goes out, so a publish the client was refused is not sent.
 */
import { HeraldError } from '../../../errors.js';
import { countPushPublish } from '../../../metrics/node-counters.js';
import type { ServerContext } from '../../../server-context.js';
import type { Route } from '../../../http/router.js';
import type { Reply, RequestContext } from '../../../http/uws-http.js';
import { okReply, parseJsonObject, pushRouteOptions, requireInstance, requireJsonContentType, requireSecretKey } from '../common.js';
import { pathFallback, pathTemplate } from '../path-fallback.js';
import { checkNotificationQuota } from './notification-quota.js';
import { PublishRateLimiter } from './rate-limiter.js';
import { newPublishJob, P1_BODY_LIMIT, P2_BODY_LIMIT, validatePublishRequest, type PublishRequest } from './request-schema.js';

const PREFIX = '/publish_api/v1/instances/:instanceId/publishes';

/** The P1/P2 routes and the `/publish_api/*` fallback. */
export function publishApiRoutes(ctx: Pick<ServerContext, 'pushInstances' | 'publishes' | 'debug'>): Route[] {
  const limiter = new PublishRateLimiter();

  const publish = (kind: PublishRequest['kind']) => async (rc: RequestContext): Promise<Reply> => {
    const instance = requireInstance(ctx, rc.params.instanceId);
    requireSecretKey(rc.headers, instance);
    limiter.take(instance.instanceId, instance.maxPublishesPerSecond);
    requireJsonContentType(rc.headers);
    const request = validatePublishRequest(kind, parseJsonObject(rc.body));
    await checkNotificationQuota(ctx.publishes, instance);
    const job = newPublishJob(instance.instanceId, request);
    await ctx.publishes.start(job).catch((err: unknown) => {
      // A shard holding too much of the instance's queued work: it drains within seconds.
      if (err instanceof HeraldError && err.code === 'PUBLISH_BACKLOG_FULL') err.retryAfterSeconds = 1;
      throw err;
    });
    ctx.debug.publishAccepted(job);
    countPushPublish(instance.instanceId);
    return okReply({ publishId: job.publishId });
  };

  const interests = pushRouteOptions({ bodyLimit: P1_BODY_LIMIT, bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE' });
  const users = pushRouteOptions({ bodyLimit: P2_BODY_LIMIT, bodyTooLarge: 'PUBLISH_BODY_TOO_LARGE' });
  // uWS matches no empty segment to a parameter: `/instances//publishes/...` lands in the
  // fallback, which answers 400 "instance id missing from path" (and 404/405 otherwise). The
  // statistics route (reporting API) is listed so that its empty-instance paths answer alike.
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
