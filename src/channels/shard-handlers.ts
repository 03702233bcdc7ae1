/**
 * Shard side of the channels area: channel state for the channels this shard owns (see
 * state/channel-store.ts) and the channel webhooks that state changes produce. Webhook events
 * are handed to the emitter raw and in the order they happen; debouncing is the webhook area's.
 */
import type { AppConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { ChannelEventBody, WebhookEmitter } from '../webhooks/emitter.js';
import { channelType } from './names.js';
import type { ChannelShardApi } from './shard-api.js';
import { ChannelStore } from './state/channel-store.js';

/** How often expired cache entries are dropped (ms); reads check expiry themselves. */
const CACHE_PRUNE_INTERVAL_MS = 60_000;

export function createChannelArea(ctx: ShardContext, webhooks: WebhookEmitter): ShardArea<ChannelShardApi> {
  const store = new ChannelStore();
  const apps = new Map<string, AppConfig>(ctx.config.apps.map((a) => [a.id, a]));
  const prune = setInterval(() => store.pruneCache(), CACHE_PRUNE_INTERVAL_MS);
  prune.unref();

  const appFor = (appId: string): AppConfig => {
    const app = apps.get(appId);
    if (!app) throw new HeraldError('APP_NOT_FOUND', `Unknown app id ${appId}`);
    return app;
  };
  const emit = (app: AppConfig, event: ChannelEventBody): void => {
    if (app.webhooks.length > 0) webhooks.channelEvent({ appId: app.id, event });
  };
  /** subscription_count webhooks follow the app's subscriptionCount switch, like the socket event. */
  const countsSubscriptions = (app: AppConfig, channel: string): boolean =>
    app.subscriptionCount && channelType(channel).kind !== 'presence';

  return {
    handlers: {
      'channels.subscribe': (req) => {
        const app = appFor(req.appId);
        const type = channelType(req.channel);
        const presence = type.kind === 'presence';
        const outcome = store.join({ ...req, maxMembers: app.maxPresenceMembers }, presence);
        if (outcome.changed) {
          if (outcome.occupied) emit(app, { name: 'channel_occupied', channel: req.channel });
          if (outcome.memberAdded && req.member) emit(app, { name: 'member_added', channel: req.channel, user_id: req.member.userId });
          if (countsSubscriptions(app, req.channel)) {
            emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
          }
        }
        const res: ChannelShardApi['channels.subscribe']['res'] = { subscriptionCount: outcome.subscriptionCount };
        if (presence) {
          res.memberAdded = outcome.memberAdded;
          res.members = outcome.members ?? [];
        }
        if (type.cache) {
          const cached = store.cached(req.appId, req.channel);
          res.cached = cached ? { event: cached.event, data: cached.data } : null;
          if (!cached) emit(app, { name: 'cache_miss', channel: req.channel });
        }
        return res;
      },

      'channels.unsubscribe': (req) => {
        const app = appFor(req.appId);
        const outcome = store.leave(req.appId, req.channel, req.socketId);
        if (outcome.changed) {
          if (outcome.memberRemoved !== null) emit(app, { name: 'member_removed', channel: req.channel, user_id: outcome.memberRemoved });
          if (countsSubscriptions(app, req.channel)) {
            emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
          }
          if (outcome.vacated) emit(app, { name: 'channel_vacated', channel: req.channel });
        }
        const res: ChannelShardApi['channels.unsubscribe']['res'] = { subscriptionCount: outcome.subscriptionCount };
        if (channelType(req.channel).kind === 'presence') res.memberRemoved = outcome.memberRemoved !== null;
        return res;
      },

      'channels.restore': (req) => {
        appFor(req.appId);
        let restored = 0;
        for (const sub of req.subscriptions) {
          const presence = channelType(sub.channel).kind === 'presence';
          if (presence && !sub.member) continue;
          const join = { appId: req.appId, channel: sub.channel, socketId: sub.socketId, maxMembers: Number.POSITIVE_INFINITY };
          if (store.join(sub.member ? { ...join, member: sub.member } : join, presence).changed) restored++;
        }
        return { restored };
      },

      'channels.info': (req) => {
        const subscriptionCount = store.subscriptionCount(req.appId, req.channel);
        const res: ChannelShardApi['channels.info']['res'] = { occupied: subscriptionCount > 0 };
        if (req.userCount) res.userCount = store.userCount(req.appId, req.channel);
        if (req.subscriptionCount) res.subscriptionCount = subscriptionCount;
        if (req.cache) {
          const cached = store.cached(req.appId, req.channel);
          res.cache = cached ? { data: cached.data, ttl: cached.ttl } : null;
        }
        return res;
      },

      'channels.list': (req) => ({
        channels: store.list(req.appId, req.prefix).map((c): [string, number | null] => [c.channel, req.withUserCount ? c.userCount : null]),
      }),

      'channels.users': (req) => ({ userIds: store.userIds(req.appId, req.channel) }),

      'channels.storeCache': (req) => {
        store.storeCached(req.appId, req.channel, req.event, req.data, appFor(req.appId).cacheTtlSeconds);
        return {};
      },

      'channels.clientEvent': (req) => {
        const event: ChannelEventBody = { name: 'client_event', channel: req.channel, event: req.event, data: req.data, socket_id: req.socketId };
        if (req.userId !== undefined) event.user_id = req.userId;
        emit(appFor(req.appId), event);
        return {};
      },
    },
    close: async () => {
      clearInterval(prune);
    },
  };
}
