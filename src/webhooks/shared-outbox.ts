/**
 * The webhook outbox of a cluster node's shard: shared and durable in Redis, so a webhook
 * decided by one node is delivered by whichever node is alive (a node is disposable: its data
 * dir holds none of them). It is the shard's WebhookEmitter in cluster mode; one node runs the
 * LMDB outbox (outbox.ts) instead.
 *
 * - A Redis stream (`<prefix>webhooks`, shared-outbox-keys.ts) holds every webhook not yet delivered, one
 *   message per event and receiver, with its event id fixed when it is written: a retry, by this
 *   node or another, sends the same id. The leave debounce's held leaves are released into it
 *   by a script any node runs (scripts.ts heraldReleaseHeld), one message per event for the
 *   app's receivers.
 * - Every shard of every node reads it through one consumer group (`delivery`): each message
 *   goes to one consumer, which sends it in batches per receiver with retries and backoff through
 *   the delivery engine the LMDB outbox uses (delivery-engine.ts), and deletes it (XACK + XDEL)
 *   once every receiver answered 2xx or it was dead-lettered.
 * - A consumer keeps the messages it holds claimed (XCLAIM resets their idle time every third of
 *   nodeTimeoutMs). Messages of a consumer that stopped doing so (its node died, or was stopped
 *   while they waited) are taken over after nodeTimeoutMs by another (XAUTOCLAIM) and sent
 *   again: delivery is at least once, with the same ids.
 */
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { ClusterConfig, HeraldConfig } from '../config/schema.js';
import type { TenantChange } from '../shards/context.js';
import { createRedisConnections, replyTimeoutMs, type RedisConnections } from '../cluster/connection.js';
import { SharedOutboxKeys } from './shared-outbox-keys.js';
import { log } from '../log.js';
import type { ChannelEventBody, ChannelEventOptions, ChannelWebhookEvent, PushWebhookEvent, WebhookEmitter } from './emitter.js';
import type { WebhookStats } from './messages.js';
import { CLOSE_GRACE_MS, DeliveryEngine } from './delivery-engine.js';
import type { OutboxEntry, WebhookTarget } from './outbox-store.js';
import { MAX_DEAD_LETTERS } from './outbox-store.js';
import { newEventId, pushWebhookBody } from './requests.js';
import { WebhookTargets, isDeliverableUrl, retiredKeepMs } from './targets.js';

/** The consumer group every node's shards read the outbox stream through. */
export const DELIVERY_GROUP = 'delivery';
/** Messages read per XREADGROUP / XAUTOCLAIM. */
const READ_COUNT = 100;
/** How long one XREADGROUP blocks waiting for messages, ms (below the connection's reply timeout). */
const READ_BLOCK_MS = 1000;
/** Wait after a failed Redis call before the loop tries again, ms. */
const RETRY_REDIS_MS = 500;
/** Deliveries of a message whose receiver the taking node does not know, before it is dead-lettered. */
const PASS_ON_LIMIT = 20;

/** One message of the outbox stream (field `m`). */
export type SharedMessage =
  /** One push or per-publish webhook for one receiver: its exact body. */
  | { k: 'push'; id: string; target: WebhookTarget; body: string; eventType: string; createdAt: number }
  /**
   * Channel events in the order they were decided, each with its id: for `target` (written by a
   * shard, the events that receiver wants), or for every receiver of the app that wants each
   * (a released hold). One message goes to one consumer, which sends its events in order.
   */
  | { k: 'channel'; appId: string; target?: WebhookTarget; events: (ChannelEventBody & { id: string })[]; createdAt: number };

export interface SharedOutboxOptions {
  cluster: ClusterConfig;
  config: Readonly<Pick<HeraldConfig, 'apps' | 'push' | 'webhookDelivery' | 'outbound'>>;
  shardIndex: number;
  random?: () => number;
}

export class SharedWebhookOutbox implements WebhookEmitter {
  private readonly connections: RedisConnections;
  private readonly redis: Redis;
  private readonly reader: Redis;
  private readonly keys: SharedOutboxKeys;
  private readonly consumer: string;
  private targets: WebhookTargets;
  private readonly shardIndex: number;
  private readonly claimIdleMs: number;
  private readonly random: () => number;
  private readonly engine: DeliveryEngine;
  /** Local entry seq → its stream message id; stream id → entries of it not settled yet. */
  private readonly messageOf = new Map<number, string>();
  private readonly unsettled = new Map<string, number>();
  private seq = 0;
  /** Writes and deletions not answered by Redis yet (flushed()). */
  private readonly writes = new Set<Promise<unknown>>();
  /** Messages left for another node (receiver unknown here), not taken again for a while. */
  private readonly passedOn = new Set<string>();
  /** Settled messages waiting for this turn's XACK + XDEL. */
  private readonly toAcknowledge: string[] = [];
  private readonly timers: NodeJS.Timeout[] = [];
  private deadStored = 0;
  private readonly reading: Promise<void>;

  constructor(opts: SharedOutboxOptions) {
    const node = opts.cluster.nodeId ?? hostname().replace(/[^A-Za-z0-9_.-]/g, '-');
    this.consumer = `${node}.${process.pid}.s${opts.shardIndex}.${Math.random().toString(36).slice(2, 8)}`;
    this.connections = createRedisConnections(opts.cluster, { nodeId: `${node}-webhooks-s${opts.shardIndex}`, replyTimeoutMs: replyTimeoutMs(opts.cluster.nodeTimeoutMs) });
    this.redis = this.connections.commands;
    this.reader = this.connections.subscriber;
    this.keys = new SharedOutboxKeys(opts.cluster.keyPrefix);
    this.targets = new WebhookTargets(opts.config, retiredKeepMs(opts.config.webhookDelivery));
    this.shardIndex = opts.shardIndex;
    this.claimIdleMs = opts.cluster.nodeTimeoutMs;
    this.random = opts.random ?? Math.random;
    this.engine = new DeliveryEngine({
      store: {
        delivered: (entry) => this.settled(entry.seq),
        // A retry waits in this consumer's queue; the message stays claimed meanwhile.
        retrying: () => {},
        deadLettered: (entries, reason, now) => this.storeDeadLetters(entries, reason, now),
      },
      targets: () => this.targets,
      config: opts.config,
      random: this.random,
    });
    this.reading = this.readLoop();
    const touch = setInterval(() => void this.keepClaimed(), Math.max(50, Math.floor(this.claimIdleMs / 3)));
    touch.unref();
    this.timers.push(touch);
    this.scheduleTakeOver();
  }

  /**
   * The next takeover pass, every quarter to half of nodeTimeoutMs at random: with a fixed period
   * the node that claimed a message last (its idle time restarting then) would always be the
   * first to find it idle again, and a message one node passes on would never reach another.
   */
  private scheduleTakeOver(): void {
    if (this.engine.state !== 'open') return;
    const quarter = Math.max(25, Math.floor(this.claimIdleMs / 4));
    const timer = setTimeout(() => {
      this.timers.splice(this.timers.indexOf(timer), 1);
      void this.takeOver().finally(() => this.scheduleTakeOver());
    }, quarter + Math.floor(this.random() * quarter));
    timer.unref();
    this.timers.push(timer);
  }

  // --- producing ------------------------------------------------------------------------

  channelEvent({ appId, event }: ChannelWebhookEvent, options: ChannelEventOptions = {}): void {
    this.channelEvents(appId, [event], options.retired === true);
  }

  /**
   * Channel events decided together (a join's occupied, member_added and count), in order:
   * one stream message per receiver, so they reach it in that order. Decided in Redis with the
   * leave debounce applied there (held leaves come from the stream when due). `retired`: a
   * removed app's last events, for the receivers it had (targets.ts).
   */
  channelEvents(appId: string, events: readonly ChannelEventBody[], retired = false): void {
    if (this.engine.state === 'closed' || !this.targets.appHasWebhooks(appId, retired)) return;
    const createdAt = Date.now();
    const byReceiver = new Map<string, { target: WebhookTarget; events: (ChannelEventBody & { id: string })[] }>();
    for (const event of events) {
      const withId = { ...event, id: newEventId() };
      for (const target of this.targets.channelTargets(appId, event.name, event.channel, retired)) {
        let group = byReceiver.get(target.url);
        if (!group) byReceiver.set(target.url, (group = { target, events: [] }));
        group.events.push(withId);
      }
    }
    for (const { target, events: list } of byReceiver.values()) this.write({ k: 'channel', appId, target, events: list, createdAt });
  }

  pushEvent(e: PushWebhookEvent): void {
    if (this.engine.state === 'closed') return;
    const createdAt = Date.now();
    const id = newEventId();
    if (e.url !== undefined) {
      if (!isDeliverableUrl(e.url)) {
        log.warn('webhook not sent: webhookUrl is not an http(s) URL', { instanceId: e.instanceId, kind: e.kind });
        return;
      }
      this.write({ k: 'push', id, target: { kind: 'publish', instanceId: e.instanceId, url: e.url }, body: JSON.stringify(e.payload), eventType: e.kind, createdAt });
      return;
    }
    const body = pushWebhookBody(e.kind, e.payload, id, createdAt);
    for (const target of this.targets.pushTargets(e.instanceId)) this.write({ k: 'push', id, target, body, eventType: e.kind, createdAt });
  }

  /**
   * Appends a message to the shared stream. While Redis is away the write is retried (the event
   * waits in this process's memory: lost only if the node dies before Redis is back).
   */
  private write(message: SharedMessage, attempt = 0): void {
    const written = this.redis.xadd(this.keys.webhookOutbox(), '*', 'm', JSON.stringify(message)).then(
      () => undefined,
      (err: unknown) => {
        if (this.engine.state === 'closed') {
          log.error('webhook lost: Redis unavailable while the node stopped', { ids: message.k === 'push' ? [message.id] : message.events.map((e) => e.id), error: String(err) });
          return;
        }
        if (attempt === 0) log.warn('webhook outbox: Redis unavailable, retrying the write', { error: String(err) });
        return new Promise<void>((resolve) => setTimeout(resolve, Math.min(RETRY_REDIS_MS * 2 ** attempt, 5000))).then(() => this.write(message, attempt + 1));
      },
    );
    this.writes.add(written);
    void written.finally(() => this.writes.delete(written));
  }

  /** Resolves once every message written so far is in Redis. */
  async flushed(): Promise<void> {
    while (this.writes.size > 0) await Promise.allSettled([...this.writes]);
  }

  // --- consuming ------------------------------------------------------------------------

  private async ensureGroup(): Promise<void> {
    try {
      await this.redis.xgroup('CREATE', this.keys.webhookOutbox(), DELIVERY_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err;
    }
  }

  private async readLoop(): Promise<void> {
    // Stops waiting when the outbox closes (a node whose start-up failed closes it at once).
    await this.connections.ready(60_000, { stop: () => this.engine.state !== 'open' }).catch(() => {});
    let grouped = false;
    while (this.engine.state === 'open') {
      try {
        if (!grouped) {
          await this.ensureGroup();
          grouped = true;
        }
        const reply = (await this.reader.xreadgroup('GROUP', DELIVERY_GROUP, this.consumer, 'COUNT', READ_COUNT, 'BLOCK', READ_BLOCK_MS, 'STREAMS', this.keys.webhookOutbox(), '>')) as
          | [string, [string, string[]][]][]
          | null;
        if (this.engine.state !== 'open') {
          // Read while closing: handed back at once rather than left to a takeover.
          for (const [, messages] of reply ?? []) for (const [streamId, fields] of messages) await this.handBack(streamId, fields);
          break;
        }
        for (const [, messages] of reply ?? []) for (const [streamId, fields] of messages) this.accept(streamId, fields);
      } catch (err) {
        // NOGROUP: Redis came back empty; the group is made again.
        if (String(err).includes('NOGROUP')) grouped = false;
        if (this.engine.state !== 'open') break;
        await new Promise((r) => setTimeout(r, RETRY_REDIS_MS));
      }
    }
  }

  /** Takes a stream message into the local queues (once: a message already held is skipped). */
  private accept(streamId: string, fields: string[] | null): void {
    if (this.unsettled.has(streamId) || this.passedOn.has(streamId)) return;
    const json = fields?.[fields.indexOf('m') + 1];
    let message: SharedMessage | undefined;
    try {
      message = json ? (JSON.parse(json) as SharedMessage) : undefined;
    } catch {
      message = undefined;
    }
    if (message && !this.knowsReceiver(message)) {
      void this.passOn(streamId, message);
      return;
    }
    const entries: OutboxEntry[] = [];
    const now = Date.now();
    if (message?.k === 'push') {
      entries.push({ seq: 0, id: message.id, target: message.target, body: message.body, eventType: message.eventType, createdAt: message.createdAt, notBefore: now, attempts: 0 });
    } else if (message?.k === 'channel') {
      // A released hold of an app removed since goes to the receivers the app had.
      const retired = !message.target && !this.targets.appHasWebhooks(message.appId);
      for (const event of message.events) {
        const targets = message.target ? [message.target] : this.targets.channelTargets(message.appId, event.name, event.channel, retired);
        for (const target of targets) entries.push({ seq: 0, id: event.id, target, event, createdAt: message.createdAt, notBefore: now, attempts: 0 });
      }
    }
    if (entries.length === 0) {
      // Nobody wants it (or it is unreadable): done.
      this.acknowledge(streamId);
      return;
    }
    this.unsettled.set(streamId, entries.length);
    for (const entry of entries) {
      entry.seq = ++this.seq;
      this.messageOf.set(entry.seq, streamId);
      if (this.targets.credentials(entry.target).kind === 'gone') {
        this.engine.deadLetter([entry], 'receiver no longer configured', Date.now());
        continue;
      }
      this.engine.enqueue(entry);
    }
  }

  /**
   * Whether this node's config has the message's receiver (its secret, for signing). Nodes of a
   * cluster share one config, but a reload reaches them one by one, and push instances may be
   * configured on some nodes only.
   */
  private knowsReceiver(message: SharedMessage): boolean {
    if (message.k === 'channel' && !message.target) return this.targets.appHasWebhooks(message.appId, !this.targets.appHasWebhooks(message.appId));
    const target = message.k === 'push' ? message.target : message.target!;
    return this.targets.credentials(target).kind !== 'gone';
  }

  /**
   * A message whose receiver this node does not know is left unclaimed, for another node to take
   * over after nodeTimeoutMs (XAUTOCLAIM); once it has gone round PASS_ON_LIMIT times no node
   * knows it: dead-lettered as `receiver no longer configured`.
   */
  private async passOn(streamId: string, message: SharedMessage): Promise<void> {
    this.passedOn.add(streamId);
    setTimeout(() => this.passedOn.delete(streamId), this.claimIdleMs).unref();
    const pending = (await this.redis.xpending(this.keys.webhookOutbox(), DELIVERY_GROUP, streamId, streamId, 1).catch(() => [])) as [string, string, number, number][];
    const deliveries = pending[0]?.[3] ?? 0;
    if (deliveries < PASS_ON_LIMIT) return;
    const now = Date.now();
    if (message.k === 'channel' && !message.target) {
      log.warn('webhook dropped: no node knows the app', { appId: message.appId, ids: message.events.map((e) => e.id) });
      this.acknowledge(streamId);
      return;
    }
    const entries: OutboxEntry[] =
      message.k === 'push'
        ? [{ seq: 0, id: message.id, target: message.target, body: message.body, eventType: message.eventType, createdAt: message.createdAt, notBefore: now, attempts: 0 }]
        : message.events.map((event) => ({ seq: 0, id: event.id, target: message.target!, event, createdAt: message.createdAt, notBefore: now, attempts: 0 }));
    this.unsettled.set(streamId, entries.length);
    for (const entry of entries) {
      entry.seq = ++this.seq;
      this.messageOf.set(entry.seq, streamId);
    }
    this.engine.deadLetter(entries, 'receiver no longer configured', now);
  }

  /**
   * Gives a message this consumer holds back to every node: the same fields (so the same webhook
   * ids) added anew, which any node's reader takes at once, and the original acknowledged and
   * removed in the same transaction. Used by a node that stops, so what it had not sent waits for
   * no takeover. Events of the message already delivered may be sent again (at least once).
   */
  private async handBack(streamId: string, fields?: string[] | null): Promise<void> {
    const key = this.keys.webhookOutbox();
    try {
      const raw = fields ?? ((await this.redis.xrange(key, streamId, streamId)) as [string, string[]][])[0]?.[1];
      if (!raw || raw.length === 0) return;
      await this.redis.multi().xadd(key, '*', ...raw).xack(key, DELIVERY_GROUP, streamId).xdel(key, streamId).exec();
    } catch {
      // Redis away: the message stays pending here and another node takes it over after nodeTimeoutMs.
    }
  }

  /** Keeps the messages this consumer holds from looking abandoned (resets their idle time). */
  private async keepClaimed(): Promise<void> {
    if (this.engine.state === 'closed' || this.unsettled.size === 0) return;
    const ids = [...this.unsettled.keys()];
    for (let i = 0; i < ids.length; i += 1000) {
      await this.redis.xclaim(this.keys.webhookOutbox(), DELIVERY_GROUP, this.consumer, 0, ...ids.slice(i, i + 1000), 'JUSTID').catch(() => {});
    }
  }

  /** Takes over messages idle for nodeTimeoutMs: their consumer's node died or stopped. */
  private async takeOver(): Promise<void> {
    if (this.engine.state !== 'open') return;
    try {
      let cursor = '0-0';
      do {
        const [next, claimed, deleted] = (await this.redis.xautoclaim(this.keys.webhookOutbox(), DELIVERY_GROUP, this.consumer, this.claimIdleMs, cursor, 'COUNT', READ_COUNT)) as [
          string,
          [string, string[] | null][],
          string[]?,
        ];
        if (claimed.length > 0) log.info('webhook outbox: taking over webhooks of a node gone silent', { consumer: this.consumer, messages: claimed.length });
        for (const [streamId, fields] of claimed) this.accept(streamId, fields);
        for (const streamId of deleted ?? []) void this.redis.xack(this.keys.webhookOutbox(), DELIVERY_GROUP, streamId).catch(() => {});
        cursor = next;
      } while (cursor !== '0-0' && this.engine.state === 'open');
      await this.forgetGoneConsumers();
    } catch {
      // Redis away (or no group yet): the next pass tries again.
    }
  }

  /**
   * Removes from the group the consumers of stopped shards (nothing pending, silent for ten
   * times nodeTimeoutMs): every process start adds new ones, which would otherwise pile up.
   */
  private async forgetGoneConsumers(): Promise<void> {
    const rows = (await this.redis.xinfo('CONSUMERS', this.keys.webhookOutbox(), DELIVERY_GROUP)) as unknown[][];
    for (const row of rows) {
      const fields = new Map<string, unknown>();
      for (let i = 0; i + 1 < row.length; i += 2) fields.set(String(row[i]), row[i + 1]);
      const name = String(fields.get('name'));
      if (name !== this.consumer && Number(fields.get('pending')) === 0 && Number(fields.get('idle')) > 10 * this.claimIdleMs) {
        await this.redis.xgroup('DELCONSUMER', this.keys.webhookOutbox(), DELIVERY_GROUP, name);
      }
    }
  }

  /** One entry of a message is settled (delivered or dead-lettered); the last one deletes the message. */
  private settled(seq: number): void {
    const streamId = this.messageOf.get(seq);
    if (streamId === undefined) return;
    this.messageOf.delete(seq);
    const left = (this.unsettled.get(streamId) ?? 1) - 1;
    if (left > 0) {
      this.unsettled.set(streamId, left);
      return;
    }
    this.unsettled.delete(streamId);
    this.acknowledge(streamId);
  }

  /** Deletes a settled message; the messages settled in one event-loop turn go in one XACK and one XDEL. */
  private acknowledge(streamId: string): void {
    this.toAcknowledge.push(streamId);
    if (this.toAcknowledge.length === 1) setImmediate(() => this.acknowledgeNow(this.toAcknowledge.splice(0), 0));
  }

  private acknowledgeNow(ids: string[], attempt: number): void {
    const key = this.keys.webhookOutbox();
    const done = Promise.all([this.redis.xack(key, DELIVERY_GROUP, ...ids), this.redis.xdel(key, ...ids)]).then(
      () => undefined,
      () => {
        // Redis away: the messages would be sent again by whoever claims them; try for a while.
        if (attempt < 20 && this.engine.state !== 'closed') setTimeout(() => this.acknowledgeNow(ids, attempt + 1), RETRY_REDIS_MS).unref();
      },
    );
    this.writes.add(done);
    void done.finally(() => this.writes.delete(done));
  }

  // --- delivery (delivery-engine.ts, as the LMDB outbox) ----------------------------------------------------

  reload(config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>): void {
    this.targets = this.targets.reloaded(config);
  }

  /** Takes a few apps or push instances changed at run time (admin API). */
  tenantsChanged(change: TenantChange): void {
    this.targets.patch(change);
  }

  stats(): WebhookStats {
    return { shard: this.shardIndex, ...this.engine.counters, ...this.engine.backlog(), held: 0, deadLetterStored: this.deadStored };
  }

  /**
   * For a node that stops: waits (up to `waitMs`) until what it wrote is in Redis, where any node
   * delivers it, and until the entries it holds that are due had a first attempt. Resolves with
   * how many had not.
   */
  async drain(waitMs: number): Promise<number> {
    const until = Date.now() + waitMs;
    await Promise.race([this.flushed(), new Promise((r) => setTimeout(r, waitMs))]);
    return this.engine.drainUntil(until);
  }

  /**
   * Stops reading and sending: open requests get CLOSE_GRACE_MS to finish. What this consumer
   * still holds is handed back to the stream for the other nodes (handBack); if Redis does not
   * answer, another node takes it over after nodeTimeoutMs.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (this.engine.state !== 'open') return;
    for (const t of this.timers) clearTimeout(t);
    await this.engine.stopSending(graceMs);
    await Promise.race([this.flushed(), new Promise((r) => setTimeout(r, graceMs))]);
    await this.engine.abort();
    // What is still held (not delivered in the grace period) goes back to the other nodes now.
    await this.reading.catch(() => {});
    for (const streamId of [...this.unsettled.keys()]) await this.handBack(streamId);
    await this.connections.close();
    await this.reading.catch(() => {});
  }

  /** Moves entries to the shared dead letters (a capped stream); each settles its message once written. */
  private storeDeadLetters(entries: readonly OutboxEntry[], reason: string, now: number): void {
    for (const entry of entries) {
      const record = JSON.stringify({ entry, deadAt: now, reason });
      void this.redis
        .xadd(this.keys.webhookDeadLetters(), 'MAXLEN', '~', MAX_DEAD_LETTERS, '*', 'm', record)
        .then(() => this.redis.xlen(this.keys.webhookDeadLetters()))
        .then((n) => (this.deadStored = n))
        .catch(() => {})
        .finally(() => this.settled(entry.seq));
    }
  }
}
