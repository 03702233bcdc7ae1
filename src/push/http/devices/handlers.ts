/**
 * Main-thread handlers of the device API (D1-D15), the web VAPID key and user deletion. Each
 * validates the request (paths: device-path.ts; body fields: fields.ts), computes or checks the
 * device id, and forwards one request to the shard that owns the device (or a broadcast, for
 * per-user work). Nothing here touches storage or loops over devices. Answers to writes come
 * after the shard's synced commit.
 */
import { HeraldError } from '../../../errors.js';
import type { Reply, RequestContext } from '../../../http/uws-http.js';
import type { ServerContext } from '../../../server-context.js';
import type { PushInstanceConfig } from '../../../config/schema.js';
import type { Platform } from '../../platform.js';
import {
  okReply, parseJsonObject, quote, readAuthorization, requireInstance, requireJsonContentType, requireSecretKey, instanceSecretEquals,
} from '../common.js';
import { acceptedIssuers, isValidUserId, verifyUserToken, MAX_PUSH_USER_ID_LENGTH } from '../jwt.js';
import { deviceIdFor } from './device-id.js';
import { deviceKey as key, deviceNotFound, deviceTarget as target, interestFromPath, requirePlatform } from './device-path.js';
import { checkGatewayToken } from './gateway-token.js';
import type { SubscriptionRules } from '../../web-subscription.js';
import { parseInterestLimit, parseInterestSet, parseMetadata } from './fields.js';

/** Most devices one user may hold; one more is a 422 USER_DEVICE_LIMIT (the Beams limit). */
export const MAX_DEVICES_PER_USER = 100;

const PLATFORM_NAMES: Record<Platform, string> = { apns: 'iOS (APNs)', fcm: 'Android (FCM)', web: 'web push' };

export interface DeviceApiHandlers {
  register(req: RequestContext): Promise<Reply>;
  get(req: RequestContext): Promise<Reply>;
  remove(req: RequestContext): Promise<Reply>;
  setMetadata(req: RequestContext): Promise<Reply>;
  setToken(req: RequestContext): Promise<Reply>;
  setUser(req: RequestContext): Promise<Reply>;
  listInterests(req: RequestContext): Promise<Reply>;
  replaceInterests(req: RequestContext): Promise<Reply>;
  addInterest(req: RequestContext): Promise<Reply>;
  removeInterest(req: RequestContext): Promise<Reply>;
  vapidPublicKey(req: RequestContext): Reply;
  deleteUser(req: RequestContext): Promise<Reply>;
}

/** What the device handlers use. */
export type DeviceApiContext = Pick<ServerContext, 'config' | 'pushInstances' | 'installSecret' | 'devices'>;

/** The device API's handlers over `ctx`, one function each below. */
export function deviceApiHandlers(ctx: DeviceApiContext): DeviceApiHandlers {
  return {
    register: (req) => register(ctx, req),
    get: (req) => getDevice(ctx, req),
    remove: (req) => removeDevice(ctx, req),
    setMetadata: (req) => setMetadata(ctx, req),
    setToken: (req) => setToken(ctx, req),
    setUser: (req) => setUser(ctx, req),
    listInterests: (req) => listInterests(ctx, req),
    replaceInterests: (req) => replaceInterests(ctx, req),
    addInterest: (req) => addInterest(ctx, req),
    removeInterest: (req) => removeInterest(ctx, req),
    vapidPublicKey: (req) => vapidPublicKey(ctx, req),
    deleteUser: (req) => deleteUser(ctx, req),
  };
}

/** D1/D2 (and web): `{id, initialInterestSet}`; the same token always answers the same device. */
async function register(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const instance = requireInstance(ctx, req.params['instanceId']);
  const platform = requirePlatform(req.params['platform']);
  requireJsonContentType(req.headers);
  requireRegistrationCredentials(req, instance);
  const body = parseJsonObject(req.body);
  const rawToken = tokenField(body, `${PLATFORM_NAMES[platform]} device token missing: the body needs a token field`);
  const bundleIdentifier = body['bundleIdentifier'];
  if (platform === 'apns' && (bundleIdentifier === undefined || bundleIdentifier === null || bundleIdentifier === '')) {
    throw new HeraldError('BUNDLE_ID_MISSING', 'Bundle identifier missing: the body needs a bundleIdentifier field');
  }
  if (bundleIdentifier !== undefined && bundleIdentifier !== null && typeof bundleIdentifier !== 'string') {
    throw new HeraldError('DEVICE_FIELD_INVALID', `bundleIdentifier must be a string, got ${typeof bundleIdentifier}`);
  }
  const metadata = body['metadata'] === undefined || body['metadata'] === null ? undefined : parseMetadata(platform, body['metadata']);
  const token = gatewayToken(ctx, instance, platform, rawToken, 'DEVICE_TOKEN_INVALID', 'Incorrect device token');

  const deviceId = deviceIdFor(ctx.installSecret, instance.instanceId, platform, token);
  const result = await ctx.devices.request({
    type: 'device.register',
    instanceId: instance.instanceId,
    deviceId,
    platform,
    token,
    ...(typeof bundleIdentifier === 'string' && bundleIdentifier !== '' ? { bundleIdentifier } : {}),
    ...(metadata ? { metadata } : {}),
  });
  return okReply({ id: result.id, initialInterestSet: result.initialInterestSet });
}

/** D3/D4: `{id, userId, metadata}`; userId is "" until a user is associated (the field is required). */
async function getDevice(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'not-found');
  requireJsonContentType(req.headers, { allowMissing: true });
  const { device } = await ctx.devices.request({ type: 'device.get', ...key(t) });
  if (!device) throw deviceNotFound(t);
  return okReply({ id: device.id, userId: device.userId ?? '', ...(device.metadata ? { metadata: device.metadata } : {}) });
}

/** D5/D6: idempotent, 200 whether or not the device existed. */
async function removeDevice(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'absent');
  if (t) await ctx.devices.request({ type: 'device.delete', ...key(t) });
  return okReply();
}

/** D7/D8: replaces the metadata with the platform's string fields of the body. */
async function setMetadata(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'not-found');
  requireJsonContentType(req.headers);
  const metadata = parseMetadata(t.platform, parseJsonObject(req.body), 'Request body (the metadata)');
  const { found } = await ctx.devices.request({ type: 'device.setMetadata', ...key(t), metadata });
  if (!found) throw deviceNotFound(t);
  return okReply();
}

/** D9: replaces the gateway token; the device keeps its id. */
async function setToken(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'not-found');
  requireJsonContentType(req.headers);
  const rawToken = tokenField(parseJsonObject(req.body), 'The token field (the new device token) is missing');
  const token = gatewayToken(ctx, t.instance, t.platform, rawToken, 'DEVICE_TOKEN_MALFORMED', 'Malformed device token');
  const { found } = await ctx.devices.request({ type: 'device.setToken', ...key(t), token });
  if (!found) throw deviceNotFound(t);
  return okReply();
}

/**
 * D10/D11 (and web): associates the user of the Bearer user token. The per-user limit spans
 * shards: the user's devices are counted on every shard in parallel, then the owning shard
 * re-counts its own and associates under a per-shard lock. Two associations of one user
 * racing on different shards can still both pass, going over the limit by at most the
 * number of shards minus one.
 */
async function setUser(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'invalid');
  requireJsonContentType(req.headers, { allowMissing: true });
  const userId = await bearerUserId(ctx, req, t.instance);
  const devicesOnOtherShards = await ctx.devices.countUserDevicesElsewhere(t.instance.instanceId, userId, t.deviceId);
  const { outcome } = await ctx.devices.request({
    type: 'device.setUser',
    ...key(t),
    userId,
    devicesOnOtherShards,
    maxDevicesPerUser: MAX_DEVICES_PER_USER,
  });
  switch (outcome) {
    case 'ok':
      return okReply();
    case 'not-found':
      throw deviceNotFound(t);
    case 'already-associated':
      throw new HeraldError('USER_ALREADY_ASSOCIATED', 'A different user id is already associated with this device');
    case 'limit':
      throw new HeraldError('USER_DEVICE_LIMIT', `User already has the maximum of ${MAX_DEVICES_PER_USER} devices`);
  }
}

/** D12: `{interests, responseMetadata: {nextCursor}?}`, sorted by name. */
async function listInterests(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'not-found');
  const query = new URLSearchParams(req.query);
  const limit = parseInterestLimit(query.get('limit'));
  const cursor = query.get('cursor');
  const page = await ctx.devices.request({
    type: 'device.listInterests',
    ...key(t),
    limit,
    ...(cursor !== null ? { cursor } : {}),
  });
  if (page.outcome !== 'ok') {
    if (page.outcome === 'not-found') throw deviceNotFound(t);
    throw new HeraldError('INVALID_CURSOR', `cursor ${quote(cursor)} is not valid: pass the nextCursor of a previous page`);
  }
  return okReply({
    interests: page.interests,
    ...(page.nextCursor !== undefined ? { responseMetadata: { nextCursor: page.nextCursor } } : {}),
  });
}

/** D13: replaces every interest (at most 5000, each validated). */
async function replaceInterests(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'not-found');
  const interests = parseInterestSet(parseJsonObject(req.body));
  const { outcome } = await ctx.devices.request({ type: 'device.replaceInterests', ...key(t), interests });
  if (outcome === 'not-found') throw deviceNotFound(t);
  return okReply();
}

/** D14: subscribing twice is fine. A missing device is 404, so the iOS SDK re-registers it. */
async function addInterest(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'invalid');
  const interest = interestFromPath(req);
  const { outcome } = await ctx.devices.request({ type: 'device.addInterest', ...key(t), interest });
  if (outcome === 'not-found') throw deviceNotFound(t);
  if (outcome === 'too-many') {
    throw new HeraldError('TOO_MANY_INTERESTS', 'The device already has the maximum of 5000 interests');
  }
  return okReply();
}

/** D15: idempotent for the interest; a missing device is 404, as for D14. */
async function removeInterest(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const t = target(ctx, req, 'invalid');
  const interest = interestFromPath(req);
  const { outcome } = await ctx.devices.request({ type: 'device.removeInterest', ...key(t), interest });
  if (outcome === 'not-found') throw deviceNotFound(t);
  return okReply();
}

/** `{vapidPublicKey}` for the web SDK; 404 when the instance has no web push config. */
function vapidPublicKey(ctx: DeviceApiContext, req: RequestContext): Reply {
  const instance = requireInstance(ctx, req.params['instanceId']);
  if (!instance.web) throw new HeraldError('WEB_PUSH_NOT_CONFIGURED');
  return okReply({ vapidPublicKey: instance.web.vapidPublicKey });
}

/** Deletes a user's devices on every shard (secret key required); 200 also when the user had none. */
async function deleteUser(ctx: DeviceApiContext, req: RequestContext): Promise<Reply> {
  const instance = requireInstance(ctx, req.params['instanceId']);
  requireSecretKey(req.headers, instance);
  const userId = req.params['userId'] ?? '';
  if (!isValidUserId(userId)) {
    throw new HeraldError('USER_ID_INVALID', `User id must have 1 to ${MAX_PUSH_USER_ID_LENGTH} characters, got ${(userId as string).length}`);
  }
  await ctx.devices.deleteUser(instance.instanceId, userId);
  return okReply();
}

/**
 * The `token` field of a body, unchecked: 400 DEVICE_TOKEN_MISSING (`missing`) when absent,
 * null or empty, DEVICE_FIELD_INVALID when not a string.
 */
function tokenField(body: Record<string, unknown>, missing: string): string {
  const raw = body['token'];
  if (raw === undefined || raw === null || raw === '') throw new HeraldError('DEVICE_TOKEN_MISSING', missing);
  if (typeof raw !== 'string') throw new HeraldError('DEVICE_FIELD_INVALID', `token (the device token) must be a string, got ${typeof raw}`);
  return raw;
}

/** A device token as its gateway takes it (gateway-token.ts); `code` with `prefix` and the reason when it is not one. */
function gatewayToken(
  ctx: Pick<DeviceApiContext, 'config'>,
  instance: PushInstanceConfig,
  platform: Platform,
  raw: string,
  code: 'DEVICE_TOKEN_INVALID' | 'DEVICE_TOKEN_MALFORMED',
  prefix: string,
): string {
  const checked = checkGatewayToken(platform, raw, webTokenRules(instance, ctx.config.outbound.allowPrivateAddresses));
  if (!checked.ok) throw new HeraldError(code, `${prefix}: ${checked.reason}`);
  return checked.token;
}

/** The user id of the request's Bearer user token, verified against the instance's secret key (401 otherwise). */
async function bearerUserId(ctx: Pick<DeviceApiContext, 'config'>, req: RequestContext, instance: PushInstanceConfig): Promise<string> {
  const auth = readAuthorization(req.headers);
  if (auth.kind === 'missing') {
    throw new HeraldError('USER_TOKEN_MISSING', 'Authorization token missing: send Authorization: Bearer <user token>');
  }
  if (auth.kind !== 'bearer') {
    throw new HeraldError('USER_TOKEN_MALFORMED', 'Authorization token malformed: the header must be Bearer <user token>');
  }
  return verifyUserToken(auth.token, instance.secretKey, acceptedIssuers(instance.instanceId, ctx.config.pushDomain));
}

/**
 * Registration needs no credentials (the SDKs send none, as with the hosted service). A request
 * that does present `Authorization: Bearer <secret key>` must present the right one: 401
 * "incorrect instance credentials" otherwise.
 */
function requireRegistrationCredentials(req: RequestContext, instance: PushInstanceConfig): void {
  const auth = readAuthorization(req.headers);
  if (auth.kind === 'missing') return;
  if (auth.kind !== 'bearer' || !instanceSecretEquals(auth.token, instance)) {
    throw new HeraldError('INSTANCE_CREDENTIALS_INVALID', 'Incorrect instance credentials: the Authorization header is not Bearer <secret key> of this instance');
  }
}

/** The instance's rules for web tokens: private endpoint hosts only as `outbound.allowPrivateAddresses` or `push[].web.allowPrivateEndpoints` allow. */
function webTokenRules(instance: PushInstanceConfig, allowPrivateAddresses: readonly string[]): SubscriptionRules {
  return { allowPrivateEndpoints: instance.web?.allowPrivateEndpoints ?? false, allowPrivateAddresses };
}
