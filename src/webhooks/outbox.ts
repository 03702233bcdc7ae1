/**
 * The webhook outbox of one shard: durable (LMDB), batched, retried, debounced delivery of
 * channel and push webhooks. It is the shard's WebhookEmitter.
 *
 * Flow: an emitted event is turned into one entry per receiver that wants it, written to LMDB
 * (same-turn writes share one transaction) and appended to that receiver's in-memory queue in
 * the delivery engine (delivery-engine.ts). A queue sends when its oldest fresh entry has
 * waited one batch window, taking every due entry (up to a request's maximum) in event order.
 * A 2xx deletes the entries from LMDB; a failure writes each entry back rescheduled with
 * exponential backoff and jitter, and an entry's last failed attempt moves it to the dead
 * letters. On start the stored entries are loaded and resumed.
 */
import type { RootDatabase } from 'lmdb';
import type { HeraldConfig } from '../config/schema.js';
import { log } from '../log.js';
import type { ChannelEventOptions, ChannelWebhookEvent, PushWebhookEvent, WebhookEmitter } from './emitter.js';
import type { WebhookStats } from './messages.js';
import { CLOSE_GRACE_MS, DeliveryEngine, type DeliveryClock } from './delivery-engine.js';
import { OutboxStore, type OutboxEntry, type WebhookTarget } from './outbox-store.js';
import { LeaveDebounce, type HeldRef } from './leave-debounce.js';
import { newEventId, pushWebhookBody } from './requests.js';
import { WebhookTargets, isDeliverableUrl, retiredKeepMs } from './targets.js';
import type { TenantChange } from '../shards/context.js';

export interface WebhookOutboxOptions {
  /** The shard's LMDB environment. */
  root: RootDatabase;
  config: Readonly<Pick<HeraldConfig, 'apps' | 'push' | 'webhookDelivery' | 'outbound'>>;
  shardIndex: number;
  /** Jitter source, in [0, 1). */
  random?: () => number;
  /** Real time unless a test injects its own. */
  clock?: DeliveryClock;
}

export class WebhookOutbox implements WebhookEmitter {
  private readonly store: OutboxStore;
  private targets: WebhookTargets;
  private readonly delivery: HeraldConfig['webhookDelivery'];
  private readonly shardIndex: number;
  private readonly engine: DeliveryEngine;
  private readonly debounce = new LeaveDebounce();

  constructor(opts: WebhookOutboxOptions) {
    this.store = new OutboxStore(opts.root);
    this.targets = new WebhookTargets(opts.config, retiredKeepMs(opts.config.webhookDelivery));
    this.delivery = opts.config.webhookDelivery;
    this.shardIndex = opts.shardIndex;
    const store = this.store;
    this.engine = new DeliveryEngine({
      store: {
        delivered: (entry) => store.remove(entry.seq),
        retrying: (entry) => store.put(entry),
        deadLettered: (entries, reason, now) => {
          for (const entry of entries) store.deadLetter(entry, reason, now);
        },
      },
      targets: () => this.targets,
      config: opts.config,
      logFields: { shard: opts.shardIndex },
      ...(opts.random ? { random: opts.random } : {}),
      ...(opts.clock ? { clock: opts.clock } : {}),
    });
    this.resume();
  }

  channelEvent({ appId, event }: ChannelWebhookEvent, options: ChannelEventOptions = {}): void {
    const retired = options.retired === true;
    // While closing, events are still stored (sent after the next start); once closed, LMDB is gone.
    if (this.engine.state === 'closed' || !this.targets.appHasWebhooks(appId, retired)) return;
    const now = this.engine.clock.now();
    // A removed app's last events are not held: nothing of that app can come back to cancel them.
    const debounceMs = options.debounced || retired ? 0 : this.delivery.pageReloadDebounceMs;
    let holdKey: string | undefined;
    if (debounceMs > 0) {
      this.debounce.prune(now);
      switch (event.name) {
        case 'channel_occupied':
        case 'member_added': {
          const key = event.name === 'channel_occupied'
            ? LeaveDebounce.channelKey(appId, event.channel)
            : LeaveDebounce.memberKey(appId, event.channel, event.user_id);
          const held = this.debounce.cancel(key, now);
          if (held) {
            this.dropHeld(held, now);
            this.engine.counters.suppressed++;
            return;
          }
          break;
        }
        case 'channel_vacated':
          holdKey = LeaveDebounce.channelKey(appId, event.channel);
          break;
        case 'member_removed':
          holdKey = LeaveDebounce.memberKey(appId, event.channel, event.user_id);
          break;
        default:
          break;
      }
    }
    const notBefore = holdKey ? now + debounceMs : now;
    const id = newEventId();
    const refs: HeldRef[] = [];
    for (const target of this.targets.channelTargets(appId, event.name, event.channel, retired)) {
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
    if (this.engine.state === 'closed') return;
    const now = this.engine.clock.now();
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
    this.targets = this.targets.reloaded(config);
    const kept = new Set(config.apps.map((a) => a.id));
    this.debounce.forgetApps((appId) => !kept.has(appId));
  }

  /** Takes a few apps or push instances changed at run time (admin API). */
  tenantsChanged(change: TenantChange): void {
    this.targets.patch(change);
    const removed = new Set(change.removedApps ?? []);
    if (removed.size > 0) this.debounce.forgetApps((appId) => removed.has(appId));
  }

  /** Delivery counters and backlog of this shard. */
  stats(): WebhookStats {
    this.debounce.prune(this.engine.clock.now());
    return {
      shard: this.shardIndex,
      ...this.engine.counters,
      ...this.engine.backlog(),
      held: this.debounce.heldEntries(),
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
   * with how many had not. Events held by the leave debounce and retries stay for the next
   * start, as after any stop.
   */
  drain(waitMs: number): Promise<number> {
    // Due by now: also what arrives during the drain (the leaves of the node's last sockets).
    return this.engine.drainUntil(this.engine.clock.now() + waitMs);
  }

  /**
   * Stops sending: no new requests, open ones get CLOSE_GRACE_MS to finish, then are aborted.
   * Undelivered entries stay in LMDB and are resumed on the next start.
   */
  async close(graceMs = CLOSE_GRACE_MS): Promise<void> {
    if (this.engine.state !== 'open') return;
    await this.engine.stopSending(graceMs);
    await this.engine.abort();
    await this.store.flushed();
  }

  /** Loads the stored entries into their queues, in event order, and restores debounce holds. */
  private resume(): void {
    const now = this.engine.clock.now();
    let resumed = 0;
    for (const entry of this.store.loadPending()) {
      if (this.targets.credentials(entry.target).kind === 'gone') {
        this.engine.deadLetter([entry], 'receiver no longer configured', now);
        continue;
      }
      const queue = this.engine.enqueue(entry);
      if (entry.holdKey && entry.attempts === 0 && entry.notBefore > now) {
        this.debounce.hold(entry.holdKey, entry.notBefore, [{ queueKey: queue.key, seq: entry.seq }]);
      }
      resumed++;
    }
    if (resumed > 0) log.info('webhook outbox resumed', { shard: this.shardIndex, entries: resumed });
  }

  /** Writes an entry to LMDB and appends it to its receiver's queue. */
  private enqueue(entry: OutboxEntry) {
    this.store.put(entry);
    return this.engine.enqueue(entry);
  }

  /** A re-occupy cancelled a hold: drop its entries that are still held. */
  private dropHeld(refs: readonly HeldRef[], now: number): void {
    for (const { queueKey: key, seq } of refs) {
      const queue = this.engine.queue(key);
      const entry = queue?.get(seq);
      if (!queue || !entry || queue.isInFlight(seq) || entry.notBefore <= now) continue;
      queue.remove(seq);
      this.store.remove(seq);
      this.engine.forgetIfIdle(queue);
    }
  }
}
