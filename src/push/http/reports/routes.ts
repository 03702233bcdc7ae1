/**
 * Push reporting routes: R1/R2 report events (called by client SDKs, browsers included, so
 * with CORS) and the per-publish statistics endpoint, which sums the shards' publish and
 * report counters.
 */
import type { ServerContext } from '../../../server-context.js';
import type { Route } from '../../../http/router.js';
import { corsPreflightReply, pushRouteOptions } from '../common.js';
import { pathFallback, pathTemplate } from '../path-fallback.js';
import { REPORT_BODY_LIMIT, reportEventHandler } from './events.js';
import { publishStatsHandler } from './publish-stats.js';

const EVENTS = '/reporting_api/v2/instances/:instanceId/events';
const PUBLISH = '/publish_api/v1/instances/:instanceId/publishes/:publishId';

export function reportingApiRoutes(ctx: Pick<ServerContext, 'pushInstances' | 'publishes' | 'reports'>): Route[] {
  return [
    { method: 'post', pattern: EVENTS, handler: reportEventHandler(ctx), options: pushRouteOptions({ bodyLimit: REPORT_BODY_LIMIT, bodyTooLarge: 'REPORT_BODY_TOO_LARGE', cors: true }) },
    { method: 'options', pattern: EVENTS, handler: () => corsPreflightReply(), options: pushRouteOptions({ bodyLimit: 0, cors: true }) },
    { method: 'get', pattern: PUBLISH, handler: publishStatsHandler(ctx), options: pushRouteOptions({ bodyLimit: 0 }) },
    // uWS never matches an empty segment to a parameter: `/instances//events` lands here and
    // gets 400 "instance id missing from path"; other unmatched reporting paths get 404/405.
    {
      method: 'any',
      pattern: '/reporting_api/*',
      handler: pathFallback([pathTemplate(EVENTS, ['post', 'options'])], { cors: true }),
      options: pushRouteOptions({ bodyLimit: 0, cors: true }),
    },
  ];
}
