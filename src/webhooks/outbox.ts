/**
 * The webhook outbox of one shard: durable (LMDB), batched, retried, debounced delivery of
 * channel and push webhooks. It is the shard's WebhookEmitter.
 *
 * Flow: an emitted event is turned into one entry per receiver that wants it, written to LMDB
 * (same-turn writes share one transaction) and appended to that receiver's in-memory queue.
 * A queue sends when its oldest fresh entry has waited one batch window, taking every due
 * entry (up to a request's maximum) in event order; at most `concurrencyPerUrl` requests per
 * URL are open at once. A 2xx deletes the entries; a failure reschedules each entry with
 * exponential backoff and jitter, and an entry's last failed attempt moves it to the dead
 * letters. Each receiver has its own queue and timers, so a failing or slow receiver only
 * delays itself. On start the stored entries are loaded and resumed.
 */
import type { RootDatabase } from 'lmdb';
import type { HeraldConfig, WebhookDeliveryConfig } from '../config/schema.js';
import { log } from '../log.js';
import type { ChannelWebhookEvent, PushWebhookEvent, WebhookEmitter } from './emitter.js';
import type { WebhookStats } from './messages.js';
import { DeliveryQueue, readyAt } from './delivery-queue.js';
import { WebhookSender, redactUrl, retryDelayMs, type DeliveryResult, type WebhookRequest } from './http-sender.js';
import { OutboxStore, type OutboxEntry, type WebhookTarget } from './outbox-store.js';
import { ReloadDebounce, type HeldRef } from './reload-debounce.js';
import { channelRequest, newEventId, publishRequest, pushRequest, pushWebhookBody } from './requests.js';
import { WebhookTargets, isDeliverableUrl } from './targets.js';
import { tapWebhookAttempt } from './shard-tap.js';
import type { TenantChange } from '../shards/context.js';

/** Events per channel webhook request; a larger backlog goes out in several requests. */
export const MAX_EVENTS_PER_REQUEST = 100;

/** How often drain() looks whether the events it waits for were attempted, ms. */
const DRAIN_POLL_MS = 20;

/** How long close() lets open requests finish (so delivered events are not sent again), ms. */
const CLOSE_GRACE_MS = 1000;

export interface WebhookOutboxOptions {
  /** The shard's LMDB environment. */
  root: RootDatabase;
  config: Readonly<Pick<HeraldConfig, 'apps' | 'push' | 'webhookDelivery' | 'outbound'>>;
  shardIndex: number;
  /** Jitter source, in [0, 1). */
  random?: () => number;
}

interface UrlSlots {
  active: number;
  queues: Set<DeliveryQueue>;
}

export class WebhookOutbox implements WebhookEmitter {
  private readonly store: OutboxStore;
  private targets: WebhookTargets;
  private readonly delivery: Readonly<WebhookDeliveryConfig>;
  private readonly shardIndex: number;
  private readonly random: () => number;
  private readonly queues = new Map<string, DeliveryQueue>();
  private readonly urls = new Map<string, UrlSlots>();
  private readonly debounce = new ReloadDebounce();
  private readonly closeController = new AbortController();
  private readonly sender: WebhookSender;
  private readonly requests = new Set<Promise<void>>();
  private state: 'open' | 'closing' | 'closed' = 'open';
  private readonly counters = { sent: 0, requests: 0, failedAttempts: 0, deadLettered: 0, suppressed: 0 };

  constructor(opts: WebhookOutboxOptions) {
    this.store = new OutboxStore(opts.root);
    this.targets = new WebhookTargets(opts.config);
    this.delivery = opts.config.webhookDelivery;
    this.shardIndex = opts.shardIndex;
    this.random = opts.random ?? Math.random;
    this.sender = new WebhookSender(opts.config.outbound.allowPrivateAddresses);
    this.resume();
  }

  channelEvent({ appId, event }: ChannelWebhookEvent, options: { debounced?: boolean } = {}): void {
    // While closing, events are still stored (sent after the next start); once closed, LMDB is gone.
    if (this.state === 'closed' || !this.targets.appHasWebhooks(appId)) return;
    const now = Date.now();
    const debounceMs = options.debounced ? 0 : this.delivery.pageReloadDebounceMs;
    let holdKey: string | undefined;
    if (debounceMs > 0) {
      this.debounce.prune(now);
      switch (event.name) {
        case 'channel_occupied':
        case 'member_added': {
          const key = event.name === 'channel_occupied'
            ? ReloadDebounce.channelKey(appId, event.channel)
            : ReloadDebounce.memberKey(appId, event.channel, event.user_id);
          const held = this.debounce.cancel(key, now);
          if (held) {
            this.dropHeld(held, now);
            this.counters.suppressed++;
            return;
          }
          break;
        }
        case 'channel_vacated':
          holdKey = ReloadDebounce.channelKey(appId, event.channel);
          break;
        case 'member_removed':
          holdKey = ReloadDebounce.memberKey(appId, event.channel, event.user_id);
          break;
        default:
          break;
      }
    }
    const notBefore = holdKey ? now + debounceMs : now;
    const id = newEventId();
    const refs: HeldRef[] = [];
    for (const target of this.targets.channelTargets(appId, event.name, event.channel)) {
      const entry: OutboxEntry = {
        seq: this.store.nextSeq(),
        id,
        target,
        event: { ...event, id },
        createdAt: now,
        notBefore,
        attempts: 0,
        ...(holdKey ? { holdKey } : {}),
      };
      const queue = this.enqueue(entry);
      if (holdKey) refs.push({ queueKey: queue.key, seq: entry.seq });
    }
    // A hold with no receiver still cancels the re-occupy: receivers that only want
    // channel_occupied must not see it twice for one page reload.
    if (holdKey) this.debounce.hold(holdKey, notBefore, refs);
  }

  pushEvent(e: PushWebhookEvent): void {
    if (this.state === 'closed') return;
    const now = Date.now();
    const id = newEventId();
    if (e.url !== undefined) {
      if (!isDeliverableUrl(e.url)) {
        log.warn('webhook not sent: webhookUrl is not an http(s) URL', { instanceId: e.instanceId, kind: e.kind });
        return;
      }
      const target: WebhookTarget = { kind: 'publish', instanceId: e.instanceId, url: e.url };
      this.enqueue({ seq: this.store.nextSeq(), id, target, body: JSON.stringify(e.payload), eventType: e.kind, createdAt: now, notBefore: now, attempts: 0 });
      return;
    }
    const targets = this.targets.pushTargets(e.instanceId);
    if (targets.length === 0) return;
    const body = pushWebhookBody(e.kind, e.payload, id, now);
    for (const target of targets) {
      this.enqueue({ seq: this.store.nextSeq(), id, target, body, eventType: e.kind, createdAt: now, notBefore: now, attempts: 0 });
    }
  }

  /** Takes reloaded receivers and credentials (SIGHUP); delivery settings need a restart. */
  reload(config: Readonly<Pick<HeraldConfig, 'apps' | 'push'>>): void {
    this.targets = new WebhookTargets(config);
  }

  /** Takes a few apps or push instances changed at run time (admin API). */
  tenantsChanged(change: TenantChange): void {
    this.targets.patch(change);
  }

  /** Delivery counters and backlog of this shard. */
  stats(): WebhookStats {
    const now = Date.now();
    this.debounce.prune(now);
    let pending = 0;
    let inFlight = 0;
    for (const q of this.queues.values()) pending += q.size;
    for (const slots of this.urls.values()) inFlight += slots.active;
    return {
      shard: this.shardIndex,
      ...this.counters,
      pending,
      held: this.debounce.heldEntries(),
      inFlight,
      receivers: this.queues.size,
      deadLetterStored: this.store.deadLetterCount,
    };
  }

  /** Resolves once every event emitted so far is committed to disk. */
  flushed(): Promise<void> {
    return this.store.flushed();
  }

  /** The newest dead-letter records (operators, tests). */
  deadLetters(limit?: number) {
    return this.store.deadLetters(limit);
  }

  /**
   * For a node that stops (maybe for good, as when a cluster is scaled down): waits until every
   * event due has had its first delivery attempt finished, or `waitMs` passed. Resolves
   * with how many had not. Events held by the reload debounce and retries stay for the next
   * start, as after any stop.
   */
  async drain(waitMs: number): Promise<number> {
    const until = Date.now() + waitMs;
    for (;;) {
      // Due by now: also what arrives during the drain (the leaves of the node's last sockets).
      const now = Date.now();
      let left = 0;
      for (const q of this.queues.values()) left += q.unattempted(now);
      if (left === 0 || this.state !== 'open' || now >= until) return left;
      await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
    }
  }

  /**
   * Stops sending: no new requests, open ones get CLOSE_GRACE_MS to finish, then are aborted.
   * Undelivered entries stay in LMDB and are resumed on the next start.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (this.state !== 'open') return;
    this.state = 'closing';
    for (const q of this.queues.values()) clearTimeout(q.timer);
    if (this.requests.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.requests]), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
    this.state = 'closed';
    this.closeController.abort();
    await Promise.allSettled([...this.requests]);
    this.sender.close();
    await this.store.flushed();
  }

  /** Loads the stored entries into their queues, in event order, and restores debounce holds. */
  private resume(): void {
    const now = Date.now();
    let resumed = 0;
    for (const entry of this.store.loadPending()) {
      if (this.targets.credentials(entry.target).kind === 'gone') {
        this.deadLetter([entry], 'receiver no longer configured', now);
        continue;
      }
      const queue = this.enqueue(entry, false);
      if (entry.holdKey && entry.attempts === 0 && entry.notBefore > now) {
        this.debounce.hold(entry.holdKey, entry.notBefore, [{ queueKey: queue.key, seq: entry.seq }]);
      }
      resumed++;
    }
    if (resumed > 0) log.info('webhook outbox resumed', { shard: this.shardIndex, entries: resumed });
  }

  /** Appends an entry to its receiver's queue (writing it to LMDB first unless it was loaded from there). */
  private enqueue(entry: OutboxEntry, write = true): DeliveryQueue {
    if (write) this.store.put(entry);
    const queue = this.queueFor(entry.target);
    queue.add(entry);
    this.wakeAt(queue, readyAt(entry, queue.batchWindowMs));
    return queue;
  }

  private queueFor(target: WebhookTarget): DeliveryQueue {
    const key = queueKey(target);
    let queue = this.queues.get(key);
    if (!queue) {
      const batched = target.kind === 'channel';
      queue = new DeliveryQueue(key, target, batched ? MAX_EVENTS_PER_REQUEST : 1, batched ? this.delivery.batchWindowMs : 0);
      this.queues.set(key, queue);
      let slots = this.urls.get(target.url);
      if (!slots) this.urls.set(target.url, (slots = { active: 0, queues: new Set() }));
      slots.queues.add(queue);
    }
    return queue;
  }

  /** Makes sure the queue is dispatched no later than `at` (ms). */
  private wakeAt(queue: DeliveryQueue, at: number): void {
    if (this.state !== 'open' || at >= queue.timerAt) return;
    clearTimeout(queue.timer);
    queue.timerAt = at;
    queue.timer = setTimeout(() => {
      queue.timer = undefined;
      queue.timerAt = Number.POSITIVE_INFINITY;
      this.dispatch(queue);
    }, Math.max(0, at - Date.now()));
  }

  /** Sends every due entry of the queue, as far as the URL's free slots allow, then re-arms its timer. */
  private dispatch(queue: DeliveryQueue): void {
    if (this.state !== 'open') return;
    const slots = this.urls.get(queue.target.url)!;
    const now = Date.now();
    while (slots.active < this.delivery.concurrencyPerUrl) {
      const batch = queue.take(now);
      if (batch.length === 0) break;
      slots.active++;
      this.send(queue, slots, batch);
    }
    const next = queue.nextWakeAt(now);
    if (next !== Number.POSITIVE_INFINITY) this.wakeAt(queue, next);
  }

  private send(queue: DeliveryQueue, slots: UrlSlots, batch: OutboxEntry[]): void {
    const now = Date.now();
    const request = this.buildRequest(queue.target, batch, now);
    if (!request) {
      slots.active--;
      for (const entry of batch) queue.remove(entry.seq);
      this.deadLetter(batch, 'receiver no longer configured', now);
      return;
    }
    // Receivers from the config file are the operator's; a per-publish webhookUrl is not.
    const done = this.sender.post(request, queue.target.kind === 'publish', this.delivery.timeoutMs, this.closeController.signal)
      .then((result) => {
        if (this.state === 'closed') return;
        this.settle(queue, batch, result);
      })
      .catch((err: unknown) => log.error('webhook delivery bug', { error: String((err as Error)?.stack ?? err) }))
      .finally(() => {
        this.requests.delete(done);
        slots.active--;
        if (this.state !== 'open') return;
        for (const q of slots.queues) this.dispatch(q);
        this.forgetIfIdle(queue);
      });
    this.requests.add(done);
  }

  /**
   * Drops an empty queue (and its URL's slot record) so one-off receivers, such as
   * per-publish webhookUrls, do not accumulate in memory.
   */
  private forgetIfIdle(queue: DeliveryQueue): void {
    if (queue.size > 0 || queue.inFlightCount > 0 || this.queues.get(queue.key) !== queue) return;
    clearTimeout(queue.timer);
    this.queues.delete(queue.key);
    const slots = this.urls.get(queue.target.url);
    if (!slots) return;
    slots.queues.delete(queue);
    if (slots.queues.size === 0 && slots.active === 0) this.urls.delete(queue.target.url);
  }

  private buildRequest(target: WebhookTarget, batch: readonly OutboxEntry[], now: number): WebhookRequest | undefined {
    const creds = this.targets.credentials(target);
    switch (creds.kind) {
      case 'channel':
        return channelRequest(target.url, creds.appKey, creds.appSecret, batch, now);
      case 'push':
        return pushRequest(target.url, creds.secret, batch[0]!);
      case 'publish':
        return publishRequest(target.url, batch[0]!);
      case 'gone':
        return undefined;
    }
  }

  /** Applies a request's result to its entries: delete, reschedule, or dead-letter. */
  private settle(queue: DeliveryQueue, batch: readonly OutboxEntry[], result: DeliveryResult): void {
    queue.settle(batch);
    tapWebhookAttempt(queue.target, batch, result);
    const now = Date.now();
    if (result.ok) {
      this.counters.requests++;
      this.counters.sent += batch.length;
      for (const entry of batch) {
        queue.remove(entry.seq);
        this.store.remove(entry.seq);
      }
      return;
    }
    this.counters.failedAttempts++;
    log.debug('webhook attempt failed', { url: redactUrl(queue.target.url), events: batch.length, error: result.error });
    const dead: OutboxEntry[] = [];
    // One jitter draw per request: entries that failed together stay together on retry.
    const jitter = this.random();
    for (const entry of batch) {
      const attempts = entry.attempts + 1;
      if (attempts >= this.delivery.maxAttempts || result.final) {
        queue.remove(entry.seq);
        dead.push({ ...entry, attempts });
        continue;
      }
      const updated: OutboxEntry = {
        ...entry,
        attempts,
        notBefore: now + retryDelayMs(attempts, this.delivery.retryBaseMs, () => jitter, result.retryAfterMs),
      };
      delete updated.holdKey;
      queue.add(updated);
      this.store.put(updated);
    }
    this.deadLetter(dead, result.error, now);
  }

  /** Moves entries of one receiver to the dead letters; one warning per call. */
  private deadLetter(entries: readonly OutboxEntry[], reason: string, now: number): void {
    const first = entries[0];
    if (!first) return;
    for (const entry of entries) this.store.deadLetter(entry, reason, now);
    this.counters.deadLettered += entries.length;
    const target = first.target;
    log.warn('webhook dead-lettered', {
      shard: this.shardIndex,
      url: redactUrl(target.url),
      attempts: Math.max(...entries.map((e) => e.attempts)),
      events: entries.length,
      eventIds: entries.slice(0, 10).map((e) => e.id),
      kind: target.kind,
      ...(target.kind === 'channel' ? { appId: target.appId } : { instanceId: target.instanceId }),
      reason,
    });
  }

  /** A re-occupy cancelled a hold: drop its entries that are still held. */
  private dropHeld(refs: readonly HeldRef[], now: number): void {
    for (const { queueKey: key, seq } of refs) {
      const queue = this.queues.get(key);
      const entry = queue?.get(seq);
      if (!queue || !entry || queue.isInFlight(seq) || entry.notBefore <= now) continue;
      queue.remove(seq);
      this.store.remove(seq);
      this.forgetIfIdle(queue);
    }
  }
}

/** The key of a receiver's delivery queue: one queue per app or instance and URL. */
export function queueKey(target: WebhookTarget): string {
  switch (target.kind) {
    case 'channel':
      return JSON.stringify(['channel', target.appId, target.url]);
    case 'push':
      return JSON.stringify(['push', target.instanceId, target.hook, target.url]);
    case 'publish':
      return JSON.stringify(['publish', target.url]);
  }
}
