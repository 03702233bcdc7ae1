/**
 * The cluster channel adapter: channel state shared by every node in Redis (channel-state.ts:
 * one Lua script per change, so each transition is decided once for the cluster), frames to
 * this node's sockets through uWS topics and to the other nodes through Redis pub/sub
 * (delivery-bus.ts: a node receives only the channels it has subscribers on), the reaping and
 * re-registration of what a node records under its session (session-records.ts, driven by the
 * node's liveness, src/cluster/liveness.ts). Channel webhooks decided in Redis go to the outbox
 * of the shard owning the channel on the node that decided them, already debounced (the reload
 * debounce is a hold in Redis that a re-join on any node cancels).
 *
 * Signed-in users are shared the same way: each node records its online users as members of a
 * hidden channel (`#online`, a name no client can subscribe to), so `online` goes out when a
 * user's first connection anywhere signs in and `offline` when the last one leaves, a reaped
 * node's users included. Watchlist events travel on a hidden per-app channel (`#watch`).
 *
 * A node served by several front-end threads runs this adapter on every thread: on the main
 * thread with the node (its liveness, subscriber connection and reports: NodeThreads), on each
 * front-end thread with its share of it (its own command connection: ThreadSide, thread-node.ts).
 */
import type { AppConfig, HeraldConfig } from '../../../config/schema.js';
import { HeraldError } from '../../../errors.js';
import { log, RateLimitedLog } from '../../../log.js';
import type { ShardRequester } from '../../../shards/requester.js';
import { channelShardFor } from '../../../shards/hash.js';
import type { ChannelEventBody } from '../../../webhooks/emitter.js';
import type { WebhookShardApi } from '../../../webhooks/messages.js';
import type { ChannelShardApi, HistoryRead, HistoryRecovery } from '../../messages.js';
import { SERVER_TO_USER_PREFIX, channelType, countsSubscriptions, serverToUserId } from '../../names.js';
import { channelEvent, keptEvent, memberAdded, memberRemoved, snapshotOf, subscriptionCount, topicFor as topicOf, watchTopicFor } from '../../frames.js';
import { keepsHistory } from '../../history/patterns.js';
import { parseSerial } from '../../history/serial.js';
import { replayedTo } from '../../history/previous-sockets.js';
import type { SocketRegistry } from '../../socket-registry.js';
import type {
  CachedEvent,
  ChannelAdapter,
  ChannelInfo,
  ChannelInfoRequest,
  ChannelSocket,
  ClusterCapability,
  FrontEndSubscription,
  LostChannels,
  MessageCharger,
  OccupiedChannel,
  OccupiedChannelCounts,
  RelayedClientEvent,
  SubscribeRequest,
  SubscribeResult,
  SubscriptionTap,
  UnsubscribeResult,
} from '../channel-adapter.js';
import { TapPoint } from '../tap-point.js';
import type { ClusterFigures } from '../../../metrics/prometheus.js';
import { overQuota } from '../../quota.js';
import { deliverToTopic, tellWatchers } from '../topic-delivery.js';
import type { TopicFanout } from '../../../http/topic-fanout.js';
import { CacheJoinWatch } from '../cache-join-watch.js';
import type { RateCounter } from '../../rate-limits/rate-counter.js';
import type { ChannelTransition, NodeSnapshot, NodeSubscription, Registration } from './channel-state.js';
import type { RecordedPart } from './session-records.js';
import type { TopicInterestHook } from '../../../http/topic-fanout.js';
import type { Cluster, ControlMessage } from '../../../cluster/cluster.js';
import { ClusterNode, type ChannelNode } from './cluster-node.js';
import { AvailabilityWait } from './availability-wait.js';
import { RedisUnavailableError } from '../../../cluster/connection.js';
import { HIDDEN_CHANNELS, STATE_SCRIPTS } from './scripts.js';
import { RedisHistory, type ClusterHistoryBounds } from './history-store.js';
import { RecoverySeams } from './history-seam.js';
import { HistoryCatchUp } from './history-catch-up.js';

/** Hidden channel whose members are the signed-in users, one subscription per node and user. */
export const ONLINE_CHANNEL = '#online';
/** Hidden channel carrying watchlist online/offline between nodes. */
const WATCH_CHANNEL = '#watch';
/** Hidden channels start with `#` (`#server-to-user-` ones are real channels and do not). */
const isHidden = (channel: string): boolean => HIDDEN_CHANNELS.includes(channel);
/**
 * The name a channel travels under between nodes: pub/sub names split app and channel at the
 * last `:`, which a `#server-to-user-<id>` channel may hold (user ids are free text), so its
 * user id is URI-encoded. Other channel names cannot contain `:`.
 */
function busName(channel: string): string {
  const userId = serverToUserId(channel);
  return userId === null ? channel : `#u.${encodeURIComponent(userId)}`;
}
function fromBusName(name: string): string {
  return name.startsWith('#u.') ? SERVER_TO_USER_PREFIX + decodeURIComponent(name.slice(3)) : name;
}

/** The subscription id under which a node records one signed-in user on `#online`. */
const onlineSubscriptionId = (userId: string): string => `~${userId}`;

/** Backoff of a leave that could not be applied (ms): doubled per attempt up to the max. */
const LEAVE_RETRY_MIN_MS = 100;
const LEAVE_RETRY_MAX_MS = 2_000;

const busLog = new RateLimitedLog('warn', 10_000);

/** Pause before a join the outage refused is made again (ms), once the cluster is available. */
const JOIN_RETRY_PAUSE_MS = 50;

/** How often a node releases due held webhooks (ms): the latest a held leave goes out after its debounce. */
const HELD_SWEEP_MS = 200;
/** Held webhooks released per script call. */
const HELD_RELEASE_BATCH = 200;

/** How often a node drops expired history events of every app from Redis (ms); reads check expiry themselves. */
const HISTORY_PRUNE_MS = 5_000;

export interface RedisAdapterDeps {
  /** The uWS topics frames go to (the main app's, http/tls.ts). */
  topics: TopicFanout;
  registry: SocketRegistry;
  shards: ShardRequester<ChannelShardApi & WebhookShardApi>;
  /** This node's cluster membership (not started yet): the adapter's node starts and closes it. */
  cluster: Cluster;
  /** The main thread of a node served by several front-end threads: what the threads hold. */
  threads?: NodeThreads;
  /** How long a subscription waits for the cluster to be available again (ms); cluster.subscriptionWaitMs. */
  subscriptionWaitMs: number;
  /** The running config (replaced by a reload): apps, webhook debounce. */
  config: () => Readonly<HeraldConfig>;
  /** The running apps by id (updated in place by a reload). */
  apps: ReadonlyMap<string, AppConfig>;
}

type Shards = ShardRequester<ChannelShardApi & WebhookShardApi>;

/**
 * The main thread's side of a node served by several front-end threads (thread-host.ts):
 * the node's membership, liveness, subscriber connection and reports stay here; the sockets
 * and their joins are the threads'.
 */
export interface NodeThreads {
  /** The node's adapter started: the threads' requests reach it from now on. */
  started(adapter: RedisChannelAdapter): void;
  /** Each thread's share of what the node records, for a re-registration. */
  parts(): RecordedPart[];
  /** Closes the user's connections on every thread; answers how many. */
  terminateUser(appId: string, userId: string): Promise<number>;
  /** The users signed in on some thread (recorded once for the node on `#online`, here). */
  onlineUsers(): Iterable<{ appId: string; userId: string }>;
  /** A recovering join's mark for thread `thread`, after the frames received before it. */
  mark(thread: number, token: string): void;
  /** Frames the threads could not relay to the other nodes, so far. */
  relayFailures(): number;
}

/**
 * A front-end thread's side of a node served by several: its share of the node (its own command
 * connection, the main thread's bus through it: thread-node.ts) and what it asks of the main thread.
 */
export interface ThreadSide {
  node: ChannelNode;
  thread: number;
  /** Takes the session the main thread switched the node to (a re-registration). */
  adoptSession(session: string): void;
  /** Resolves once this thread's connection is up (rejects past a while). */
  connected(): Promise<void>;
  /** The user's first connection on this thread signed in, or its last one here closed. */
  userPresence(appId: string, userId: string, online: boolean): void;
  /** Closes the user's connections on every thread of the node; answers how many. */
  terminateUser(appId: string, userId: string): Promise<number>;
  /** The main thread's history catch-up of a channel watched here (HistoryCatchUp.watch). */
  catchUp(appId: string, channel: string): Promise<boolean>;
  /** The app's live connections on every thread. */
  connectionCount(appId: string): number;
  /** A frame this thread could not relay to the other nodes (the node's figure counts it). */
  relayFailed(): void;
  /** This thread's interest in a topic: held while a recovering join takes the frames the main thread relays. */
  interest: TopicInterestHook;
}

export type ThreadAdapterDeps = Omit<RedisAdapterDeps, 'cluster' | 'threads'> & { thread: ThreadSide };

/** The prefix of a thread's recovering-join tokens (its marks are carried to it by the main thread). */
const threadMarkPrefix = (thread: number): string => `t${thread}.`;

/** The thread a recovering join's token belongs to; null for the node's own. */
function threadOfMark(token: string): number | null {
  const m = /^t(\d+)\./.exec(token);
  return m ? Number(m[1]) : null;
}

export class RedisChannelAdapter implements ChannelAdapter, ClusterCapability {
  /** The adapter is its own cluster capability (its members are on this class). */
  readonly cluster: ClusterCapability = this;
  readonly node: ChannelNode;
  /** On a front-end thread of a node with several: that thread's side (ThreadSide). */
  private readonly side: ThreadSide | undefined;
  /** On the main thread of a node with several front-end threads: what they hold (NodeThreads). */
  private readonly threads: NodeThreads | undefined;
  /** Topics of this thread's recovering joins, and their channels (see relayedFrame). */
  private readonly seamTopics = new Map<string, { appId: string; channel: string; joins: number }>();
  readonly messageQuota: MessageCharger;
  readonly rateCounter: RateCounter;
  private readonly topics: TopicFanout;
  private readonly registry: SocketRegistry;
  private readonly shards: Shards;
  private frontEnd: ((lost: LostChannels) => FrontEndSubscription[]) | undefined;
  /** `appId\0channel\0socketId` of every socket on a channel's delivery here (bus watches follow it). */
  private readonly attached = new Set<string>();
  /**
   * The same keys for joins in flight or answered and not attached yet: each holds a bus watch
   * taken before the join, which attach() takes over and a leave or a refused join gives back.
   */
  private readonly joining = new Set<string>();
  /** `appId\0socketId` → its `#server-to-user-` channel: left by the close, not by an unsubscribe. */
  private readonly userChannels = new Map<string, string>();
  /** Apps whose watchlist events this node listens to. */
  private readonly watchingApps = new Set<string>();
  /** Cache events stored here while a join of their channel is in flight (cache-join-watch.ts). */
  private readonly cacheJoins = new CacheJoinWatch();
  /** Releases the page-reload debounce's due held webhooks of every node into the shared outbox. */
  private heldSweep: NodeJS.Timeout | undefined;
  private sweeping = false;
  /** Leaves waiting for Redis (close() lets them finish), and who waits for them to be done. */
  private leavesInFlight = 0;
  private readonly leavesDrained: (() => void)[] = [];
  private closed = false;
  private relayFailures = 0;
  /** Whether Redis took the latest publish; settles after every earlier one (one connection, replies in order). */
  private lastRelay: Promise<boolean> = Promise.resolve(true);
  /** Subscriptions waiting for the cluster to be available again (joinOnceAvailable). */
  private readonly availability = new AvailabilityWait(() => this.available);
  /** The debug console's subscriptions (tap-point.ts). */
  private readonly tapPoint = new TapPoint();
  /** Channel history, shared by every node (history-store.ts). */
  private readonly keptEvents: RedisHistory;
  /** Recovering joins between their read and their attach (history-seam.ts). */
  private readonly seams: RecoverySeams;
  /** History channels with subscribers here: what they missed while the subscriber connection was down (history-catch-up.ts). */
  private readonly catchUp: HistoryCatchUp;
  private historyPrune: NodeJS.Timeout | undefined;

  private constructor(private readonly deps: RedisAdapterDeps | ThreadAdapterDeps) {
    this.topics = deps.topics;
    this.registry = deps.registry;
    this.shards = deps.shards;
    if ('thread' in deps) {
      this.side = deps.thread;
      this.node = deps.thread.node;
      this.seams = new RecoverySeams(threadMarkPrefix(deps.thread.thread));
    } else {
      const threads = deps.threads;
      this.threads = threads;
      this.node = new ClusterNode(deps.cluster, {
        snapshot: () => this.snapshot(),
        ...(threads && { parts: () => threads.parts() }),
        onTransitions: (transitions) => this.reportTransitions(transitions),
        onFrame: (appId, channel, frame, except) => this.fromOtherNode(appId, channel, frame, except),
        onDropped: () => this.catchUp.dropped(),
        onListening: () => this.catchUp.listening(),
      });
      deps.cluster.onControl((message, origin) => this.control(message, origin));
      this.seams = new RecoverySeams();
    }
    const state = this.node.state;
    this.messageQuota = {
      charge: async (app, messages) => {
        if (app.messageQuota === null) return;
        const { accepted, used } = await this.call(() => state.chargeQuota(app.id, messages, app.messageQuota!));
        if (!accepted) throw overQuota(app.id, app.messageQuota!, used, messages, 'UTC, all nodes');
      },
      forget: (appId) => this.call(() => state.forgetQuota(appId)),
    };
    this.rateCounter = { take: (key, cost, limit) => this.call(() => state.takeRate(key, cost, limit)) };
    this.keptEvents = new RedisHistory(this.node.commands, this.node.keys.prefix);
    this.catchUp = new HistoryCatchUp({
      read: (appId, channel, since, mark) => {
        const bounds = this.historyBoundsOf(appId, channel);
        return bounds ? this.keptEvents.readEnvelopes(appId, channel, since, bounds.maxEvents, bounds.ttlSeconds, mark) : Promise.resolve(null);
      },
      point: (appId, channel, mark) => {
        const bounds = this.historyBoundsOf(appId, channel);
        return bounds ? this.keptEvents.point(appId, channel, bounds.ttlSeconds, mark) : Promise.resolve(null);
      },
      deliver: (appId, channel, frame, except) => deliverToTopic(this.topics, this.registry, appId, channel, frame, except),
      markFor: (token) => this.markFor(token),
      listening: () => this.node.bus.listening,
      markWaitMs: this.node.nodeTimeoutMs,
    });
  }

  /** Connects to Redis, registers the node, and starts heartbeats, reaper and delivery. */
  static async start(deps: RedisAdapterDeps | ThreadAdapterDeps, readyTimeoutMs = 10_000): Promise<RedisChannelAdapter> {
    const adapter = new RedisChannelAdapter(deps);
    try {
      await adapter.node.start(readyTimeoutMs);
    } catch (err) {
      await adapter.node.stop(false).catch(() => {});
      throw err;
    }
    // A front-end thread leaves the node's sweeps to the main thread.
    if (adapter.side) return adapter;
    adapter.heldSweep = setInterval(() => void adapter.releaseDueHolds(), HELD_SWEEP_MS);
    adapter.heldSweep.unref();
    adapter.historyPrune = setInterval(() => void adapter.pruneHistory(), HISTORY_PRUNE_MS);
    adapter.historyPrune.unref();
    return adapter;
  }

  /**
   * Releases every held webhook whose page-reload debounce is over, whichever node decided it (that
   * node may be gone): one script call moves each into the shared webhook outbox unless a join
   * cancelled it (scripts.ts heraldReleaseHeld), so each goes out once.
   */
  async releaseDueHolds(): Promise<number> {
    if (this.sweeping || this.closed || !this.node.registered) return 0;
    this.sweeping = true;
    let released = 0;
    try {
      for (;;) {
        const n = await STATE_SCRIPTS.run<number>(this.node.commands, 'heraldReleaseHeld', [this.node.keys.prefix, HELD_RELEASE_BATCH]);
        released += n;
        if (n < HELD_RELEASE_BATCH) return released;
      }
    } catch {
      // Redis away: the next sweep releases them.
      return released;
    } finally {
      this.sweeping = false;
    }
  }

  // --- delivery -------------------------------------------------------------------------

  /**
   * Hands the frame to Redis for the other nodes and, once Redis has taken it, delivers it to
   * this node's sockets. The HTTP API answers a trigger after that (relayed()): Redis has then
   * queued the frame to every other node, before the caller can trigger the next event through
   * another node (a round-robin load balancer), so that one cannot overtake it anywhere.
   * Publishes leave in order on one connection. During an outage the relay fails at once and
   * local delivery goes on.
   */
  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): void {
    // This node's sockets get the frame once Redis has taken it: by then Redis has written every
    // frame another node published before it to this node's subscriber connection, which is read
    // first, so a trigger through this node cannot overtake one accepted earlier through another
    // (delivered at once, it did under CPU load). Answers come in order on one connection.
    const deliver = (): void => deliverToTopic(this.topics, this.registry, appId, channel, frame, exceptSocketId);
    this.lastRelay = this.node.bus.publish(appId, busName(channel), frame, exceptSocketId).then(
      () => {
        // On a front-end thread, the node's subscriber connection (the main thread's) brings the
        // frame back to the node's sockets on every thread, in the order Redis took it; while it
        // does not listen, this thread's publish reaches them directly.
        if (!this.side || !this.node.bus.listening) deliver();
        return true;
      },
      (err: unknown) => {
        // Redis is away: this node's sockets still get it.
        deliver();
        this.busFailed(err);
        return false;
      },
    );
  }

  /** Resolves once every frame published so far is with Redis; see ChannelAdapter.relayed. */
  relayed(): Promise<void> {
    return this.lastRelay.then((taken) => {
      if (!taken) throw new HeraldError('CLUSTER_UNAVAILABLE');
    });
  }

  /** A frame another node published on a channel this node has subscribers on. */
  private fromOtherNode(appId: string, name: string, frame: string, exceptSocketId: string | undefined): void {
    const channel = fromBusName(name);
    if (channel === WATCH_CHANNEL) {
      const [userId, online] = JSON.parse(frame) as [string, boolean];
      tellWatchers(this.topics, appId, userId, online);
      return;
    }
    // A recovering join between its mark and its attach keeps the history frames it would miss.
    this.seams.frame(appId, channel, frame, exceptSocketId);
    if (this.catchUp.frame(appId, channel, frame, exceptSocketId)) deliverToTopic(this.topics, this.registry, appId, channel, frame, exceptSocketId);
  }

  private busFailed(err: unknown): void {
    this.relayFailures++;
    this.side?.relayFailed();
    busLog.write('publish', 'cluster: a frame could not be relayed to the other nodes (Redis unavailable)', { error: String(err) });
  }

  attach(socket: ChannelSocket, appId: string, channel: string, joined?: SubscribeResult): CachedEvent | null | undefined {
    const state = socketState(socket);
    socket.subscribe(topicOf(appId, channel));
    if (state) {
      const key = attachKey(appId, channel, state.socketId);
      if (!this.attached.has(key)) {
        this.attached.add(key);
        if (!this.joining.delete(key)) void this.node.bus.watch(appId, busName(channel));
      }
      if (serverToUserId(channel) !== null) this.userChannels.set(`${appId}\u0000${state.socketId}`, channel);
    }
    // The recovery's events were sent with the answer, in this turn: live delivery takes over.
    if (state) this.seams.closeFor(appId, channel, state.socketId);
    return this.cacheJoins.replay(joined);
  }

  detach(socket: ChannelSocket, appId: string, channel: string): void {
    socket.unsubscribe(topicOf(appId, channel));
    const state = socketState(socket);
    if (state) this.dropAttachment(appId, channel, state.socketId);
  }

  private dropAttachment(appId: string, channel: string, socketId: string): void {
    this.seams.closeFor(appId, channel, socketId);
    const key = attachKey(appId, channel, socketId);
    if (this.attached.delete(key) || this.joining.delete(key)) this.unwatch(appId, channel);
  }

  /** Gives back one socket's bus watch of the channel. */
  private unwatch(appId: string, channel: string): void {
    this.node.bus.unwatch(appId, busName(channel));
    if (!this.node.bus.watches(appId, busName(channel))) this.catchUp.forget(appId, channel);
  }

  // --- the node's front-end threads (on the main thread, several threads) ---------------

  /** A front-end thread's first subscriber of a channel (its bus name): the node listens to it; resolves once Redis confirmed it. */
  threadWatch(appId: string, name: string): Promise<void> {
    return this.node.bus.watch(appId, name);
  }

  /** A front-end thread's last subscriber of a channel left. */
  threadUnwatch(appId: string, name: string): void {
    this.unwatch(appId, fromBusName(name));
  }

  /** A front-end thread's join of a history channel: the node's catch-up knows it (false: Redis away). */
  threadCatchUp(appId: string, channel: string): Promise<boolean> {
    return this.catchUp.watch(appId, channel).catch(() => false);
  }

  // --- connections and users ------------------------------------------------------------

  connectionCount(appId: string): number {
    return this.side ? this.side.connectionCount(appId) : this.registry.connectionCount(appId);
  }

  admit(appId: string, socketId: string, maxConnections: number | null): Promise<boolean> {
    const recorded = this.node.state.connect(appId, socketId, maxConnections);
    if (maxConnections === null) {
      // No quota to decide: recorded in the background (re-registration records it anyway).
      recorded.catch(() => {});
      return Promise.resolve(true);
    }
    return this.call(() => recorded).then((r) => r.accepted);
  }

  listenFor(appId: string, channel: string, socketId: string): Promise<void> {
    const listening = this.listenAhead(appId, channel, socketId);
    // Given back by disconnected() if the socket closes before attach().
    if (listening && serverToUserId(channel) !== null) this.userChannels.set(`${appId}\u0000${socketId}`, channel);
    return listening ?? Promise.resolve();
  }

  /**
   * Takes the socket's bus watch of the channel ahead of attach() (see joining); resolves once
   * Redis confirmed it. Undefined when the socket already holds one.
   */
  private listenAhead(appId: string, channel: string, socketId: string): Promise<void> | undefined {
    const key = attachKey(appId, channel, socketId);
    if (this.attached.has(key) || this.joining.has(key)) return undefined;
    this.joining.add(key);
    return this.node.bus.watch(appId, busName(channel));
  }

  disconnected(appId: string, socketId: string): void {
    const key = `${appId}\u0000${socketId}`;
    const userChannel = this.userChannels.get(key);
    if (userChannel !== undefined) {
      this.userChannels.delete(key);
      this.dropAttachment(appId, userChannel, socketId);
    }
    // During an outage it fails: the re-registration leaves the socket out and reaps it.
    this.node.state.disconnect(appId, socketId).catch(() => {});
  }

  userPresence(appId: string, userId: string, online: boolean): void {
    // The node records its users once, on the main thread (which hears from every thread).
    if (this.side) {
      this.side.userPresence(appId, userId, online);
      return;
    }
    const state = this.node.state;
    const id = onlineSubscriptionId(userId);
    const change = online ? state.join(appId, ONLINE_CHANNEL, id, { userId }).then((o) => o.changed && o.memberAdded) : state.leave(appId, ONLINE_CHANNEL, id).then((o) => o.changed && o.memberRemoved !== null);
    change.then(
      (first) => {
        if (first) this.watchlistEverywhere(appId, userId, online);
      },
      // During an outage: the re-registration records (or leaves out) the user and reports it.
      (err: unknown) => log.debug('cluster: user presence not recorded', { appId, online, error: String(err) }),
    );
  }

  /** A user came online or went offline cluster-wide: every node tells its watchers. */
  private watchlistEverywhere(appId: string, userId: string, online: boolean): void {
    tellWatchers(this.topics, appId, userId, online);
    this.node.bus.publish(appId, WATCH_CHANNEL, JSON.stringify([userId, online])).catch((err: unknown) => this.busFailed(err));
  }

  watch(socket: ChannelSocket, appId: string, userIds: readonly string[]): Promise<string[]> {
    for (const id of userIds) socket.subscribe(watchTopicFor(appId, id));
    // Answered once this node listens to the app's online notices (see subscribe).
    let listening: Promise<void> | undefined;
    if (!this.watchingApps.has(appId)) {
      this.watchingApps.add(appId);
      listening = this.node.bus.watch(appId, WATCH_CHANNEL);
    }
    if (userIds.length === 0) return (listening ?? Promise.resolve()).then(() => []);
    const key = this.node.keys.presenceUsers(appId, ONLINE_CHANNEL);
    const online = this.call(() => this.node.commands.hmget(key, ...userIds));
    return Promise.all([online, listening]).then(([counts]) => userIds.filter((_, i) => counts[i] !== null));
  }

  async terminateUserConnections(appId: string, userId: string): Promise<number> {
    const closed = await this.terminateHere(appId, userId);
    await this.call(() => this.node.sendControl('all', { type: 'terminateUser', appId, userId }));
    return closed;
  }

  /** Closes the user's connections on this node (every front-end thread of it). */
  private terminateHere(appId: string, userId: string): number | Promise<number> {
    if (this.side) return this.side.terminateUser(appId, userId);
    if (this.threads) return this.threads.terminateUser(appId, userId);
    return this.registry.terminateUser(appId, userId);
  }

  private control(message: ControlMessage, origin: string): void {
    if (message.type === 'historyMark') {
      if (this.catchUp.mark(message.token)) return;
      const thread = threadOfMark(message.token);
      if (thread !== null && this.threads) this.threads.mark(thread, message.token);
      else this.seams.mark(message.token);
      return;
    }
    if (origin === this.node.nodeId) return;
    if (message.type === 'terminateUser') void Promise.resolve(this.terminateHere(message.appId, message.userId)).catch(() => {});
  }

  // --- channel state --------------------------------------------------------------------

  storeCachedEvent(appId: string, channel: string, event: string, data: string): void {
    const app = this.deps.apps.get(appId);
    if (!app) return;
    this.cacheJoins.stored(appId, channel, event, data);
    this.node.state.storeCachedEvent(appId, channel, event, data, app.cacheTtlSeconds, app.maxCacheBytes).catch((err: unknown) => this.busFailed(err));
  }

  /**
   * Keeps the event in Redis with the channel's next serial and publishes its frame to every
   * node in the same script (history-store.ts): each node, this one included, delivers it from
   * its subscriber connection, so frames reach every node's sockets in serial order. Resolves
   * once Redis has it (a node dying after that loses nothing); rejects with
   * CLUSTER_UNAVAILABLE during an outage, nothing kept or sent.
   */
  async publishKept(appId: string, channel: string, event: string, data: string, exceptSocketId?: string, userId?: string): Promise<void> {
    const app = this.deps.apps.get(appId);
    const bounds = app ? historyBounds(app) : null;
    if (!app || !bounds || !keepsHistory(app, channel)) {
      // No history for it now (changed by a reload meanwhile): it goes out as on any channel.
      this.publish(appId, channel, channelEvent(event, channel, data, userId), exceptSocketId);
      return;
    }
    // The frame up to its serial's opening quote; the script adds the serial and `"}`.
    const frameHead = keptEvent(event, channel, data, '', userId).slice(0, -2);
    const kept = { appId, channel, event, data, ...(userId !== undefined && { userId }), ...(exceptSocketId !== undefined && { exceptSocketId }) };
    await this.call(() => this.keptEvents.append(kept, bounds, this.node.keys.channelTopic(appId, busName(channel)), frameHead));
  }

  async history(appId: string, channel: string, since: string | undefined, limit: number): Promise<HistoryRead> {
    this.checkAvailable();
    const app = this.deps.apps.get(appId);
    const bounds = app ? historyBounds(app) : null;
    if (!bounds) return { events: [], complete: true };
    const { events, complete } = await this.call(() => this.keptEvents.read(appId, channel, since, limit, bounds.ttlSeconds));
    return { events, complete };
  }

  /** The app's history bounds when it keeps the channel's history; null otherwise. */
  private historyBoundsOf(appId: string, channel: string): ClusterHistoryBounds | null {
    const app = this.deps.apps.get(appId);
    return app && keepsHistory(app, channel) ? historyBounds(app) : null;
  }

  /** A history read's mark for `token`, published to this node's own control topic. */
  private markFor(token: string): { topic: string; message: string } {
    return { topic: this.node.keys.controlNode(this.node.nodeId), message: JSON.stringify({ origin: this.node.nodeId, message: { type: 'historyMark', token } }) };
  }

  /**
   * recover(), on a front-end thread holding the channel's frames the main thread relays from
   * before the read until the end of the turn the join is answered in (the socket is attached
   * by then, and the thread's own interest in the topic takes over).
   */
  private async recoverHere(app: AppConfig, channel: string, socketId: string, since: string, previousSocketIds: readonly string[]): Promise<HistoryRecovery> {
    if (!this.side) return this.recover(app, channel, socketId, since, previousSocketIds);
    const topic = topicOf(app.id, channel);
    let relay = this.seamTopics.get(topic);
    if (!relay) this.seamTopics.set(topic, (relay = { appId: app.id, channel, joins: 0 }));
    relay.joins++;
    this.side.interest.add(topic);
    const held = relay;
    try {
      return await this.recover(app, channel, socketId, since, previousSocketIds);
    } finally {
      setImmediate(() => {
        this.side?.interest.remove(topic);
        if (--held.joins === 0 && this.seamTopics.get(topic) === held) this.seamTopics.delete(topic);
      });
    }
  }

  /** On a front-end thread: a frame the main thread relayed from the node's subscriber connection (recovering joins keep the history frames they need). */
  relayedFrame(topic: string, frame: Uint8Array, exceptSocketId: string): void {
    const relay = this.seamTopics.get(topic);
    if (!relay) return;
    const text = Buffer.from(frame.buffer, frame.byteOffset, frame.byteLength).toString('utf8');
    this.seams.frame(relay.appId, relay.channel, text, exceptSocketId === '' ? undefined : exceptSocketId);
  }

  /** On a front-end thread: a recovering join's mark, relayed by the main thread after the frames received before it. */
  relayedMark(token: string): void {
    this.seams.mark(token);
  }

  /**
   * A recovering join's kept events after `since`, read once this node listens to the channel,
   * with a mark that tells which frames the read saw (history-seam.ts): the answer holds the
   * events after `since` up to the moment the socket is attached, each once, less those left
   * out for the client: for `socketId` or one of `previousSocketIds` (previous-sockets.ts).
   */
  private async recover(app: AppConfig, channel: string, socketId: string, since: string, previousSocketIds: readonly string[]): Promise<HistoryRecovery> {
    const bounds = historyBounds(app);
    if (!bounds || !keepsHistory(app, channel)) return { events: [], failed: 'not_a_history_channel' };
    if (parseSerial(since) === null) return { events: [], failed: 'invalid_serial' };
    const seam = this.seams.open(app.id, channel, socketId, previousSocketIds);
    try {
      const mark = this.markFor(seam.token);
      const read = await this.call(() => this.keptEvents.readEnvelopes(app.id, channel, since, bounds.maxEvents, bounds.ttlSeconds, mark));
      // The mark follows the read's frames on the subscriber connection; it is lost only with
      // that connection (then the join is refused as during any outage, and made again).
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), this.node.nodeTimeoutMs)));
      const isLate = await Promise.race([seam.marked.then(() => false), late]);
      clearTimeout(timer);
      if (isLate || !this.node.bus.listening) throw new HeraldError('CLUSTER_UNAVAILABLE');
      return read.complete ? { events: seam.adopt(replayedTo(read.envelopes, socketId, previousSocketIds)), failed: null } : { events: seam.adopt([]), failed: 'history_evicted' };
    } catch (err) {
      seam.close();
      throw err;
    }
  }

  /** Drops expired history events of the apps keeping history (any node may; each script is atomic). */
  private async pruneHistory(): Promise<void> {
    if (this.closed || !this.node.registered) return;
    const apps: { appId: string; ttlSeconds: number }[] = [];
    for (const app of this.deps.apps.values()) if (app.history !== null) apps.push({ appId: app.id, ttlSeconds: app.history.ttlSeconds });
    await this.keptEvents.prune(apps).catch((err: unknown) => log.debug('cluster: history prune failed', { error: String(err) }));
  }

  clientEvent(e: RelayedClientEvent): void {
    this.shards.send(channelShardFor(e.appId, e.channel, this.shards.shardCount), { type: 'channels.clientEvent', ...e });
  }

  subscribe(req: SubscribeRequest): Promise<SubscribeResult>;
  subscribe(req: SubscribeRequest, wanted: () => boolean): Promise<SubscribeResult | null>;
  subscribe(req: SubscribeRequest, wanted?: () => boolean): Promise<SubscribeResult | null> {
    return this.tapPoint.joined(req, wanted && !wanted() ? Promise.resolve(null) : this.joinOnceAvailable(req, wanted));
  }

  tapSubscriptions(tap: SubscriptionTap): void {
    this.tapPoint.set(tap);
  }

  /**
   * Joins; while the cluster is unavailable (Redis away, or this node not registered and
   * listening again yet) it first waits for it, up to `cluster.subscriptionWaitMs` from the
   * request, and a join the outage refused meanwhile is made again (a socket's join is
   * idempotent). Refused with CLUSTER_UNAVAILABLE past that; null when the socket no longer
   * wants the channel after a wait (nothing recorded: a refused join changed nothing).
   */
  private async joinOnceAvailable(req: SubscribeRequest, wanted: (() => boolean) | undefined): Promise<SubscribeResult | null> {
    const deadline = Date.now() + this.deps.subscriptionWaitMs;
    for (let attempt = 0; ; attempt++) {
      if (attempt > 0 || !this.available) {
        // After a refused attempt, a pause: the node may not have noticed the outage yet.
        if (attempt > 0) await new Promise((resolve) => setTimeout(resolve, JOIN_RETRY_PAUSE_MS));
        const back = await this.availability.until(deadline);
        if (wanted && !wanted()) return null;
        if (!back) throw new HeraldError('CLUSTER_UNAVAILABLE');
      }
      try {
        // Cache channels: what this node stores while the join is in flight wins over its read.
        if (channelType(req.channel).cache) return await this.cacheJoins.around(req.appId, req.channel, () => this.join(req));
        return await this.join(req);
      } catch (err) {
        const outage = err instanceof HeraldError && err.code === 'CLUSTER_UNAVAILABLE';
        if (!outage || this.closed || Date.now() >= deadline) throw err;
      }
    }
  }

  private async join(req: SubscribeRequest): Promise<SubscribeResult> {
    const { appId, channel, socketId } = req;
    const app = this.deps.apps.get(appId);
    if (!app) throw new HeraldError('APP_NOT_FOUND', `Unknown app id ${appId}`);
    // Listening before the join is answered: once the socket is told it subscribed, what any
    // node publishes on the channel reaches it (watch() resolves when Redis confirmed it).
    const listening = this.listenAhead(appId, channel, socketId);
    try {
      const out = await this.joinState(req, app);
      await listening;
      // Read once this node listens: what is published after the read reaches it.
      const baseline = this.historyBoundsOf(appId, channel) ? this.call(() => (this.side ? this.side.catchUp(appId, channel) : this.catchUp.watch(appId, channel))) : undefined;
      baseline?.catch(() => {});
      if (req.since !== undefined) out.recovery = await this.recoverHere(app, channel, socketId, req.since, req.previousSocketIds ?? []);
      // What this node delivers on the channel is known from here: a drop of its subscriber connection is caught up.
      if (baseline && !(await baseline)) throw new HeraldError('CLUSTER_UNAVAILABLE');
      return out;
    } catch (err) {
      if (this.joining.delete(attachKey(appId, channel, socketId))) this.unwatch(appId, channel);
      throw err;
    }
  }

  private async joinState(req: SubscribeRequest, app: AppConfig): Promise<SubscribeResult> {
    const { appId, channel, socketId, member } = req;
    const type = channelType(channel);
    const presence = type.kind === 'presence';
    const joined = this.call(() => this.node.state.join(appId, channel, socketId, presence ? member : undefined, presence ? app.maxPresenceMembers : 0));
    // Read with the join (one round trip): an event stored after it reaches the socket live.
    const cachedRead = type.cache ? this.call(() => this.node.state.cachedEvent(appId, channel)) : undefined;
    cachedRead?.catch(() => {});
    const outcome = await joined;
    const cached = cachedRead ? await cachedRead.catch(() => null) : undefined;
    const out: SubscribeResult = { occupied: outcome.changed && outcome.occupied, subscriptionCount: outcome.subscriptionCount };
    if (presence) {
      out.memberAdded = outcome.changed && outcome.memberAdded;
      out.presence = snapshotOf(outcome.members ?? []);
    }
    if (cached !== undefined) out.cached = cached ? { event: cached.event, data: cached.data } : null;
    if (app.webhooks.length > 0) {
      const events: ChannelEventBody[] = [];
      if (outcome.changed) {
        if (outcome.occupied && !outcome.cancelledVacate) events.push({ name: 'channel_occupied', channel });
        if (presence && member && outcome.memberAdded && !outcome.cancelledMemberRemoval) events.push({ name: 'member_added', channel, user_id: member.userId });
        if (countsSubscriptions(app, channel)) events.push({ name: 'subscription_count', channel, subscription_count: outcome.subscriptionCount });
      }
      if (cached === null) events.push({ name: 'cache_miss', channel });
      this.webhooks(appId, channel, events);
    }
    return out;
  }

  unsubscribe(appId: string, channel: string, socketId: string): Promise<UnsubscribeResult> {
    this.dropAttachment(appId, channel, socketId);
    const app = this.deps.apps.get(appId);
    const debounceMs = app && app.webhooks.length > 0 ? this.deps.config().webhookDelivery.pageReloadDebounceMs : 0;
    // close() waits for leaves in flight: their webhooks are decided before the node goes.
    this.leavesInFlight++;
    const leaving = this.leaveApplied(app, appId, channel, socketId, debounceMs, 0);
    leaving.then(this.leaveSettled, this.leaveSettled);
    return this.tapPoint.left(appId, channel, socketId, leaving);
  }

  /** One leave in flight settled (a shared callback: a leave storm holds tens of thousands). */
  private readonly leaveSettled = (): void => {
    if (--this.leavesInFlight === 0) for (const wake of this.leavesDrained.splice(0)) wake();
  };

  /**
   * One attempt at a leave. Never dropped: retried until Redis applies it. After an outage it
   * finds nothing under the node's new session (the re-registration left it out and reaped the
   * old one, reporting its transitions), and answers the count. Promise callbacks, not an async
   * function: a leave storm holds tens of thousands of these at once (state-batch.ts).
   */
  private leaveApplied(app: AppConfig | undefined, appId: string, channel: string, socketId: string, debounceMs: number, attempt: number): Promise<UnsubscribeResult> {
    return this.node.state.leave(appId, channel, socketId, debounceMs).then(
      (outcome) => {
        const out: UnsubscribeResult = { vacated: outcome.changed && outcome.vacated, subscriptionCount: outcome.subscriptionCount };
        if (channelType(channel).kind === 'presence') out.memberRemoved = outcome.changed && outcome.memberRemoved !== null;
        if (outcome.changed) {
          if (!app) this.removedAppLeaveWebhooks(appId, channel, outcome);
          else if (app.webhooks.length > 0) this.leaveWebhooks(app, channel, outcome);
        }
        return out;
      },
      async (err: unknown) => {
        if (this.closed) throw err;
        await new Promise((r) => setTimeout(r, Math.min(LEAVE_RETRY_MIN_MS * 2 ** attempt, LEAVE_RETRY_MAX_MS)));
        return this.leaveApplied(app, appId, channel, socketId, debounceMs, attempt + 1);
      },
    );
  }

  /** The webhooks of a leave: held ones (page-reload debounce) go out when their hold is released. */
  private leaveWebhooks(app: AppConfig, channel: string, outcome: Awaited<ReturnType<ClusterNode['state']['leave']>>): void {
    const now: ChannelEventBody[] = [];
    const removed = outcome.memberRemoved;
    if (removed !== null && !outcome.holds?.member) now.push({ name: 'member_removed', channel, user_id: removed });
    if (countsSubscriptions(app, channel)) now.push({ name: 'subscription_count', channel, subscription_count: outcome.subscriptionCount });
    if (outcome.vacated && !outcome.holds?.channel) now.push({ name: 'channel_vacated', channel });
    // Held ones wait in Redis (webhooks:held) until their debounce is over; any node's sweep
    // releases them into the shared outbox (releaseDueHolds), so they survive this node.
    this.webhooks(app.id, channel, now);
  }

  /**
   * The webhooks of a leave whose app was removed here before (the leaves of its sockets, closed
   * by the removal): its member removed and channel vacated, not held (no debounce), for the
   * receivers the app had (the shard's outbox keeps them, retired, for these).
   */
  private removedAppLeaveWebhooks(appId: string, channel: string, outcome: Awaited<ReturnType<ClusterNode['state']['leave']>>): void {
    const events: ChannelEventBody[] = [];
    if (outcome.memberRemoved !== null) events.push({ name: 'member_removed', channel, user_id: outcome.memberRemoved });
    if (outcome.vacated) events.push({ name: 'channel_vacated', channel });
    this.webhooks(appId, channel, events, true);
  }

  /**
   * Channel webhooks decided in Redis: into the outbox of the shard owning the channel, not
   * debounced again. `retired`: a removed app's last events (its receivers are the outbox's to know).
   */
  private webhooks(appId: string, channel: string, events: ChannelEventBody[], retired = false): void {
    if (events.length === 0 || !this.shards.accepting) return;
    if (!retired) {
      const app = this.deps.apps.get(appId);
      if (!app || app.webhooks.length === 0) return;
    }
    this.shards.send(channelShardFor(appId, channel, this.shards.shardCount), { type: 'webhooks.channelEvents', appId, events, ...(retired && { retired }) });
  }

  /**
   * Transitions found by a reap (another node died) or a re-registration (this node's outage):
   * reported here once for the cluster: frames to the channel's sockets on every node, webhooks.
   */
  private reportTransitions(transitions: ChannelTransition[]): void {
    for (const t of transitions) {
      if (t.channel === ONLINE_CHANNEL) {
        if (t.type === 'member_added' || t.type === 'member_removed') this.watchlistEverywhere(t.appId, t.userId, t.type === 'member_added');
        continue;
      }
      if (isHidden(t.channel)) continue;
      const app = this.deps.apps.get(t.appId);
      if (!app) {
        // A removed app's members and channels left behind by a node that died: its last events.
        if (t.type === 'member_removed') this.webhooks(t.appId, t.channel, [{ name: 'member_removed', channel: t.channel, user_id: t.userId }], true);
        if (t.type === 'channel_vacated') this.webhooks(t.appId, t.channel, [{ name: 'channel_vacated', channel: t.channel }], true);
        continue;
      }
      switch (t.type) {
        case 'member_removed':
          this.publish(t.appId, t.channel, memberRemoved(t.channel, t.userId));
          this.webhooks(t.appId, t.channel, [{ name: 'member_removed', channel: t.channel, user_id: t.userId }]);
          break;
        case 'member_added':
          // A registration re-adding a member the others saw removed (this node was reaped
          // while stalled or cut off): every presence subscriber, its own connections included,
          // gets it back.
          if ('userInfo' in t) this.publish(t.appId, t.channel, memberAdded(t.channel, t.userId, t.userInfo));
          this.webhooks(t.appId, t.channel, [{ name: 'member_added', channel: t.channel, user_id: t.userId }]);
          break;
        case 'subscription_count':
          if (countsSubscriptions(app, t.channel)) {
            this.publish(t.appId, t.channel, subscriptionCount(t.channel, t.subscriptionCount));
            this.webhooks(t.appId, t.channel, [{ name: 'subscription_count', channel: t.channel, subscription_count: t.subscriptionCount }]);
          }
          break;
        case 'channel_occupied':
        case 'channel_vacated':
          this.webhooks(t.appId, t.channel, [{ name: t.type, channel: t.channel }]);
          break;
      }
    }
  }

  /** Drops a removed app's cached events and kept history events from Redis; see ClusterCapability.forgetApp. */
  async forgetApp(appId: string): Promise<void> {
    await this.call(() => this.node.state.forgetCachedEvents(appId));
    await this.call(() => this.keptEvents.forget(appId));
  }

  // --- reads (C3, C4, C6), from shared state --------------------------------------------

  async channelInfo(appId: string, channel: string, want: ChannelInfoRequest): Promise<ChannelInfo> {
    this.checkAvailable();
    const info = await this.call(() => this.node.state.channelInfo(appId, channel, { cache: want.cache === true && channelType(channel).cache }));
    const out: ChannelInfo = { occupied: info.occupied };
    if (want.userCount) out.userCount = info.userCount;
    if (want.subscriptionCount) out.subscriptionCount = info.subscriptionCount;
    if (want.cache) out.cache = info.cache ? { data: info.cache.data, ttl: info.cache.ttl } : null;
    return out;
  }

  async listChannels(appId: string, prefix: string | undefined, withUserCount: boolean): Promise<OccupiedChannel[]> {
    this.checkAvailable();
    const rows = await this.call(() => this.node.state.listChannels(appId, prefix, withUserCount));
    return rows.filter((r) => !isHidden(r.channel)).map((r) => (withUserCount && channelType(r.channel).kind === 'presence' ? { channel: r.channel, userCount: r.userCount } : { channel: r.channel }));
  }

  async occupiedChannelCounts(appIds: readonly string[]): Promise<OccupiedChannelCounts> {
    this.checkAvailable();
    return this.call(() => this.node.state.occupiedCounts(appIds));
  }

  async presenceUserIds(appId: string, channel: string): Promise<string[]> {
    this.checkAvailable();
    return this.call(() => this.node.state.presenceUserIds(appId, channel));
  }

  // --- availability, re-registration, shutdown ------------------------------------------

  /**
   * Refuses (503 CLUSTER_UNAVAILABLE) while Redis is away, this node is not registered yet, or
   * its subscriber connection is not listening again yet (it would miss the others' frames).
   */
  checkAvailable(): void {
    if (!this.available) throw new HeraldError('CLUSTER_UNAVAILABLE');
  }

  private get available(): boolean {
    return this.node.available;
  }

  /** Runs a Redis call; an outage becomes CLUSTER_UNAVAILABLE (a 503 the SDKs retry). */
  private async call<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (err) {
      if (err instanceof RedisUnavailableError) throw new HeraldError('CLUSTER_UNAVAILABLE');
      throw err;
    }
  }

  /** This node's cluster figures for /metrics. */
  get figures(): ClusterFigures {
    const threads = this.threads?.relayFailures() ?? 0;
    return { available: this.available, relayFailures: this.relayFailures + threads, watchedChannels: this.node.bus.watchedCount() };
  }

  onStateLost(frontEnd: (lost: LostChannels) => FrontEndSubscription[]): void {
    this.frontEnd = frontEnd;
  }

  /** This node's snapshot, for a re-registration: sockets, subscriptions, online users. */
  private snapshot(): NodeSnapshot {
    const sockets: NodeSnapshot['sockets'] = [];
    const subscriptions: NodeSnapshot['subscriptions'] = [];
    const online = new Set<string>();
    // Several front-end threads: their users are recorded here, on the main thread, once for the node.
    if (this.threads) {
      for (const { appId, userId } of this.threads.onlineUsers()) subscriptions.push({ appId, channel: ONLINE_CHANNEL, socketId: onlineSubscriptionId(userId), member: { userId } });
    }
    for (const state of this.registry.all()) {
      if (state.closed) continue;
      sockets.push({ appId: state.app.id, socketId: state.socketId });
      if (state.userId !== null && !this.side) {
        const key = `${state.app.id}\u0000${state.userId}`;
        if (!online.has(key)) {
          online.add(key);
          subscriptions.push({ appId: state.app.id, channel: ONLINE_CHANNEL, socketId: onlineSubscriptionId(state.userId), member: { userId: state.userId } });
        }
      }
    }
    for (const sub of this.frontEnd?.(() => true) ?? []) {
      if (sub.leaving) continue;
      subscriptions.push(sub.member ? { appId: sub.appId, channel: sub.channel, socketId: sub.socketId, member: sub.member } : { appId: sub.appId, channel: sub.channel, socketId: sub.socketId });
    }
    return { sockets, subscriptions };
  }

  /**
   * On a front-end thread, at the node's re-registration: takes the new session and records
   * what this thread holds under it, in this turn (its later joins and leaves run after these);
   * answers the registration and what ended since this thread last registered.
   */
  async registerShare(session: string): Promise<{ registration: Registration; left: NodeSubscription[] }> {
    // This thread's connection may come back after the main thread's (an outage): the switch
    // waits for it rather than fail, and a failed switch would have registered the new session
    // (hiding whether Redis lost the previous one) without this thread's share.
    await this.side?.connected();
    const state = this.node.state;
    state.flushChanges();
    this.side?.adoptSession(session);
    const snapshot = this.snapshot();
    const registration = state.register(snapshot);
    const left = state.leftSince(snapshot);
    return { registration: await registration, left };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.availability.close();
    // Leaves in flight (the node's sockets were just closed) finish first: their webhooks too
    // are decided now, not after the node has gone (a failed one is not retried once closed).
    if (this.leavesInFlight > 0) await new Promise<void>((resolve) => this.leavesDrained.push(resolve));
    if (this.side) {
      // A front-end thread's connection closes with it: the frames its leaves answered
      // (member_removed, subscription_count) are published first.
      await new Promise((resolve) => setImmediate(resolve));
      await this.lastRelay;
    }
    // Held leave webhooks stay in Redis: the other nodes release them when due (or the next
    // node to start, when this was the last one).
    clearInterval(this.heldSweep);
    clearInterval(this.historyPrune);
    this.catchUp.close();
    // Removes this node's session at once and reports its transitions (webhooks once).
    await this.node.stop(true);
  }
}

/** An app's history bounds in the cluster (maxHistoryBytes counted once for all nodes); null without history. */
function historyBounds(app: AppConfig): ClusterHistoryBounds | null {
  if (app.history === null) return null;
  return { maxEvents: app.history.maxEvents, ttlSeconds: app.history.ttlSeconds, maxBytes: app.maxHistoryBytes };
}

function attachKey(appId: string, channel: string, socketId: string): string {
  return `${appId}\u0000${channel}\u0000${socketId}`;
}

function socketState(socket: ChannelSocket): { socketId: string } | null {
  const data = socket.getUserData() as { state?: { socketId: string } | null } | undefined;
  return data?.state ?? null;
}

