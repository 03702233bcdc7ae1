/**
 * The publish request bodies (P1 interests, P2 users) as zod schemas, and their validation
 * into a 422 PUBLISH_SCHEMA whose description names the first bad field, e.g.
 * `interests[2]: "a b" is not a valid interest name ...`. Unknown top-level fields (such as
 * the hosted service's `webhookLevel`) are accepted and ignored.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { HeraldError } from '../../../errors.js';
import { isEncodableKeyPart } from '../../keys.js';
import { isValidInterestName, MAX_INTEREST_NAME_LENGTH } from '../../interest-name.js';
import type { PublishJob } from '../../messages/publishes.js';
import type { Platform } from '../../platform.js';

/** Most interests one P1 request may name (the Beams limit). */
export const MAX_PUBLISH_INTERESTS = 100;
/** Most users one P2 request may name (the Beams limit). */
export const MAX_PUBLISH_USERS = 1000;
/** Largest user id in a P2 request, in UTF-8 bytes (the Beams limit). */
export const MAX_USER_ID_BYTES = 164;
/** Largest P1 body, bytes (10 KiB). */
export const P1_BODY_LIMIT = 10 * 1024;
/** Largest P2 body, bytes (200 KiB). */
export const P2_BODY_LIMIT = 200 * 1024;

const platformObject = (platform: Platform) =>
  z.record(z.string(), z.unknown(), { error: `${platform} must be a JSON object (the payload for the ${platform} gateway)` });

const common = {
  apns: platformObject('apns').optional(),
  fcm: platformObject('fcm').optional(),
  web: platformObject('web').optional(),
  webhookUrl: z.url({ protocol: /^https?$/, error: 'webhookUrl must be an http or https URL' }).optional(),
};

const interestName = z.string({ error: 'each interest must be a string' }).refine(isValidInterestName, {
  error: (issue) =>
    `${JSON.stringify(String(issue.input).slice(0, 200))} is not a valid interest name: ` +
    `1 to ${MAX_INTEREST_NAME_LENGTH} characters of A-Z a-z 0-9 _ - = @ , . ;`,
});

const userId = z
  .string({ error: 'each user id must be a string' })
  .refine((id) => id.length > 0, { error: 'a user id must not be empty' })
  .refine((id) => isEncodableKeyPart(id), { error: 'a user id must be valid Unicode (it has a lone UTF-16 surrogate)' })
  .refine((id) => Buffer.byteLength(id, 'utf8') <= MAX_USER_ID_BYTES, {
    error: (issue) => `user id is ${Buffer.byteLength(String(issue.input), 'utf8')} bytes of UTF-8; at most ${MAX_USER_ID_BYTES} are allowed`,
  });

function atLeastOnePlatform(body: { apns?: unknown; fcm?: unknown; web?: unknown }, ctx: z.RefinementCtx): void {
  if (body.apns === undefined && body.fcm === undefined && body.web === undefined) {
    ctx.addIssue({ code: 'custom', path: [], message: 'at least one of apns, fcm or web is required' });
  }
}

/**
 * A publish's targets, field `<target>s`: 1 to `max` of `item`, each `<target> <itemName>`
 * in the messages.
 */
const targetList = (item: z.ZodType<string>, target: string, itemName: string, max: number) =>
  z
    .array(item, { error: `${target}s must be an array of ${target} ${itemName}s` })
    .min(1, { error: `${target}s must name at least 1 ${target}` })
    .max(max, { error: `${target}s must name at most ${max} ${target}s` });

/** P1 body. */
export const interestsPublishSchema = z
  .object({ interests: targetList(interestName, 'interest', 'name', MAX_PUBLISH_INTERESTS), ...common })
  .superRefine(atLeastOnePlatform);

/** P2 body. */
export const usersPublishSchema = z.object({ users: targetList(userId, 'user', 'id', MAX_PUBLISH_USERS), ...common }).superRefine(atLeastOnePlatform);

/** A validated publish request, either kind. */
export interface PublishRequest {
  kind: 'interests' | 'users';
  targets: string[];
  payloads: Partial<Record<Platform, Record<string, unknown>>>;
  webhookUrl?: string;
}

/** `interests[2]`, `apns`, or `body` for the whole body. */
function fieldName(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'body';
  return path.reduce<string>((name, part) => (typeof part === 'number' ? `${name}[${part}]` : name ? `${name}.${String(part)}` : String(part)), '');
}

/** Validates a parsed JSON object as a P1 or P2 body; throws 422 PUBLISH_SCHEMA naming the first bad field. */
export function validatePublishRequest(kind: PublishRequest['kind'], body: Record<string, unknown>): PublishRequest {
  const result = kind === 'interests' ? interestsPublishSchema.safeParse(body) : usersPublishSchema.safeParse(body);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const more = result.error.issues.length > 1 ? ` (and ${result.error.issues.length - 1} more problem${result.error.issues.length > 2 ? 's' : ''})` : '';
    throw new HeraldError('PUBLISH_SCHEMA', `JSON does not match the publish schema: ${fieldName(issue.path)}: ${issue.message}${more}`);
  }
  const data = result.data;
  const payloads: PublishRequest['payloads'] = {};
  if (data.apns) payloads.apns = data.apns;
  if (data.fcm) payloads.fcm = data.fcm;
  if (data.web) payloads.web = data.web;
  const targets = 'interests' in data ? data.interests : data.users;
  return { kind, targets, payloads, ...(data.webhookUrl !== undefined ? { webhookUrl: data.webhookUrl } : {}) };
}

/**
 * The publish job a validated request becomes: a new publish id, accepted now. One definition for
 * the publish API and the dashboard's test notification.
 */
export function newPublishJob(instanceId: string, request: Pick<PublishJob, 'kind' | 'targets' | 'payloads' | 'webhookUrl'>): PublishJob {
  return {
    publishId: `pubid-${randomUUID()}`,
    instanceId,
    kind: request.kind,
    targets: request.targets,
    payloads: request.payloads,
    acceptedAt: Date.now(),
    ...(request.webhookUrl !== undefined ? { webhookUrl: request.webhookUrl } : {}),
  };
}
