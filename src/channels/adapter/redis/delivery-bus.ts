/**
 * Cross-node delivery over Redis pub/sub. One Redis channel per Herald channel
 * (`<prefix>msg:<appId>:<channel>`): a node subscribes to it only while it has local
 * subscribers on that channel (watch/unwatch, reference-counted), so an event for a channel
 * with subscribers on one node costs the other nodes nothing. Events are published once, as
 * the frame already encoded for the sockets, so receiving nodes only hand it to their sockets.
 *
 * Envelope (one string): `<origin node id>\n<exceptSocketId or empty>\n<frame>`. The origin
 * delivers to its own sockets itself, so it drops its own messages; `exceptSocketId` is
 * honoured by whichever node holds that socket.
 *
 * Control messages between nodes travel on the same subscriber connection, on the cluster's own
 * channels (src/cluster/cluster.ts).
 *
 * Commands issued in one event-loop turn go out in one write (auto-pipelined publishes,
 * one SUBSCRIBE / UNSUBSCRIBE per turn for all channels watched or dropped in it). watch()
 * resolves once Redis has confirmed the SUBSCRIBE: from then on, whatever any node publishes
 * on the channel reaches this node (a socket told it subscribed before that could miss an
 * event published through another node meanwhile). After a
 * reconnect the bus subscribes again to everything it watches; what was published while a
 * node was cut off is not replayed (pub/sub has no history; the adapter catches up history
 * channels from Redis, history-catch-up.ts).
 */
import type { Redis } from 'ioredis';
import { log } from '../../../log.js';
import { whenAvailable } from '../../../cluster/connection.js';
import type { RedisKeys } from './keys.js';

export interface DeliveryHandlers {
  /** A frame published on another node for a channel this node watches. */
  onFrame(appId: string, channel: string, frame: string, exceptSocketId: string | undefined): void;
  /** The subscriber connection dropped: nothing is received until onListening. */
  onDropped?(): void;
  /** The subscriber connection is back and subscribed again to every watched channel. */
  onListening?(): void;
}

/**
 * Publishes a frame to the nodes listening to the channel, from `origin`: a node drops what its
 * own id published (it delivered it itself); a front-end thread of a node with several publishes
 * under another origin (thread-node.ts), so its node's subscriber brings the frame back to
 * every thread. Rejects with RedisUnavailableError during an outage.
 */
export function publishOnBus(commands: Redis, keys: RedisKeys, origin: string, appId: string, channel: string, frame: string, exceptSocketId?: string): Promise<number> {
  const envelope = `${origin}\n${exceptSocketId ?? ''}\n${frame}`;
  return whenAvailable(() => commands.publish(keys.channelTopic(appId, channel), envelope));
}

export class DeliveryBus {
  /** Redis channel → local watchers (subscriptions on this node). */
  private readonly watched = new Map<string, number>();
  private readonly pendingSubscribe = new Set<string>();
  private readonly pendingUnsubscribe = new Set<string>();
  /** Watched channels whose SUBSCRIBE Redis has confirmed (cleared when the connection drops). */
  private readonly confirmed = new Set<string>();
  /** watch() calls waiting for their channel's confirmation. */
  private readonly waiting = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  /** The flush that last sent each watched channel's SUBSCRIBE; a reply confirms only the latest. */
  private readonly sentIn = new Map<string, number>();
  private flushes = 0;
  private flushScheduled = false;
  private readonly onReady = () => this.resubscribe();
  private readonly onClose = () => {
    this.subscribed = false;
    this.confirmed.clear();
    // Nothing is received until the connection is back: a join does not wait for that (the
    // node reports the outage); resubscribe() confirms every watched channel again.
    this.release([...this.waiting.keys()]);
    this.handlers.onDropped?.();
  };
  /** The subscriber connection is up and subscribed to everything watched (see listening). */
  private subscribed = false;
  private readonly onMessage = (topic: string, message: string) => this.dispatch(topic, message);

  constructor(
    private readonly commands: Redis,
    private readonly subscriber: Redis,
    private readonly keys: RedisKeys,
    private readonly nodeId: string,
    private readonly handlers: DeliveryHandlers,
  ) {}

  /** Starts listening (to anything already watched). */
  async start(): Promise<void> {
    this.subscriber.on('message', this.onMessage);
    this.subscriber.on('ready', this.onReady);
    this.subscriber.on('close', this.onClose);
    const topics = [...this.watched.keys()];
    if (topics.length > 0) await whenAvailable(() => this.subscriber.subscribe(...topics));
    this.subscribed = true;
    this.confirm(topics);
  }

  /**
   * True while this node receives what the others publish: false from a drop of the subscriber
   * connection until it is back and subscribed again to every channel it watches.
   */
  get listening(): boolean {
    return this.subscribed && this.subscriber.status === 'ready';
  }

  async stop(): Promise<void> {
    this.subscriber.off('message', this.onMessage);
    this.subscriber.off('ready', this.onReady);
    this.subscriber.off('close', this.onClose);
    this.subscribed = false;
    this.release([...this.waiting.keys()]);
    const topics = [...this.watched.keys()];
    if (topics.length > 0 && this.subscriber.status === 'ready') await this.subscriber.unsubscribe(...topics).catch(() => {});
  }

  /**
   * A local socket subscribes to the channel: receive its frames from other nodes. Resolves
   * once Redis has confirmed the subscription (at once when it already had), or at once while
   * the subscriber connection is down (nothing is received then; see listening).
   */
  watch(appId: string, channel: string): Promise<void> {
    const topic = this.keys.channelTopic(appId, channel);
    const n = this.watched.get(topic) ?? 0;
    this.watched.set(topic, n + 1);
    if (n === 0) this.schedule(topic, true);
    if (this.confirmed.has(topic) || !this.listening) return Promise.resolve();
    let waiter = this.waiting.get(topic);
    if (!waiter) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      waiter = { promise, resolve };
      this.waiting.set(topic, waiter);
    }
    return waiter.promise;
  }

  /** A local socket left the channel: stop receiving when it was the last one here. */
  unwatch(appId: string, channel: string): void {
    const topic = this.keys.channelTopic(appId, channel);
    const n = this.watched.get(topic);
    if (n === undefined) return;
    if (n > 1) {
      this.watched.set(topic, n - 1);
      return;
    }
    this.watched.delete(topic);
    this.confirmed.delete(topic);
    this.sentIn.delete(topic);
    this.release([topic]);
    this.schedule(topic, false);
  }

  /** Whether a local socket still watches the channel. */
  watches(appId: string, channel: string): boolean {
    return this.watched.has(this.keys.channelTopic(appId, channel));
  }

  /** Channels this node listens to (Redis channel names), for tests and metrics. */
  watchedCount(): number {
    return this.watched.size;
  }

  /**
   * Sends a frame to the channel's subscribers on the other nodes. Resolves with how many nodes
   * listen (0 when none has a subscriber); rejects with RedisUnavailableError during an outage.
   */
  publish(appId: string, channel: string, frame: string, exceptSocketId?: string): Promise<number> {
    return publishOnBus(this.commands, this.keys, this.nodeId, appId, channel, frame, exceptSocketId);
  }

  private schedule(topic: string, subscribe: boolean): void {
    if (subscribe) {
      this.pendingUnsubscribe.delete(topic);
      this.pendingSubscribe.add(topic);
    } else {
      this.pendingSubscribe.delete(topic);
      this.pendingUnsubscribe.add(topic);
    }
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const add = [...this.pendingSubscribe];
    const drop = [...this.pendingUnsubscribe];
    this.pendingSubscribe.clear();
    this.pendingUnsubscribe.clear();
    if (this.subscriber.status !== 'ready') {
      // resubscribe() on 'ready' catches up; nothing to wait for until then.
      this.release(add);
      return;
    }
    if (add.length > 0) {
      const flush = ++this.flushes;
      for (const topic of add) this.sentIn.set(topic, flush);
      this.subscriber.subscribe(...add).then(
        () => this.confirm(add.filter((topic) => this.sentIn.get(topic) === flush)),
        // The connection dropped: resubscribe() runs on the next 'ready'.
        () => this.release(add),
      );
    }
    if (drop.length > 0) this.subscriber.unsubscribe(...drop).catch(() => {});
  }

  /** Redis confirmed these channels' SUBSCRIBE: their watch() calls resolve. */
  private confirm(topics: readonly string[]): void {
    for (const topic of topics) if (this.watched.has(topic)) this.confirmed.add(topic);
    this.release(topics);
  }

  /** The watch() calls waiting on these channels resolve (confirmed, or nothing to wait for). */
  private release(topics: readonly string[]): void {
    for (const topic of topics) {
      this.waiting.get(topic)?.resolve();
      this.waiting.delete(topic);
    }
  }

  private resubscribe(): void {
    const watched = [...this.watched.keys()];
    if (watched.length === 0) {
      this.subscribed = true;
      this.handlers.onListening?.();
      return;
    }
    this.subscriber.subscribe(...watched).then(() => {
      this.subscribed = true;
      this.confirm(watched);
      this.handlers.onListening?.();
    }, (err: unknown) => {
      log.warn('cluster: re-subscribing after reconnect failed; retried on the next reconnect', { error: String(err) });
    });
  }

  private dispatch(topic: string, message: string): void {
    try {
      const first = message.indexOf('\n');
      const target = this.keys.parseChannelTopic(topic);
      const second = message.indexOf('\n', first + 1);
      if (!target || first < 0 || second < 0) return;
      if (message.slice(0, first) === this.nodeId) return;
      if (!this.watched.has(topic)) return;
      const except = message.slice(first + 1, second);
      this.handlers.onFrame(target.appId, target.channel, message.slice(second + 1), except === '' ? undefined : except);
    } catch (err) {
      log.error('cluster: delivery handler failed', { topic, error: String(err) });
    }
  }
}
