/**
 * Webhook delivery, whichever outbox holds the webhooks: one queue per receiver, sent in batches
 * when due, at most `concurrencyPerUrl` requests per URL open at once, retried with exponential
 * backoff and jitter, and dead-lettered after `maxAttempts` or at once when retrying cannot
 * help (a `final` failure: the address is refused). A failing or slow receiver only delays
 * itself.
 *
 * The outbox that feeds it (LMDB on one node, outbox.ts; a Redis stream in a cluster,
 * shared-outbox.ts) keeps its own record of each entry through a DeliveryStore: told when an
 * entry is delivered, rescheduled or dead-lettered.
 */
import type { HeraldConfig } from '../config/schema.js';
import { shardTapEvent, shardWatching } from '../debug-tap/shard-tap.js';
import type { DebugEvent } from '../debug-tap/tap.js';
import { describeError, log } from '../log.js';
import { DeliveryQueue, readyAt } from './delivery-queue.js';
import { WebhookSender, redactUrl, retryDelayMs, type DeliveryResult, type WebhookRequest } from './http-sender.js';
import type { OutboxEntry, WebhookTarget } from './outbox-store.js';
import { channelRequest, publishRequest, pushRequest } from './requests.js';
import type { WebhookTargets } from './targets.js';

/** Events per channel webhook request; a larger backlog goes out in several requests. */
export const MAX_EVENTS_PER_REQUEST = 100;

/** How long close() lets open requests finish (so delivered events are not sent again), ms. */
export const CLOSE_GRACE_MS = 1000;

/** How often drain() looks whether the events it waits for were attempted, ms. */
const DRAIN_POLL_MS = 20;

/** What an outbox keeps of each entry, told what became of it. */
export interface DeliveryStore {
  /** The receiver answered 2xx: the entry is done. */
  delivered(entry: OutboxEntry): void;
  /** A failed attempt: the entry (its `attempts` and `notBefore` updated) is tried again. */
  retrying(entry: OutboxEntry): void;
  /** The entries go to the dead letters (already out of their queue). */
  deadLettered(entries: readonly OutboxEntry[], reason: string, now: number): void;
}

/** Time as the engine reads it and waits for it; real time unless a test injects its own. */
export interface DeliveryClock {
  now(): number;
  setTimeout(run: () => void, ms: number): unknown;
  clearTimeout(timer: unknown): void;
}

export const REAL_CLOCK: DeliveryClock = {
  now: () => Date.now(),
  setTimeout: (run, ms) => setTimeout(run, ms),
  clearTimeout: (timer) => clearTimeout(timer as NodeJS.Timeout | undefined),
};

export interface DeliveryEngineOptions {
  store: DeliveryStore;
  /** The receivers and their credentials as now configured (they change on a reload). */
  targets: () => WebhookTargets;
  config: Readonly<Pick<HeraldConfig, 'webhookDelivery' | 'outbound'>>;
  /** Fields added to the dead-letter warning (the shard). */
  logFields?: Readonly<Record<string, unknown>>;
  /** Jitter source, in [0, 1). */
  random?: () => number;
  clock?: DeliveryClock;
}

interface UrlSlots {
  active: number;
  queues: Set<DeliveryQueue>;
}

export type EngineState = 'open' | 'closing' | 'closed';

export class DeliveryEngine {
  readonly counters = { sent: 0, requests: 0, failedAttempts: 0, deadLettered: 0, suppressed: 0 };
  readonly clock: DeliveryClock;
  #state: EngineState = 'open';
  private readonly store: DeliveryStore;
  private readonly targets: () => WebhookTargets;
  private readonly delivery: DeliveryEngineOptions['config']['webhookDelivery'];
  private readonly logFields: Readonly<Record<string, unknown>>;
  private readonly random: () => number;
  private readonly queues = new Map<string, DeliveryQueue>();
  private readonly urls = new Map<string, UrlSlots>();
  private readonly closeController = new AbortController();
  private readonly sender: WebhookSender;
  private readonly requests = new Set<Promise<void>>();

  constructor(opts: DeliveryEngineOptions) {
    this.store = opts.store;
    this.targets = opts.targets;
    this.delivery = opts.config.webhookDelivery;
    this.logFields = opts.logFields ?? {};
    this.random = opts.random ?? Math.random;
    this.clock = opts.clock ?? REAL_CLOCK;
    this.sender = new WebhookSender(opts.config.outbound.allowPrivateAddresses);
  }

  /** open: sending; closing: no new requests, open ones finishing; closed: nothing settles any more. */
  get state(): EngineState {
    return this.#state;
  }

  /** Appends an entry to its receiver's queue and makes sure the queue wakes when it is due. */
  enqueue(entry: OutboxEntry): DeliveryQueue {
    const queue = this.queueFor(entry.target);
    queue.add(entry);
    this.wakeAt(queue, readyAt(entry, queue.batchWindowMs));
    return queue;
  }

  /** The queue of a receiver, if it has one. */
  queue(key: string): DeliveryQueue | undefined {
    return this.queues.get(key);
  }

  /** Backlog figures for stats(). */
  backlog(): { pending: number; inFlight: number; receivers: number } {
    let pending = 0;
    let inFlight = 0;
    for (const q of this.queues.values()) pending += q.size;
    for (const slots of this.urls.values()) inFlight += slots.active;
    return { pending, inFlight, receivers: this.queues.size };
  }

  /**
   * Waits until every entry due (also those enqueued meanwhile) had its first attempt finished,
   * or the engine stops sending, or `until` (ms) passed. Resolves with how many had not.
   */
  async drainUntil(until: number): Promise<number> {
    for (;;) {
      const now = this.clock.now();
      let left = 0;
      for (const q of this.queues.values()) left += q.unattempted(now);
      if (left === 0 || this.#state !== 'open' || now >= until) return left;
      await new Promise((r) => setTimeout(r, DRAIN_POLL_MS));
    }
  }

  /** First step of a close: no new requests; open ones get `graceMs` to finish. */
  async stopSending(graceMs: number): Promise<void> {
    this.#state = 'closing';
    for (const q of this.queues.values()) this.clock.clearTimeout(q.timer);
    if (this.requests.size > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.allSettled([...this.requests]), new Promise((r) => (timer = setTimeout(r, graceMs)))]);
      clearTimeout(timer);
    }
  }

  /** Last step of a close: aborts what is still open; its entries stay undelivered in the store. */
  async abort(): Promise<void> {
    this.#state = 'closed';
    this.closeController.abort();
    await Promise.allSettled([...this.requests]);
    this.sender.close();
  }

  /** Moves entries of one receiver to the dead letters; one warning per call. */
  deadLetter(entries: readonly OutboxEntry[], reason: string, now: number): void {
    const first = entries[0];
    if (!first) return;
    this.store.deadLettered(entries, reason, now);
    this.counters.deadLettered += entries.length;
    const target = first.target;
    log.warn('webhook dead-lettered', {
      ...this.logFields,
      url: redactUrl(target.url),
      attempts: Math.max(...entries.map((e) => e.attempts)),
      events: entries.length,
      eventIds: entries.slice(0, 10).map((e) => e.id),
      kind: target.kind,
      ...(target.kind === 'channel' ? { appId: target.appId } : { instanceId: target.instanceId }),
      reason,
    });
  }

  /**
   * Drops an empty queue (and its URL's slot record) so one-off receivers, such as
   * per-publish webhookUrls, do not accumulate in memory.
   */
  forgetIfIdle(queue: DeliveryQueue): void {
    if (queue.size > 0 || queue.inFlightCount > 0 || this.queues.get(queue.key) !== queue) return;
    this.clock.clearTimeout(queue.timer);
    this.queues.delete(queue.key);
    const slots = this.urls.get(queue.target.url);
    if (!slots) return;
    slots.queues.delete(queue);
    if (slots.queues.size === 0 && slots.active === 0) this.urls.delete(queue.target.url);
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
    if (this.#state !== 'open' || at >= queue.timerAt) return;
    this.clock.clearTimeout(queue.timer);
    queue.timerAt = at;
    queue.timer = this.clock.setTimeout(() => {
      queue.timer = undefined;
      queue.timerAt = Number.POSITIVE_INFINITY;
      this.dispatch(queue);
    }, Math.max(0, at - this.clock.now())) as NodeJS.Timeout;
  }

  /** Sends every due entry of the queue, as far as the URL's free slots allow, then re-arms its timer. */
  private dispatch(queue: DeliveryQueue): void {
    if (this.#state !== 'open') return;
    const slots = this.urls.get(queue.target.url)!;
    const now = this.clock.now();
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
    const now = this.clock.now();
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
        if (this.#state === 'closed') return;
        this.settle(queue, batch, result);
      })
      .catch((err: unknown) => log.error('webhook delivery bug', { error: describeError(err) }))
      .finally(() => {
        this.requests.delete(done);
        slots.active--;
        if (this.#state !== 'open') return;
        for (const q of slots.queues) this.dispatch(q);
        this.forgetIfIdle(queue);
      });
    this.requests.add(done);
  }

  private buildRequest(target: WebhookTarget, batch: readonly OutboxEntry[], now: number): WebhookRequest | undefined {
    const creds = this.targets().credentials(target);
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

  /** Applies a request's result to its entries: delivered, rescheduled, or dead-lettered. */
  private settle(queue: DeliveryQueue, batch: readonly OutboxEntry[], result: DeliveryResult): void {
    queue.settle(batch);
    tapWebhookAttempt(queue.target, batch, result);
    const now = this.clock.now();
    if (result.ok) {
      this.counters.requests++;
      this.counters.sent += batch.length;
      for (const entry of batch) {
        queue.remove(entry.seq);
        this.store.delivered(entry);
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
      // A retried leave is no longer held by the leave debounce.
      delete updated.holdKey;
      queue.add(updated);
      this.store.retrying(updated);
    }
    this.deadLetter(dead, result.error, now);
  }
}

/**
 * The key of a receiver's delivery queue: one queue per app or instance and URL (a removed
 * app's retired events apart from those of an app created again with its id).
 */
export function queueKey(target: WebhookTarget): string {
  switch (target.kind) {
    case 'channel':
      return JSON.stringify(target.retired ? ['retired', target.appId, target.url] : ['channel', target.appId, target.url]);
    case 'push':
      return JSON.stringify(['push', target.instanceId, target.hook, target.url]);
    case 'publish':
      return JSON.stringify(['publish', target.url]);
  }
}

/** A channel webhook request finished (delivered or failed): shown when its app is watched. */
function tapWebhookAttempt(target: WebhookTarget, batch: readonly OutboxEntry[], result: DeliveryResult): void {
  if (target.kind !== 'channel' || !shardWatching(target.appId)) return;
  const event: DebugEvent = {
    kind: 'webhook',
    url: redactUrl(target.url),
    events: batch.map((entry) => String(entry.event?.name ?? '?')),
    ok: result.ok,
  };
  if (result.status !== undefined) event.status = result.status;
  if (!result.ok) event.error = result.error;
  shardTapEvent(target.appId, event);
}
