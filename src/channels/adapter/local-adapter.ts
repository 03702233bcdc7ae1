/**
 * The single-process channel adapter: channel state lives on the shard owning each channel
 * (`channelShardFor`), frames go to sockets through uWS topics, and the live connections are
 * this process's own (the registry). Joins and leaves go to the shards in per-shard batches
 * (membership-batches.ts: leaves never dropped, joins queued under load, periodic reconcile).
 * A scale-out adapter would replace the topic publish with a pub/sub fan-out and the shard
 * state with a shared store, behind the same interface.
 */
import { log } from '../../log.js';
import type { ShardRequester } from '../../shards/requester.js';
import type { ChannelShardApi } from '../messages.js';
import { channelShardFor } from '../../shards/hash.js';
import { channelType } from '../names.js';
import type {
  CachedEvent,
  ChannelAdapter,
  ChannelSocket,
  ChannelInfo,
  ChannelInfoRequest,
  FrontEndSubscription,
  LostChannels,
  OccupiedChannel,
  OccupiedChannelCounts,
  RelayedClientEvent,
  SubscribeRequest,
  SubscribeResult,
  SubscriptionTap,
  UnsubscribeResult,
} from './channel-adapter.js';
import { TapPoint } from './tap-point.js';
import { channelEvent as frameWithoutSerial, memberRemoved, subscriptionCount, type PresenceSnapshot, topicFor, watchTopicFor } from '../frames.js';
import type { ReconcileRemoval, ReconciledSubscription } from '../messages.js';
import { MembershipBatches } from './membership-batches.js';
import { deliverToTopic, tellWatchers } from './topic-delivery.js';
import type { TopicFanout } from '../../http/topic-fanout.js';
import { CacheJoinWatch } from './cache-join-watch.js';
import { HistoryAppends } from './history-appends.js';
import type { SocketRegistry } from '../socket-registry.js';
import type { HistoryAppend, HistoryRead, KeptNotice } from '../messages.js';
import { keptEvent } from '../frames.js';

/** Subscriptions per `channels.restore` request: keeps one message well under a megabyte. */
const RESTORE_BATCH = 1000;

export interface LocalChannelAdapterOptions {
  /**
   * The front-end thread this adapter serves: its reconciles cover only the subscribers whose
   * socket id carries it (channels/socket-id.ts). Absent: the process has one front end and
   * they cover every subscriber.
   */
  frontEnd?: number | undefined;
  /**
   * Several front-end threads serve: a history channel's kept events reach every thread's
   * sockets from its shard (a notice, in serial order: see keptByShard), not through this
   * adapter's publish.
   */
  keptByShards?: boolean;
}

export class LocalChannelAdapter implements ChannelAdapter {
  /** A single node counts its quota and rate limits in memory and relays to nobody. */
  readonly cluster = null;
  private readonly frontEnds: ((lost: LostChannels) => FrontEndSubscription[])[] = [];
  /** Cache events stored while a join of their channel is in flight (cache-join-watch.ts). */
  protected readonly cacheJoins = new CacheJoinWatch();
  /** Joins and leaves, batched per shard; leaves never dropped; reconcile (membership-batches.ts). */
  private readonly memberships: MembershipBatches;
  /** History events, batched per shard per turn (history-appends.ts). */
  private readonly historyAppends: HistoryAppends;
  /** The debug console's subscriptions (tap-point.ts). */
  private readonly tapPoint = new TapPoint();
  private readonly keptByShards: boolean;

  constructor(
    private readonly topics: TopicFanout,
    private readonly shards: ShardRequester<ChannelShardApi>,
    private readonly registry: SocketRegistry,
    options: LocalChannelAdapterOptions = {},
  ) {
    this.memberships = new MembershipBatches(shards, {
      frontEndOn: (shard) => this.frontEndOn(shard),
      removed: (removal) => this.announceRemoval(removal),
      frontEnd: options.frontEnd,
    });
    this.historyAppends = new HistoryAppends(shards);
    this.keptByShards = options.keptByShards === true;
    shards.onShardRestart((shard) => this.restoreShard(shard));
  }

  /**
   * The subscriptions the front end has on a shard's channels; null when no front end told
   * (onStateLost): then nobody knows what should be there, and reconcile does nothing.
   */
  private frontEndOn(shard: number): ReconciledSubscription[] | null {
    if (this.frontEnds.length === 0) return null;
    const lost: LostChannels = (appId, channel) => this.shardOf(appId, channel) === shard;
    const out: ReconciledSubscription[] = [];
    for (const frontEnd of this.frontEnds) {
      for (const { appId, channel, socketId, member, leaving } of frontEnd(lost)) {
        const sub: ReconciledSubscription = { appId, channel, socketId };
        if (member) sub.member = { userId: member.userId, userInfo: member.userInfo ?? null };
        if (leaving) sub.leaving = true;
        out.push(sub);
      }
    }
    return out;
  }

  /**
   * A front-end thread is gone: every shard removes its subscribers as leaves (webhooks
   * included), and the channels' other sockets see them leave as after a reconcile. Each
   * shard's removals go out as it answers; rejects when a shard could not be asked.
   */
  async dropFrontEnd(frontEnd: number): Promise<void> {
    const drops = [];
    for (let shard = 0; shard < this.shards.shardCount; shard++) {
      drops.push(
        this.shards.request(shard, { type: 'channels.dropFrontEnd', frontEnd }).then(({ removed }) => {
          for (const removal of removed) this.announceRemoval(removal);
        }),
      );
    }
    await Promise.all(drops);
  }

  /** A reconcile removed a ghost subscriber: the channel's sockets see it leave (through publish, as every channel frame). */
  private announceRemoval(removal: ReconcileRemoval): void {
    const { appId, channel } = removal;
    if (removal.memberRemoved !== undefined) this.publish(appId, channel, memberRemoved(channel, removal.memberRemoved));
    if (removal.subscriptionCount !== undefined) this.publish(appId, channel, subscriptionCount(channel, removal.subscriptionCount));
  }

  onStateLost(frontEnd: (lost: LostChannels) => FrontEndSubscription[]): void {
    this.frontEnds.push(frontEnd);
  }

  /**
   * A shard worker was replaced: its channel state is gone. Re-records, on the new worker,
   * every subscription the front end has on channels of that shard (the pool calls this
   * before any later request can reach the new worker, so these joins are handled first).
   */
  private restoreShard(shard: number): void {
    const lost: LostChannels = (appId, channel) => this.shardOf(appId, channel) === shard;
    const byApp = new Map<string, FrontEndSubscription[]>();
    for (const frontEnd of this.frontEnds) {
      for (const sub of frontEnd(lost)) {
        let list = byApp.get(sub.appId);
        if (!list) byApp.set(sub.appId, (list = []));
        list.push(sub);
      }
    }
    let total = 0;
    for (const [appId, subs] of byApp) {
      total += subs.length;
      for (let i = 0; i < subs.length; i += RESTORE_BATCH) {
        const subscriptions = subs.slice(i, i + RESTORE_BATCH).map(({ channel, socketId, member }) =>
          member ? { channel, socketId, member: { userId: member.userId, userInfo: member.userInfo ?? null } } : { channel, socketId },
        );
        this.shards.request(shard, { type: 'channels.restore', appId, subscriptions }).catch((err: unknown) => {
          // Another crash: its own restart restores again.
          log.warn('channel state restore failed', { shard, appId, error: String(err) });
        });
      }
    }
    log.info('shard restarted: channel subscriptions re-sent', { shard, subscriptions: total });
  }

  private shardOf(appId: string, channel: string): number {
    return channelShardFor(appId, channel, this.shards.shardCount);
  }

  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): void {
    deliverToTopic(this.topics, this.registry, appId, channel, frame, exceptSocketId);
  }

  attach(socket: ChannelSocket, appId: string, channel: string, joined?: SubscribeResult): CachedEvent | null | undefined {
    socket.subscribe(topicFor(appId, channel));
    return this.cacheJoins.replay(joined);
  }

  detach(socket: ChannelSocket, appId: string, channel: string): void {
    socket.unsubscribe(topicFor(appId, channel));
  }

  userPresence(appId: string, userId: string, online: boolean): void {
    tellWatchers(this.topics, appId, userId, online);
  }

  watch(socket: ChannelSocket, appId: string, userIds: readonly string[]): string[] | Promise<string[]> {
    for (const id of userIds) socket.subscribe(watchTopicFor(appId, id));
    return userIds.filter((id) => this.registry.isOnline(appId, id));
  }

  connectionCount(appId: string): number {
    return this.registry.connectionCount(appId);
  }

  storeCachedEvent(appId: string, channel: string, event: string, data: string): void {
    this.cacheJoins.stored(appId, channel, event, data);
    this.shards.send(this.shardOf(appId, channel), { type: 'channels.storeCache', appId, channel, event, data });
  }

  async publishKept(appId: string, channel: string, event: string, data: string, exceptSocketId?: string, userId?: string): Promise<void> {
    const append: HistoryAppend = { appId, channel, event, data };
    if (userId !== undefined) append.userId = userId;
    // Kept with the event (a recovering join does not replay it to that socket); several front-end threads also deliver by it.
    if (exceptSocketId !== undefined) append.except = exceptSocketId;
    const serial = await this.historyAppends.append(this.shardOf(appId, channel), append);
    // Several front-end threads: the shard hands the kept event to each of them (keptByShard).
    if (this.keptByShards && serial !== null) return;
    // In the turn the answer arrived: the shard answers appends in serial order, and a recovering
    // join's answer holds exactly the events answered before it (history-store.ts).
    const frame = serial === null ? frameWithoutSerial(event, channel, data, userId) : keptEvent(event, channel, data, serial, userId);
    this.publish(appId, channel, frame, exceptSocketId);
  }

  history(appId: string, channel: string, since: string | undefined, limit: number): Promise<HistoryRead> {
    const req = { type: 'channels.history' as const, appId, channel, limit };
    return this.shards.request(this.shardOf(appId, channel), since === undefined ? req : { ...req, since });
  }

  clientEvent(e: RelayedClientEvent): void {
    this.shards.send(this.shardOf(e.appId, e.channel), { type: 'channels.clientEvent', ...e });
  }

  subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  subscribe(req: SubscribeRequest, wanted: () => boolean): Promise<SubscribeResult | null>;
  subscribe(req: SubscribeRequest, wanted?: () => boolean): Promise<SubscribeResult | null> {
    // Cache channels: what is stored while the join is in flight wins over its read (cache-join-watch.ts).
    const joining = channelType(req.channel).cache ? this.cacheJoins.around(req.appId, req.channel, () => this.join(req, wanted)) : this.join(req, wanted);
    return this.tapPoint.joined(req, joining);
  }

  tapSubscriptions(tap: SubscriptionTap): void {
    this.tapPoint.set(tap);
  }

  private async join(req: SubscribeRequest, wanted: (() => boolean) | undefined): Promise<SubscribeResult | null> {
    const message: { appId: string; channel: string; socketId: string; since?: string; previousSocketIds?: string[] } = { appId: req.appId, channel: req.channel, socketId: req.socketId };
    if (req.since !== undefined) message.since = req.since;
    if (req.since !== undefined && req.previousSocketIds !== undefined && req.previousSocketIds.length > 0) message.previousSocketIds = [...req.previousSocketIds];
    const res = await this.memberships.join(
      this.shardOf(req.appId, req.channel),
      req.member ? { ...message, member: { userId: req.member.userId, userInfo: req.member.userInfo ?? null } } : message,
      wanted,
    );
    if (res === null) return null;
    const out: SubscribeResult = { subscriptionCount: res.subscriptionCount, occupied: res.occupied };
    if (res.presence !== undefined) {
      withPresenceJson(out, res.presence);
      out.memberAdded = res.memberAdded ?? false;
    }
    if (res.cached !== undefined) out.cached = res.cached;
    if (res.recovery !== undefined) out.recovery = res.recovery;
    return out;
  }

  unsubscribe(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult> {
    return this.tapPoint.left(appId, channel, socketId, this.leave(appId, channel, socketId));
  }

  private async leave(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult> {
    const res = await this.memberships.leave(this.shardOf(appId, channel), { appId, channel, socketId });
    const out: UnsubscribeResult = { subscriptionCount: res.subscriptionCount, vacated: res.vacated };
    if (res.memberRemoved !== undefined) out.memberRemoved = res.memberRemoved;
    return out;
  }

  async channelInfo(appId: string, channel: string, want: ChannelInfoRequest): Promise<ChannelInfo> {
    const res = await this.shards.request(this.shardOf(appId, channel), {
      type: 'channels.info',
      appId,
      channel,
      userCount: want.userCount === true,
      subscriptionCount: want.subscriptionCount === true,
      cache: want.cache === true && channelType(channel).cache,
    });
    const out: ChannelInfo = { occupied: res.occupied };
    if (res.userCount !== undefined) out.userCount = res.userCount;
    if (res.subscriptionCount !== undefined) out.subscriptionCount = res.subscriptionCount;
    if (want.cache) out.cache = res.cache ?? null;
    return out;
  }

  async listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<OccupiedChannel[]> {
    const message = { type: 'channels.list' as const, appId, withUserCount };
    const answers = await this.shards.broadcast(prefix === undefined ? message : { ...message, prefix });
    // Each shard's list is sorted: merged in one pass, with no copy in between.
    const next = answers.map(() => 0);
    const out: OccupiedChannel[] = [];
    for (;;) {
      let from = -1;
      for (let s = 0; s < answers.length; s++) {
        const name = answers[s]!.names[next[s]!];
        if (name !== undefined && (from < 0 || name < answers[from]!.names[next[from]!]!)) from = s;
      }
      if (from < 0) return out;
      const i = next[from]!++;
      const { names, userCounts } = answers[from]!;
      out.push(withUserCount && userCounts ? { channel: names[i]!, userCount: userCounts[i]! } : { channel: names[i]! });
    }
  }

  async occupiedChannelCounts(appIds: readonly string[]): Promise<OccupiedChannelCounts> {
    const answers = await this.shards.broadcast({ type: 'channels.counts', appIds: [...appIds] });
    return {
      total: answers.reduce((n, a) => n + a.total, 0),
      byApp: appIds.map((_, i) => answers.reduce((n, a) => n + (a.byApp[i] ?? 0), 0)),
    };
  }

  async presenceUserIds(appId: string, channel: string): Promise<string[]> {
    const res = await this.shards.request(this.shardOf(appId, channel), { type: 'channels.users', appId, channel });
    return res.userIds;
  }

  async terminateUserConnections(appId: string, userId: string): Promise<number> {
    return this.registry.terminateUser(appId, userId);
  }

  /**
   * A history channel's event kept by its shard, for this thread's sockets (several front-end
   * threads: every thread gets each, in serial order, and delivers it to its own sockets only).
   */
  keptByShard(notice: KeptNotice, local: TopicFanout): void {
    deliverToTopic(local, this.registry, notice.appId, notice.channel, notice.frame, notice.except);
  }

  /** Nothing to leave: the shards stop after this (server.ts). */
  async close(): Promise<void> {}
}

/**
 * Puts the shard's member list on a join result as JSON text (frames splice it in as is) and
 * `presence` as a getter that parses it only when read (the subscription_succeeded path never
 * does): a join in a big presence channel then costs no parse and no stringify on this thread.
 */
function withPresenceJson(out: SubscribeResult, json: string): void {
  out.presenceJson = json;
  Object.defineProperty(out, 'presence', {
    enumerable: true,
    configurable: true,
    get: (): PresenceSnapshot => JSON.parse(json) as PresenceSnapshot,
  });
}
