/**
 * Shard side of the channels area: channel state for the channels this shard owns (see
 * state/channel-store.ts) and the channel webhooks that state changes produce. Webhook events
 * are handed to the emitter raw and in the order they happen; debouncing is the webhook area's.
 *
 * For apps with webhooks, occupied channels and presence members are also recorded in LMDB
 * (state/occupancy-journal.ts). A worker starting after a crash or kill -9 finds the channels
 * its predecessor left occupied and emits their member_removed and channel_vacated, through
 * the page-reload debounce: clients that come back within pageReloadDebounceMs cancel them (their
 * channel_occupied / member_added are dropped with them), otherwise receivers learn the
 * channels are empty. After a worker crash, the main thread's restore re-records the
 * subscriptions it still holds: for those the shard emits channel_occupied / member_added
 * into the debounce, which cancels the held events in the same way.
 *
 * An app removed (admin API delete, or gone from a reloaded config) is emptied here when the
 * shard takes the removal (removeApps): its members removed and channels vacated with their
 * webhooks as the removed app's last ones, its cached events and occupancy record dropped. Its
 * sockets' leaves, which follow, find nothing left and change nothing.
 */
import type { AppConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { ChannelEventBody, WebhookEmitter } from '../webhooks/emitter.js';
import { channelType, countsSubscriptions } from './names.js';
import type { ChannelShardApi, MembershipOp, MembershipOpResult, ReconcileRemoval } from './messages.js';
import { ChannelStore, type JoinOutcome, type LeaveOutcome } from './state/channel-store.js';
import { Reconciler } from './state/reconciler.js';
import { subscriptionDigest } from './state/subscription-digest.js';
import { OccupancyJournal } from './state/occupancy-journal.js';
import { HistoryStore, type HistoryBounds } from './history/history-store.js';
import { keepsHistory } from './history/patterns.js';
import { parseSerial } from './history/serial.js';
import type { HistoryAppend, HistoryRecovery } from './messages.js';

type SubscribeReq = ChannelShardApi['channels.subscribe']['req'];
type SubscribeRes = ChannelShardApi['channels.subscribe']['res'];
type UnsubscribeReq = ChannelShardApi['channels.unsubscribe']['req'];
type UnsubscribeRes = ChannelShardApi['channels.unsubscribe']['res'];
type RestoredSubscription = ChannelShardApi['channels.restore']['req']['subscriptions'][number];

/** How often expired cache entries are dropped (ms); reads check expiry themselves. */
const CACHE_PRUNE_INTERVAL_MS = 60_000;
/** How often expired history events are dropped (ms); reads check expiry themselves. */
const HISTORY_PRUNE_INTERVAL_MS = 5_000;
/**
 * How long after start a restore may still cancel the vacated events emitted for recorded
 * channels (ms, after the page-reload debounce). Restores follow a worker restart within ms.
 */
const RECOVERY_WINDOW_MS = 60_000;

export function createChannelArea(ctx: ShardContext, webhooks: WebhookEmitter): ShardArea<ChannelShardApi> {
  const store = new ChannelStore();
  const apps = new Map<string, AppConfig>(ctx.config.apps.map((a) => [a.id, a]));
  const prune = setInterval(() => store.pruneCache(), CACHE_PRUNE_INTERVAL_MS);
  prune.unref();
  const journal = new OccupancyJournal(ctx.root);
  /** An app's history bounds on this shard; null when it keeps no history. Its bytes are shared evenly by the shards. */
  const historyBounds = (appId: string): HistoryBounds | null => {
    const app = apps.get(appId);
    if (!app?.history) return null;
    return { maxEvents: app.history.maxEvents, ttlSeconds: app.history.ttlSeconds, maxBytes: Math.floor(app.maxHistoryBytes / ctx.shardCount) };
  };
  const history = new HistoryStore(ctx.root, historyBounds);
  const historyPrune = setInterval(() => history.prune(historyBounds), HISTORY_PRUNE_INTERVAL_MS);
  historyPrune.unref();
  /** Keeps one event of a history channel: its serial (null: the app keeps no history for it now) and its write. */
  const appendHistory = (req: HistoryAppend): { serial: string | null; written: Promise<void>; answered: () => void } => {
    const app = appFor(req.appId);
    const bounds = historyBounds(req.appId);
    if (!bounds || !keepsHistory(app, req.channel)) return { serial: null, written: Promise.resolve(), answered: () => undefined };
    return history.append(req.appId, req.channel, req.event, req.data, req.userId, bounds);
  };
  /** The kept events after a recovering client's serial, read in the turn its join is recorded. */
  const recoveryAfter = (app: AppConfig, channel: string, since: string): HistoryRecovery => {
    const bounds = historyBounds(app.id);
    if (!bounds || !keepsHistory(app, channel)) return { events: [], failed: 'not_a_history_channel' };
    if (parseSerial(since) === null) return { events: [], failed: 'invalid_serial' };
    const read = history.read(app.id, channel, since, bounds.maxEvents, bounds);
    return read.complete ? { events: read.events, failed: null } : { events: [], failed: 'history_evicted' };
  };

  const appFor = (appId: string): AppConfig => {
    const app = apps.get(appId);
    if (!app) throw new HeraldError('APP_NOT_FOUND', `Unknown app id ${appId}`);
    return app;
  };
  const emit = (app: AppConfig, event: ChannelEventBody): void => {
    if (app.webhooks.length > 0) webhooks.channelEvent({ appId: app.id, event });
  };
  /** Keeps the occupancy record in step with a join (apps with webhooks only). */
  const recordJoin = (app: AppConfig, channel: string, outcome: JoinOutcome, userId: string | undefined): void => {
    if (app.webhooks.length === 0 || !outcome.changed) return;
    if (outcome.occupied) journal.occupied(app.id, channel);
    if (outcome.memberAdded && userId !== undefined) journal.memberAdded(app.id, channel, userId);
  };
  const recordLeave = (app: AppConfig, channel: string, outcome: LeaveOutcome): void => {
    if (app.webhooks.length === 0 || !outcome.changed) return;
    if (outcome.memberRemoved !== null) journal.memberRemoved(app.id, channel, outcome.memberRemoved);
    if (outcome.vacated) journal.vacated(app.id, channel);
  };
  /**
   * Apps that were removed (deleted, or gone from a reloaded config): their state is dropped
   * here, where it lives, not left to their sockets' leaves (those come after the removal and
   * find the app gone). Each member is removed and each channel vacated with their webhooks, to
   * the receivers the app had (`retired`: signed with its credentials, not held by the reload
   * debounce), its occupancy record is cleared and its cached events go, so that an app created
   * later with the same id starts empty.
   */
  const removeApps = (appIds: Iterable<string>): void => {
    for (const appId of appIds) {
      const app = apps.get(appId);
      apps.delete(appId);
      const hooked = app !== undefined && app.webhooks.length > 0;
      const occupied = store.removeApp(appId);
      history.removeApp(appId);
      for (const { channel, members } of occupied) {
        for (const userId of members) {
          journal.memberRemoved(appId, channel, userId);
          if (hooked) webhooks.channelEvent({ appId, event: { name: 'member_removed', channel, user_id: userId } }, { retired: true });
        }
        journal.vacated(appId, channel);
        if (hooked) webhooks.channelEvent({ appId, event: { name: 'channel_vacated', channel } }, { retired: true });
      }
      if (occupied.length > 0) log.info('app removed: its channels vacated', { appId, shard: ctx.shardIndex, channels: occupied.length });
    }
  };

  const recovered = recoverOccupancy(journal, apps, emit);
  const forgetRecovered = setTimeout(() => recovered.clear(), ctx.config.webhookDelivery.pageReloadDebounceMs + RECOVERY_WINDOW_MS);
  forgetRecovered.unref();

  const subscribe = (req: SubscribeReq): SubscribeRes => {
    const app = appFor(req.appId);
    const type = channelType(req.channel);
    const presence = type.kind === 'presence';
    const outcome = store.join({ ...req, maxMembers: app.maxPresenceMembers }, presence);
    recordJoin(app, req.channel, outcome, req.member?.userId);
    if (outcome.changed) {
      if (outcome.occupied) emit(app, { name: 'channel_occupied', channel: req.channel });
      if (outcome.memberAdded && req.member) emit(app, { name: 'member_added', channel: req.channel, user_id: req.member.userId });
      if (countsSubscriptions(app, req.channel)) {
        emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
      }
    }
    const res: SubscribeRes = { subscriptionCount: outcome.subscriptionCount, occupied: outcome.changed && outcome.occupied };
    if (presence) {
      res.memberAdded = outcome.memberAdded;
      res.presence = store.presenceJson(req.appId, req.channel) ?? '{"ids":[],"hash":{},"count":0}';
    }
    if (type.cache) {
      const cached = store.cached(req.appId, req.channel);
      res.cached = cached ? { event: cached.event, data: cached.data } : null;
      if (!cached) emit(app, { name: 'cache_miss', channel: req.channel });
    }
    if (req.since !== undefined) res.recovery = recoveryAfter(app, req.channel, req.since);
    return res;
  };

  /**
   * A leave, with its webhooks; answers the outcome too (reconcile reports removals). The leave
   * of a socket whose app was removed changes nothing: the app's state went with it (removeApps).
   */
  const leave = (req: UnsubscribeReq): { res: UnsubscribeRes; outcome: LeaveOutcome; app: AppConfig | undefined } => {
    const app = apps.get(req.appId);
    const outcome = store.leave(req.appId, req.channel, req.socketId);
    if (app) recordLeave(app, req.channel, outcome);
    if (app && outcome.changed) {
      if (outcome.memberRemoved !== null) emit(app, { name: 'member_removed', channel: req.channel, user_id: outcome.memberRemoved });
      if (countsSubscriptions(app, req.channel)) {
        emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
      }
      if (outcome.vacated) emit(app, { name: 'channel_vacated', channel: req.channel });
    }
    const res: UnsubscribeRes = { subscriptionCount: outcome.subscriptionCount, vacated: outcome.changed && outcome.vacated };
    if (channelType(req.channel).kind === 'presence') res.memberRemoved = outcome.memberRemoved !== null;
    return { res, outcome, app };
  };
  const unsubscribe = (req: UnsubscribeReq): UnsubscribeRes => leave(req).res;

  /** One op of a batch: its own answer or error, never an exception out of the batch. */
  const applyMembership = (op: MembershipOp): MembershipOpResult => {
    try {
      return { ok: true, value: 'join' in op ? subscribe(op.join) : unsubscribe(op.leave) };
    } catch (err) {
      if (err instanceof HeraldError) return { ok: false, code: err.code, message: err.message };
      log.error('channel membership op failed', { shard: ctx.shardIndex, error: describeError(err) });
      return { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard' };
    }
  };

  /**
   * Records again, silently, subscriptions the shard lost (worker restart, reconcile): no
   * frames, no webhooks, no member limit; answers how many it added.
   */
  const restore = (appId: string, subscriptions: readonly RestoredSubscription[]): number => {
    const app = appFor(appId);
    let restored = 0;
    for (const sub of subscriptions) {
      const presence = channelType(sub.channel).kind === 'presence';
      if (presence && !sub.member) continue;
      const join = { appId, channel: sub.channel, socketId: sub.socketId, maxMembers: Number.POSITIVE_INFINITY };
      const outcome = store.join(sub.member ? { ...join, member: sub.member } : join, presence);
      if (!outcome.changed) continue;
      restored++;
      const userId = presence ? sub.member?.userId : undefined;
      recordJoin(app, sub.channel, outcome, userId);
      // Silent, except where this start emitted a vacated / member_removed for the channel
      // (recorded occupied by the previous worker): the re-occupy cancels it in the debounce.
      if (outcome.occupied && recovered.delete(recoveredKey(appId, sub.channel))) {
        emit(app, { name: 'channel_occupied', channel: sub.channel });
      }
      if (outcome.memberAdded && userId !== undefined && recovered.delete(recoveredKey(appId, sub.channel, userId))) {
        emit(app, { name: 'member_added', channel: sub.channel, user_id: userId });
      }
    }
    return restored;
  };

  const reconciler = new Reconciler({
    stored: () => store.subscriptions(),
    remove: (appId, channel, socketId) => {
      const { outcome, app } = leave({ appId, channel, socketId });
      const removal: ReconcileRemoval = { appId, channel };
      if (outcome.memberRemoved !== null) removal.memberRemoved = outcome.memberRemoved;
      if (app && countsSubscriptions(app, channel)) removal.subscriptionCount = outcome.subscriptionCount;
      return removal;
    },
    restore: (appId, subscriptions) => (apps.has(appId) ? restore(appId, subscriptions) : 0),
  });

  return {
    handlers: {
      'channels.subscribe': (req) => subscribe(req),
      'channels.unsubscribe': (req) => unsubscribe(req),
      'channels.memberships': (req) => ({ results: req.ops.map(applyMembership) }),
      'channels.reconcile': (req) => reconciler.part(req),
      'channels.digest': () => subscriptionDigest(store.subscriptions()),
      'channels.restore': (req) => ({ restored: restore(req.appId, req.subscriptions) }),

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

      'channels.list': (req) => store.list(req.appId, req.prefix, req.withUserCount),

      'channels.counts': (req) => store.occupiedCounts(req.appIds),

      'channels.users': (req) => ({ userIds: store.userIds(req.appId, req.channel) }),

      'channels.storeCache': (req) => {
        const app = appFor(req.appId);
        // The app's bound is shared evenly by the shards (channels hash evenly over them).
        store.storeCached(req.appId, req.channel, req.event, req.data, app.cacheTtlSeconds, Math.floor(app.maxCacheBytes / ctx.shardCount));
        return {};
      },

      'channels.historyAppends': async (req) => {
        // Answered once committed: commits resolve in order, so the answers keep serial order.
        const taken = req.appends.map((append) => {
          try {
            return appendHistory(append);
          } catch (err) {
            return { failed: err };
          }
        });
        const results = await Promise.all(
          taken.map(async (t): Promise<ChannelShardApi['channels.historyAppends']['res']['results'][number]> => {
            try {
              if ('failed' in t) throw t.failed;
              await t.written;
              return { ok: true, serial: t.serial };
            } catch (err) {
              if (err instanceof HeraldError) return { ok: false, code: err.code, message: err.message };
              log.error('channel history append failed', { shard: ctx.shardIndex, error: describeError(err) });
              return { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard' };
            }
          }),
        );
        // Readable from now on: the answer goes out in this turn, before any later request is taken.
        for (const t of taken) if (!('failed' in t)) t.answered();
        return { results };
      },

      'channels.history': (req) => {
        const bounds = historyBounds(req.appId);
        if (!bounds) return { events: [], complete: true };
        return history.read(req.appId, req.channel, req.since, req.limit, bounds);
      },

      'channels.clientEvent': (req) => {
        const event: ChannelEventBody = { name: 'client_event', channel: req.channel, event: req.event, data: req.data, socket_id: req.socketId };
        if (req.userId !== undefined) event.user_id = req.userId;
        emit(appFor(req.appId), event);
        return {};
      },
    },
    storageWrites: ['channels.historyAppends'],
    reload: (config) => {
      const kept = new Set(config.apps.map((a) => a.id));
      removeApps([...apps.keys()].filter((appId) => !kept.has(appId)));
      apps.clear();
      for (const app of config.apps) apps.set(app.id, app);
    },
    tenantsChanged: (change) => {
      removeApps(change.removedApps ?? []);
      for (const app of change.apps ?? []) apps.set(app.id, app);
    },
    close: async () => {
      clearInterval(prune);
      clearInterval(historyPrune);
      clearTimeout(forgetRecovered);
    },
  };
}

function recoveredKey(appId: string, channel: string, userId?: string): string {
  return userId === undefined ? JSON.stringify([appId, channel]) : JSON.stringify([appId, channel, userId]);
}

/**
 * Reads (and clears) the occupancy record left by the previous worker and emits, for each
 * recorded channel of an app that still has webhooks, member_removed for its members then
 * channel_vacated, as a real leave would. Answers the keys of what it emitted, so a restore
 * can cancel them.
 */
function recoverOccupancy(
  journal: OccupancyJournal,
  apps: ReadonlyMap<string, AppConfig>,
  emit: (app: AppConfig, event: ChannelEventBody) => void,
): Set<string> {
  const emitted = new Set<string>();
  let channels = 0;
  for (const { appId, channel, members } of journal.takeAll()) {
    const app = apps.get(appId);
    if (!app || app.webhooks.length === 0) continue;
    channels++;
    for (const userId of members) {
      emit(app, { name: 'member_removed', channel, user_id: userId });
      emitted.add(recoveredKey(appId, channel, userId));
    }
    emit(app, { name: 'channel_vacated', channel });
    emitted.add(recoveredKey(appId, channel));
  }
  if (channels > 0) log.info('channels left occupied by the previous worker: vacated (debounced)', { channels, members: emitted.size - channels });
  return emitted;
}
