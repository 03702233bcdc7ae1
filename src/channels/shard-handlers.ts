/**
 * Shard side of the channels area: channel state for the channels this shard owns (see
 * state/channel-store.ts) and the channel webhooks that state changes produce. Webhook events
 * are handed to the emitter raw and in the order they happen; debouncing is the webhook area's.
 *
 * For apps with webhooks, occupied channels and presence members are also recorded in LMDB
 * (state/occupancy-journal.ts, kept by state/occupancy-recovery.ts). A worker starting after a crash or kill -9 finds the channels
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
 *
 * History channels keep their events in history/shard-history.ts.
 */
import type { AppConfig } from '../config/schema.js';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import type { ShardArea, ShardContext } from '../shards/context.js';
import type { ChannelEventBody, WebhookEmitter } from '../webhooks/emitter.js';
import { channelType, countsSubscriptions } from './names.js';
import type { ChannelShardApi, MembershipOp, MembershipOpResult, ReconcileRemoval } from './messages.js';
import { ChannelStore, type LeaveOutcome } from './state/channel-store.js';
import { Reconciler } from './state/reconciler.js';
import { OccupancyRecovery } from './state/occupancy-recovery.js';
import { ShardHistory } from './history/shard-history.js';

type SubscribeReq = ChannelShardApi['channels.subscribe']['req'];
type SubscribeRes = ChannelShardApi['channels.subscribe']['res'];
type UnsubscribeReq = ChannelShardApi['channels.unsubscribe']['req'];
type UnsubscribeRes = ChannelShardApi['channels.unsubscribe']['res'];
type RestoredSubscription = ChannelShardApi['channels.restore']['req']['subscriptions'][number];

/** How often expired cache entries are dropped (ms); reads check expiry themselves. */
const CACHE_PRUNE_INTERVAL_MS = 60_000;
/**
 * How long after start a restore may still cancel the vacated events emitted for recorded
 * channels (ms, after the page-reload debounce). Restores follow a worker restart within ms.
 */
const RECOVERY_WINDOW_MS = 60_000;

/** Builds the channel area of one shard: its handlers over the parts below, and the recovery of the previous worker's channels. */
export function createChannelArea(ctx: ShardContext, webhooks: WebhookEmitter): ShardArea<ChannelShardApi> {
  const area = new ChannelArea(ctx, webhooks);
  const { store, history } = area;
  return {
    handlers: {
      'channels.subscribe': (req) => area.subscribe(req),
      'channels.unsubscribe': (req) => area.unsubscribe(req),
      'channels.memberships': (req) => ({ results: req.ops.map((op) => area.applyMembership(op)) }),
      'channels.reconcile': (req) => area.reconciler.part(req),
      'channels.digest': (req) => area.reconciler.digest(req.frontEnd),
      'channels.dropFrontEnd': (req) => ({ removed: area.reconciler.drop(req.frontEnd) }),
      'channels.restore': (req) => ({ restored: area.restore(req.appId, req.subscriptions) }),

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
        const app = area.appFor(req.appId);
        // The app's bound is shared evenly by the shards (channels hash evenly over them).
        store.storeCached(req.appId, req.channel, req.event, req.data, app.cacheTtlSeconds, Math.floor(app.maxCacheBytes / ctx.shardCount));
        return {};
      },

      'channels.historyAppends': (req) => history.appendAll(req.appends, (appId) => area.appFor(appId)),

      'channels.history': (req) => history.read(req.appId, req.channel, req.since, req.limit),

      'channels.clientEvent': (req) => {
        const event: ChannelEventBody = { name: 'client_event', channel: req.channel, event: req.event, data: req.data, socket_id: req.socketId };
        if (req.userId !== undefined) event.user_id = req.userId;
        area.emit(area.appFor(req.appId), event);
        return {};
      },
    },
    storageWrites: ['channels.historyAppends'],
    reload: (config) => area.replaceApps(config.apps),
    tenantsChanged: (change) => area.changeApps(change.apps ?? [], change.removedApps ?? []),
    close: async () => area.close(),
  };
}

/**
 * One shard's channels: the apps it serves, their channel state (ChannelStore), its
 * occupancy record and history, and the joins and leaves with the webhooks they produce.
 */
class ChannelArea {
  readonly store = new ChannelStore();
  readonly history: ShardHistory;
  readonly reconciler: Reconciler;
  private readonly apps: Map<string, AppConfig>;
  private readonly occupancy: OccupancyRecovery;
  private readonly prune: NodeJS.Timeout;

  constructor(
    private readonly ctx: ShardContext,
    private readonly webhooks: WebhookEmitter,
  ) {
    this.apps = new Map<string, AppConfig>(ctx.config.apps.map((a) => [a.id, a]));
    this.prune = setInterval(() => this.store.pruneCache(), CACHE_PRUNE_INTERVAL_MS);
    this.prune.unref();
    this.occupancy = new OccupancyRecovery(ctx.root, this.apps, (app, event) => this.emit(app, event), ctx.config.webhookDelivery.pageReloadDebounceMs + RECOVERY_WINDOW_MS, ctx.onServing);
    this.history = new ShardHistory(ctx.root, ctx, (appId) => this.apps.get(appId));
    this.reconciler = new Reconciler({
      stored: () => this.store.subscriptions(),
      remove: (appId, channel, socketId) => {
        const { outcome, app } = this.leave({ appId, channel, socketId });
        const removal: ReconcileRemoval = { appId, channel };
        if (outcome.memberRemoved !== null) removal.memberRemoved = outcome.memberRemoved;
        if (app && countsSubscriptions(app, channel)) removal.subscriptionCount = outcome.subscriptionCount;
        return removal;
      },
      restore: (appId, subscriptions) => (this.apps.has(appId) ? this.restore(appId, subscriptions) : 0),
    });
  }

  /** The app's config; 404 APP_NOT_FOUND for an app this shard does not serve. */
  appFor(appId: string): AppConfig {
    const app = this.apps.get(appId);
    if (!app) throw new HeraldError('APP_NOT_FOUND', `Unknown app id ${appId}`);
    return app;
  }

  /** Hands a channel event to the webhook area, for an app with webhooks. */
  emit(app: AppConfig, event: ChannelEventBody): void {
    if (app.webhooks.length > 0) this.webhooks.channelEvent({ appId: app.id, event });
  }

  /** A join, with its webhooks, the presence state, the cached event and a recovering client's history, as asked. */
  subscribe(req: SubscribeReq): SubscribeRes {
    const app = this.appFor(req.appId);
    const type = channelType(req.channel);
    const presence = type.kind === 'presence';
    const outcome = this.store.join({ ...req, maxMembers: app.maxPresenceMembers }, presence);
    this.occupancy.recordJoin(app, req.channel, outcome, req.member?.userId);
    if (outcome.changed) {
      // A channel (or member) the previous worker left, whose leave has not gone out yet: neither goes out.
      if (outcome.occupied && !this.occupancy.takeBack(app.id, req.channel)) this.emit(app, { name: 'channel_occupied', channel: req.channel });
      if (outcome.memberAdded && req.member && !this.occupancy.takeBack(app.id, req.channel, req.member.userId)) {
        this.emit(app, { name: 'member_added', channel: req.channel, user_id: req.member.userId });
      }
      if (countsSubscriptions(app, req.channel)) {
        this.emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
      }
    }
    const res: SubscribeRes = { subscriptionCount: outcome.subscriptionCount, occupied: outcome.changed && outcome.occupied };
    if (presence) {
      res.memberAdded = outcome.memberAdded;
      res.presence = this.store.presenceJson(req.appId, req.channel) ?? '{"ids":[],"hash":{},"count":0}';
    }
    if (type.cache) {
      const cached = this.store.cached(req.appId, req.channel);
      res.cached = cached ? { event: cached.event, data: cached.data } : null;
      if (!cached) this.emit(app, { name: 'cache_miss', channel: req.channel });
    }
    if (req.since !== undefined) res.recovery = this.history.recoveryAfter(app, req.channel, req.since, req.socketId, req.previousSocketIds);
    return res;
  }

  unsubscribe(req: UnsubscribeReq): UnsubscribeRes {
    return this.leave(req).res;
  }

  /** One op of a batch: its own answer or error, never an exception out of the batch. */
  applyMembership(op: MembershipOp): MembershipOpResult {
    try {
      return { ok: true, value: 'join' in op ? this.subscribe(op.join) : this.unsubscribe(op.leave) };
    } catch (err) {
      if (err instanceof HeraldError) return { ok: false, code: err.code, message: err.message };
      log.error('channel membership op failed', { shard: this.ctx.shardIndex, error: describeError(err) });
      return { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard' };
    }
  }

  /**
   * Records again, silently, subscriptions the shard lost (worker restart, reconcile): no
   * frames, no webhooks, no member limit; answers how many it added.
   */
  restore(appId: string, subscriptions: readonly RestoredSubscription[]): number {
    const app = this.appFor(appId);
    let restored = 0;
    for (const sub of subscriptions) {
      const presence = channelType(sub.channel).kind === 'presence';
      if (presence && !sub.member) continue;
      const join = { appId, channel: sub.channel, socketId: sub.socketId, maxMembers: Number.POSITIVE_INFINITY };
      const outcome = this.store.join(sub.member ? { ...join, member: sub.member } : join, presence);
      if (!outcome.changed) continue;
      restored++;
      const userId = presence ? sub.member?.userId : undefined;
      this.occupancy.recordJoin(app, sub.channel, outcome, userId);
      // Silent, except where this start emitted a vacated / member_removed for the channel
      // (recorded occupied by the previous worker): the re-occupy cancels it in the debounce.
      // One not emitted yet is taken back: neither goes out.
      if (outcome.occupied && !this.occupancy.takeBack(appId, sub.channel) && this.occupancy.takeRecovered(appId, sub.channel)) {
        this.emit(app, { name: 'channel_occupied', channel: sub.channel });
      }
      if (outcome.memberAdded && userId !== undefined && !this.occupancy.takeBack(appId, sub.channel, userId) && this.occupancy.takeRecovered(appId, sub.channel, userId)) {
        this.emit(app, { name: 'member_added', channel: sub.channel, user_id: userId });
      }
    }
    return restored;
  }

  /** A reloaded config: the apps gone from it are removed, the others take their new settings. */
  replaceApps(apps: readonly AppConfig[]): void {
    const kept = new Set(apps.map((a) => a.id));
    this.removeApps([...this.apps.keys()].filter((appId) => !kept.has(appId)));
    this.apps.clear();
    for (const app of apps) this.apps.set(app.id, app);
  }

  /** Apps changed at run time (admin API): the removed ones removed, the others added or updated. */
  changeApps(changed: readonly AppConfig[], removed: readonly string[]): void {
    this.removeApps(removed);
    for (const app of changed) this.apps.set(app.id, app);
  }

  close(): void {
    clearInterval(this.prune);
    this.history.close();
    this.occupancy.close();
  }

  /**
   * A leave, with its webhooks; answers the outcome too (reconcile reports removals). The leave
   * of a socket whose app was removed changes nothing: the app's state went with it (removeApps).
   */
  private leave(req: UnsubscribeReq): { res: UnsubscribeRes; outcome: LeaveOutcome; app: AppConfig | undefined } {
    const app = this.apps.get(req.appId);
    const outcome = this.store.leave(req.appId, req.channel, req.socketId);
    if (app) this.occupancy.recordLeave(app, req.channel, outcome);
    if (app && outcome.changed) {
      if (outcome.memberRemoved !== null) this.emit(app, { name: 'member_removed', channel: req.channel, user_id: outcome.memberRemoved });
      if (countsSubscriptions(app, req.channel)) {
        this.emit(app, { name: 'subscription_count', channel: req.channel, subscription_count: outcome.subscriptionCount });
      }
      if (outcome.vacated) this.emit(app, { name: 'channel_vacated', channel: req.channel });
    }
    const res: UnsubscribeRes = { subscriptionCount: outcome.subscriptionCount, vacated: outcome.changed && outcome.vacated };
    if (channelType(req.channel).kind === 'presence') res.memberRemoved = outcome.memberRemoved !== null;
    return { res, outcome, app };
  }

  /**
   * Apps that were removed (deleted, or gone from a reloaded config): their state is dropped
   * here, where it lives, not left to their sockets' leaves (those come after the removal and
   * find the app gone). Each member is removed and each channel vacated with their webhooks, to
   * the receivers the app had (`retired`: signed with its credentials, not held by the reload
   * debounce), its occupancy record is cleared and its cached events go, so that an app created
   * later with the same id starts empty.
   */
  private removeApps(appIds: Iterable<string>): void {
    for (const appId of appIds) {
      const app = this.apps.get(appId);
      this.apps.delete(appId);
      const hooked = app !== undefined && app.webhooks.length > 0;
      const occupied = this.store.removeApp(appId);
      this.history.removeApp(appId);
      for (const { channel, members } of occupied) {
        for (const userId of members) {
          this.occupancy.memberRemoved(appId, channel, userId);
          if (hooked) this.webhooks.channelEvent({ appId, event: { name: 'member_removed', channel, user_id: userId } }, { retired: true });
        }
        this.occupancy.vacated(appId, channel);
        if (hooked) this.webhooks.channelEvent({ appId, event: { name: 'channel_vacated', channel } }, { retired: true });
      }
      if (occupied.length > 0) log.info('app removed: its channels vacated', { appId, shard: this.ctx.shardIndex, channels: occupied.length });
    }
  }
}
