/**
 * C1 POST /apps/<app_id>/events and C2 POST /apps/<app_id>/batch_events. A trigger is
 * validated, charged to the app's quota, then handed to the channel adapter (a synchronous
 * hand-off: no shard is awaited) and answered. Only `info` makes the answer wait, for the
 * counts of the channels triggered to.
 */
import type { AppConfig } from '../../config/schema.js';
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import type { ChannelAdapter } from '../adapter/channel-adapter.js';
import {
  channelType,
  isPresenceChannel,
  isValidSocketId,
  isValidTriggerChannel,
  MAX_USER_ID_LENGTH,
  SERVER_TO_USER_PREFIX,
  serverToUserId,
} from '../names.js';
import { batchEventSchema, batchSchema, parseInfo, parseWith, postParams, triggerSchema, type InfoAttribute } from './params.js';
import { messageCost, type MessageQuota } from './quota.js';
import type { ChannelApiRequest } from './request.js';

/** Attributes a trigger may ask for (cache is only for C4). */
const TRIGGER_INFO: readonly InfoAttribute[] = ['user_count', 'subscription_count'];

/** A validated event, ready to publish. */
export interface ValidEvent {
  name: string;
  data: string;
  /** Unique channel names, in request order. */
  channels: string[];
  socketId?: string;
  info: ReadonlySet<InfoAttribute>;
}

interface EventFields {
  name: string;
  data: string;
  channels: readonly string[];
  socket_id?: string | undefined;
  info?: string | undefined;
}

/**
 * Applies the rules that shape alone does not: channel names (plus `#server-to-user-<user id>`,
 * the SDK's sendToUser), socket id, info attribute names and the app's data size limit (413).
 * `label(i)` names channel i in messages.
 */
export function validateEvent(app: AppConfig, fields: EventFields, where: string, label: (i: number) => string): ValidEvent {
  fields.channels.forEach((channel, i) => {
    if (isValidTriggerChannel(channel)) return;
    const quoted = `${label(i)} '${channel.slice(0, 230)}'`;
    if (channel.startsWith(SERVER_TO_USER_PREFIX)) {
      throw new HeraldError('INVALID_CHANNEL_NAME', `${quoted} names no user: the user id after ${SERVER_TO_USER_PREFIX} must be 1 to ${MAX_USER_ID_LENGTH} characters`);
    }
    throw new HeraldError(
      'INVALID_CHANNEL_NAME',
      `${quoted} is not a valid channel name: 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ; (or ${SERVER_TO_USER_PREFIX}<user id>)`,
    );
  });
  if (fields.socket_id !== undefined && !isValidSocketId(fields.socket_id)) {
    throw new HeraldError('INVALID_SOCKET_ID', `${where}socket_id '${fields.socket_id.slice(0, 64)}' is not a socket id (<digits>.<digits>)`);
  }
  const info = parseInfo(fields.info, TRIGGER_INFO, `${where}info`);
  const bytes = Buffer.byteLength(fields.data, 'utf8');
  if (bytes > app.maxEventDataBytes) {
    throw new HeraldError('EVENT_DATA_TOO_LARGE', `${where}data is ${bytes} bytes; the limit is ${app.maxEventDataBytes} bytes`);
  }
  const event: ValidEvent = { name: fields.name, data: fields.data, channels: [...new Set(fields.channels)], info };
  if (fields.socket_id !== undefined) event.socketId = fields.socket_id;
  return event;
}

/**
 * Hands an event to the adapter: one frame per channel, built once, `data` exactly as
 * triggered; the socket_id's connection is left out. Cache channels also keep it. A
 * `#server-to-user-<id>` frame goes out the same way: the user's signed-in connections
 * subscribed to that channel's topic (ws/protocol.ts).
 */
export function publishEvent(adapter: ChannelAdapter, appId: string, event: ValidEvent): void {
  for (const channel of event.channels) {
    const frame = JSON.stringify({ event: event.name, channel, data: event.data });
    adapter.publish(appId, channel, frame, event.socketId);
    if (channelType(channel).cache) adapter.storeCachedEvent(appId, channel, event.name, event.data);
  }
}

/**
 * The attributes of one channel a trigger asked for. Attributes that do not apply to the
 * channel (user_count off presence, subscription_count on presence or when the app does not
 * count subscriptions, any on `#server-to-user-<id>`, which keeps no state) are left out, so
 * the object may be empty (spec 4.1 C1).
 */
export async function triggerInfo(
  adapter: ChannelAdapter,
  app: AppConfig,
  channel: string,
  info: ReadonlySet<InfoAttribute>,
): Promise<Record<string, number>> {
  if (serverToUserId(channel) !== null) return {};
  const presence = isPresenceChannel(channel);
  const userCount = presence && info.has('user_count');
  const subscriptionCount = !presence && app.subscriptionCount && info.has('subscription_count');
  if (!userCount && !subscriptionCount) return {};
  const state = await adapter.channelInfo(app.id, channel, { userCount, subscriptionCount });
  const out: Record<string, number> = {};
  if (userCount) out.user_count = state.userCount ?? 0;
  if (subscriptionCount) out.subscription_count = state.subscriptionCount ?? 0;
  return out;
}

/** C1: one event to 1-100 channels; with `info`, the attributes of each unique channel. */
export function triggerEvent(adapter: ChannelAdapter, quota: MessageQuota, req: ChannelApiRequest): Reply | Promise<Reply> {
  const { app } = req;
  const params = parseWith(triggerSchema, postParams(req.query, req.body));
  if (params.channel !== undefined && params.channels !== undefined) {
    throw new HeraldError('INVALID_PARAMETERS', 'Give either channels or channel, not both');
  }
  const channels = params.channels ?? (params.channel !== undefined ? [params.channel] : undefined);
  if (channels === undefined) throw new HeraldError('INVALID_PARAMETERS', 'channels (or channel) is required');
  const named = params.channels !== undefined ? (i: number) => `channels[${i}]` : () => 'channel';
  const event = validateEvent(app, { ...params, channels }, '', named);
  quota.charge(app, messageCost(event.channels.length, event.info.size > 0));
  publishEvent(adapter, app.id, event);
  if (event.info.size === 0) return { status: 200, body: {} };
  return Promise.all(event.channels.map((c) => triggerInfo(adapter, app, c, event.info))).then((attributes) => {
    const out: Record<string, Record<string, number>> = {};
    event.channels.forEach((c, i) => {
      out[c] = attributes[i]!;
    });
    return { status: 200, body: { channels: out } };
  });
}

/** C2: up to app.maxBatchSize events, each to its own channel; `info` answered per index. */
export function triggerBatch(adapter: ChannelAdapter, quota: MessageQuota, req: ChannelApiRequest): Reply | Promise<Reply> {
  const { app } = req;
  const { batch } = parseWith(batchSchema, postParams(req.query, req.body));
  if (batch.length === 0) throw new HeraldError('INVALID_PARAMETERS', 'batch must hold at least one event');
  if (batch.length > app.maxBatchSize) {
    throw new HeraldError('INVALID_PARAMETERS', `batch holds ${batch.length} events; at most ${app.maxBatchSize} are allowed per request`);
  }
  const events = batch.map((raw, i) => {
    const where = `batch[${i}].`;
    const fields = parseWith(batchEventSchema, raw, `batch[${i}]`);
    return validateEvent(app, { ...fields, channels: [fields.channel] }, where, () => `${where}channel`);
  });
  quota.charge(app, events.reduce((sum, e) => sum + messageCost(1, e.info.size > 0), 0));
  for (const event of events) publishEvent(adapter, app.id, event);
  if (events.every((e) => e.info.size === 0)) return { status: 200, body: {} };
  // Events asking the same thing of the same channel share one lookup.
  const lookups = new Map<string, Promise<Record<string, number>>>();
  const answers = events.map((e) => {
    if (e.info.size === 0) return Promise.resolve({});
    const channel = e.channels[0]!;
    const key = `${[...e.info].sort().join(',')}\n${channel}`;
    let lookup = lookups.get(key);
    if (!lookup) {
      lookup = triggerInfo(adapter, app, channel, e.info);
      lookups.set(key, lookup);
    }
    return lookup;
  });
  return Promise.all(answers).then((attributes) => ({ status: 200, body: { batch: attributes } }));
}
