/**
 * What the push paths answer when no route matched. uWS never matches an empty path segment to
 * a `:param`, so `/instances//devices/apns` or `/devices/apns//interests` land here; they get
 * the precise 400 Beams answers ("instance id missing from path", "device id missing from
 * path", ...) instead of a bare 404. Also answers CORS preflights, 405 for a known path with
 * another method, and 404 otherwise, all with push error bodies.
 */
import { HeraldError, type ErrorCode } from '../../errors.js';
import type { Reply, RequestContext } from '../../http/uws-http.js';
import { corsPreflightReply, quote } from './common.js';
import { isPlatform } from '../platform.js';

/** A path shape: literal segments and `:name` parameters, and the methods it serves. */
export interface PathTemplate {
  readonly segments: readonly string[];
  readonly methods: readonly string[];
}

/** The error for an empty parameter segment, by parameter name. */
const MISSING: Readonly<Record<string, { code: ErrorCode; description?: string }>> = {
  instanceId: { code: 'INSTANCE_ID_MISSING' },
  platform: { code: 'PLATFORM_NOT_FOUND', description: 'Device platform missing from path: use apns, fcm or web' },
  deviceId: { code: 'DEVICE_ID_MISSING' },
  interest: { code: 'INTEREST_NAME_MISSING' },
  userId: { code: 'USER_ID_INVALID', description: 'User id missing from path' },
};

/** Builds a template from a uWS pattern such as `/device_api/v1/instances/:instanceId/...` (lower-case methods, uWS `del` as `delete`). */
export function pathTemplate(pattern: string, methods: readonly string[]): PathTemplate {
  return { segments: pattern.split('/').slice(1), methods: methods.map((m) => (m === 'del' ? 'delete' : m)) };
}

/** The fallback handler over the templates of one API. */
export function pathFallback(templates: readonly PathTemplate[], options: { cors: boolean }) {
  return (req: RequestContext): Reply => {
    if (options.cors && req.method === 'options') return corsPreflightReply();
    const segments = req.path.split('/').slice(1);
    const candidates = templates.filter((t) => sameShape(t, segments));
    const withMethod = candidates.filter((t) => t.methods.includes(req.method));
    // An empty segment is the precise answer, whatever the method.
    for (const template of [...withMethod, ...candidates]) {
      const missing = firstEmptyParameter(template, segments);
      if (missing) {
        const { code, description } = MISSING[missing] ?? { code: 'ROUTE_NOT_FOUND' as const };
        throw new HeraldError(code, description);
      }
    }
    for (const template of candidates) {
      const at = template.segments.indexOf(':platform');
      if (at >= 0 && !isPlatform(segments[at]!)) {
        throw new HeraldError('PLATFORM_NOT_FOUND', `Unknown device platform ${quote(segments[at])}: use apns, fcm or web`);
      }
    }
    if (candidates.length > 0 && withMethod.length === 0) {
      throw new HeraldError('METHOD_NOT_ALLOWED', `Method ${req.method.toUpperCase()} is not allowed on ${req.path}`);
    }
    throw new HeraldError('ROUTE_NOT_FOUND', `No route for ${req.method.toUpperCase()} ${req.path}`);
  };
}

/** Same number of segments and the same literals (parameters match anything, empty included). */
function sameShape(template: PathTemplate, segments: readonly string[]): boolean {
  if (template.segments.length !== segments.length) return false;
  return template.segments.every((s, i) => s.startsWith(':') || s === segments[i]);
}

function firstEmptyParameter(template: PathTemplate, segments: readonly string[]): string | undefined {
  const index = template.segments.findIndex((s, i) => s.startsWith(':') && segments[i] === '');
  return index < 0 ? undefined : template.segments[index]!.slice(1);
}
