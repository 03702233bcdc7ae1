/**
 * C1 POST /apps/<app_id>/events and C2 POST /apps/<app_id>/batch_events. A trigger is
 * validated, charged to the app's quota, then handed to the channel adapter (a synchronous
 * hand-off: the channel state is not awaited) and answered. Only `info` makes the answer wait,
 * for the counts of the channels triggered to, and in a cluster the relay to the other nodes
 * (`cluster.relayed()`).
 */
import { appCounters } from '../../metrics/node-counters.js';
import type { AppConfig } from '../../config/schema.js';
import type { Reply } from '../../http/uws-http.js';
import { HeraldError } from '../../errors.js';
import { log } from '../../log.js';
import { keepsHistory } from '../history/patterns.js';
import type { ChannelAdapter, MessageCharger } from '../adapter/channel-adapter.js';
import {
  isCacheChannel,
  isPresenceChannel,
  isValidSocketId,
  isValidTriggerChannel,
  MAX_USER_ID_LENGTH,
  SERVER_TO_USER_PREFIX,
  serverToUserId,
} from '../names.js';
import { parseBatchEventParams, parseBatchParams, parseInfo, parseTriggerParams, postParams, type InfoAttribute } from './params.js';
import { messageCost } from '../quota.js';
import type { ChannelApiRequest } from './request.js';
import type { DebugTap } from '../../debug-tap/tap.js';
import type { AppRateLimits } from '../rate-limits/app-rate-limits.js';

/** The events rate limit a trigger is counted against (maxEventsPerSecond). */
export type EventRateLimit = Pick<AppRateLimits, 'events'>;

/** Attributes a trigger may ask for (cache is only for C4). */
const TRIGGER_INFO: readonly InfoAttribute[] = ['user_count', 'subscription_count'];
/** The info of an event that asks for none (shared: never mutated). */
const NO_INFO: ReadonlySet<InfoAttribute> = new Set();
/** The answer to a trigger without info (the JSON of `{}`, not re-encoded per request). */
const emptyOk = (): Reply => ({ status: 200, body: '{}' });

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
 * Where an event stands in its request, for error messages: C1's `channels` array or its
 * `channel`, or the index of a C2 batch's event. A value rather than the message text, so
 * the text is built only when a rule fails.
 */
export type EventSource = 'channels' | 'channel' | number;

function channelLabel(source: EventSource, i: number): string {
  if (typeof source === 'number') return `batch[${source}].channel`;
  return source === 'channels' ? `channels[${i}]` : 'channel';
}

function fieldPrefix(source: EventSource): string {
  return typeof source === 'number' ? `batch[${source}].` : '';
}

/**
 * Applies the rules that shape alone does not: channel names (plus `#server-to-user-<user id>`,
 * the SDK's sendToUser), socket id, info attribute names and the app's data size limit (413).
 * `fields.channels` becomes the event's own when it names one channel (callers hand a fresh array).
 */
export function validateEvent(app: AppConfig, fields: EventFields, source: EventSource): ValidEvent {
  const channels = fields.channels;
  for (let i = 0; i < channels.length; i++) {
    const channel = channels[i]!;
    if (isValidTriggerChannel(channel)) continue;
    const quoted = `${channelLabel(source, i)} '${channel.slice(0, 230)}'`;
    if (channel.startsWith(SERVER_TO_USER_PREFIX)) {
      throw new HeraldError('INVALID_CHANNEL_NAME', `${quoted} names no user: the user id after ${SERVER_TO_USER_PREFIX} must be 1 to ${MAX_USER_ID_LENGTH} characters`);
    }
    throw new HeraldError(
      'INVALID_CHANNEL_NAME',
      `${quoted} is not a valid channel name: 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ; (or ${SERVER_TO_USER_PREFIX}<user id>)`,
    );
  }
  if (fields.socket_id !== undefined && !isValidSocketId(fields.socket_id)) {
    throw new HeraldError('INVALID_SOCKET_ID', `${fieldPrefix(source)}socket_id '${fields.socket_id.slice(0, 64)}' is not a socket id (<digits>.<digits>)`);
  }
  const info = fields.info === undefined ? NO_INFO : parseInfo(fields.info, TRIGGER_INFO, `${fieldPrefix(source)}info`);
  // A UTF-16 unit is at most 3 UTF-8 bytes: short data cannot be over the limit, no need to count.
  if (fields.data.length * 3 > app.maxEventDataBytes) {
    const bytes = Buffer.byteLength(fields.data, 'utf8');
    if (bytes > app.maxEventDataBytes) {
      throw new HeraldError('EVENT_DATA_TOO_LARGE', `${fieldPrefix(source)}data is ${bytes} bytes; the limit is ${app.maxEventDataBytes} bytes`);
    }
  }
  const event: ValidEvent = { name: fields.name, data: fields.data, channels: channels.length === 1 ? (channels as string[]) : [...new Set(channels)], info };
  if (fields.socket_id !== undefined) event.socketId = fields.socket_id;
  return event;
}

/**
 * Hands an event to the adapter: one frame per channel, built once, `data` exactly as
 * triggered; the socket_id's connection is left out. Cache channels also keep it. A
 * `#server-to-user-<id>` frame goes out the same way: the user's signed-in connections
 * subscribed to that channel's topic (ws/protocol.ts). History channels (apps[].history) go
 * through the channel's owner, which gives each event its serial: the answer is then a
 * promise that resolves once every such frame went out (a caller may ignore it: its failure is
 * handled), undefined when no channel keeps history (the hot path stays synchronous).
 */
export function publishEvent(adapter: ChannelAdapter, app: Pick<AppConfig, 'id' | 'history'>, event: ValidEvent): Promise<unknown> | undefined {
  const appId = app.id;
  // Several channels share the JSON of name and data (up to 10 KB): encoded once, the same
  // bytes as JSON.stringify({ event, channel, data }) per channel.
  appCounters(appId).eventsTriggered += event.channels.length;
  const shared = event.channels.length > 1;
  const head = shared ? `{"event":${JSON.stringify(event.name)},"channel":` : '';
  const tail = shared ? `,"data":${JSON.stringify(event.data)}}` : '';
  let kept: Promise<void>[] | undefined;
  for (const channel of event.channels) {
    if (app.history !== null && keepsHistory(app, channel)) {
      (kept ??= []).push(adapter.publishKept(appId, channel, event.name, event.data, event.socketId));
      if (isCacheChannel(channel)) adapter.storeCachedEvent(appId, channel, event.name, event.data);
      continue;
    }
    const frame = shared ? head + JSON.stringify(channel) + tail : JSON.stringify({ event: event.name, channel, data: event.data });
    adapter.publish(appId, channel, frame, event.socketId);
    if (isCacheChannel(channel)) adapter.storeCachedEvent(appId, channel, event.name, event.data);
  }
  if (!kept) return undefined;
  const all = Promise.all(kept);
  all.catch((err: unknown) => log.warn('history event not published', { appId, error: String(err) }));
  return all;
}

/**
 * The attributes of one channel a trigger asked for. Attributes that do not apply to the
 * channel (user_count off presence, subscription_count on presence or when the app does not
 * count subscriptions, any on `#server-to-user-<id>`, which keeps no state) are left out, so
 * the object may be empty.
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
export function triggerEvent(
  adapter: ChannelAdapter,
  quota: MessageCharger,
  req: ChannelApiRequest,
  debug?: Pick<DebugTap, 'apiEvent'>,
  limits?: EventRateLimit,
): Reply | Promise<Reply> {
  const { app } = req;
  const params = parseTriggerParams(postParams(req.query, req.body));
  if (params.channel !== undefined && params.channels !== undefined) {
    throw new HeraldError('INVALID_PARAMETERS', 'Give either channels or channel, not both');
  }
  const channels = params.channels ?? (params.channel !== undefined ? [params.channel] : undefined);
  if (channels === undefined) throw new HeraldError('INVALID_PARAMETERS', 'channels (or channel) is required');
  const event = validateEvent(app, { name: params.name, data: params.data, channels, socket_id: params.socket_id, info: params.info }, params.channels !== undefined ? 'channels' : 'channel');
  adapter.cluster?.checkAvailable();
  // No closure on one node's path: the rate limit and the quota answer at once there.
  const limited = limits?.events(app, 1);
  if (limited instanceof Promise) return limited.then(() => chargeEvent(adapter, quota, app, event, debug));
  return chargeEvent(adapter, quota, app, event, debug);
}

function chargeEvent(adapter: ChannelAdapter, quota: MessageCharger, app: AppConfig, event: ValidEvent, debug: Pick<DebugTap, 'apiEvent'> | undefined): Reply | Promise<Reply> {
  const charged = quota.charge(app, messageCost(event.channels.length, event.info.size > 0));
  if (charged instanceof Promise) return charged.then(() => sendEvent(adapter, app, event, debug));
  return sendEvent(adapter, app, event, debug);
}

/** Publishes a charged C1 event and answers: at once, or once relayed (cluster, history) and with the info asked for. */
function sendEvent(adapter: ChannelAdapter, app: AppConfig, event: ValidEvent, debug: Pick<DebugTap, 'apiEvent'> | undefined): Reply | Promise<Reply> {
  const kept = publishEvent(adapter, app, event);
  debug?.apiEvent(app.id, event.channels, event.name, event.data, event.socketId);
  const relayed = kept ?? adapter.cluster?.relayed();
  if (event.info.size === 0) return relayed ? relayed.then(emptyOk) : emptyOk();
  return Promise.all([relayed, ...event.channels.map((c) => triggerInfo(adapter, app, c, event.info))]).then(([, ...attributes]) => {
    const out: Record<string, Record<string, number>> = {};
    event.channels.forEach((c, i) => {
      out[c] = attributes[i]!;
    });
    return { status: 200, body: { channels: out } };
  });
}

/**
 * Runs `then` once the quota charge is done: at once when it was synchronous (one node, the
 * hot path: no promise), after it resolves when it was counted elsewhere (cluster).
 */
function afterCharge(charged: void | Promise<void> | undefined, then: () => Reply | Promise<Reply>): Reply | Promise<Reply> {
  return charged instanceof Promise ? charged.then(then) : then();
}

/** C2: up to app.maxBatchSize events, each to its own channel; `info` answered per index. */
export function triggerBatch(
  adapter: ChannelAdapter,
  quota: MessageCharger,
  req: ChannelApiRequest,
  debug?: Pick<DebugTap, 'apiEvent'>,
  limits?: EventRateLimit,
): Reply | Promise<Reply> {
  const { app } = req;
  const { batch } = parseBatchParams(postParams(req.query, req.body));
  if (batch.length === 0) throw new HeraldError('INVALID_PARAMETERS', 'batch must hold at least one event');
  if (batch.length > app.maxBatchSize) {
    throw new HeraldError('INVALID_PARAMETERS', `batch holds ${batch.length} events; at most ${app.maxBatchSize} are allowed per request`);
  }
  const events: ValidEvent[] = new Array(batch.length);
  let cost = 0;
  let withInfo = false;
  for (let i = 0; i < batch.length; i++) {
    const fields = parseBatchEventParams(batch[i], i);
    const event = validateEvent(app, { name: fields.name, data: fields.data, channels: [fields.channel], socket_id: fields.socket_id, info: fields.info }, i);
    events[i] = event;
    cost += messageCost(1, event.info.size > 0);
    if (event.info.size > 0) withInfo = true;
  }
  adapter.cluster?.checkAvailable();
  return afterCharge(limits?.events(app, events.length), () => afterCharge(quota.charge(app, cost), () => {
    let kept: Promise<unknown>[] | undefined;
    for (const event of events) {
      const published = publishEvent(adapter, app, event);
      if (published) (kept ??= []).push(published);
      debug?.apiEvent(app.id, event.channels, event.name, event.data, event.socketId);
    }
    const relayed = kept ? Promise.all(kept) : adapter.cluster?.relayed();
    if (!withInfo) return relayed ? relayed.then(emptyOk) : emptyOk();
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
    return Promise.all([relayed, ...answers]).then(([, ...attributes]) => ({ status: 200, body: { batch: attributes } }));
  }));
}
