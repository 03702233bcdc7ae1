/**
 * Shard side of channels.reconcile: the front end lists, in parts of one session, every
 * subscription it has on this shard; the last part compares the list with what the shard has
 * stored. A subscriber the front end does not have (a ghost: its leave was lost) is removed as a
 * leave would be, webhooks included; a subscription the front end has and the shard lacks is
 * recorded again silently (as after a worker restart), unless its leave is already on the way.
 * The front end sends the session only while no other membership request of its own to this
 * shard is in flight, so both sides describe the same moment.
 *
 * Front-end threads: a request naming `frontEnd` speaks for that thread only. Its digest, its
 * comparison and its removals cover the subscribers whose socket id carries the thread
 * (socket-id.ts threadOf), and its session is kept apart from other threads' sessions, so
 * threads reconciling at once do not discard each other's parts. A thread that is gone has
 * all its subscribers removed (drop). A request naming none speaks for every subscriber.
 */
import type { ReconcileRemoval, ReconciledSubscription } from '../messages.js';
import { threadOf } from '../socket-id.js';
import { subscriptionDigest, type SubscriptionDigest } from './subscription-digest.js';

type Stored = [appId: string, channel: string, socketId: string];

export interface ReconcilerDeps {
  /** Every subscription the shard has stored (a snapshot: safe to remove while walking it). */
  stored(): Stored[];
  /** Removes one subscriber as a leave would (webhooks); answers what others should be told. */
  remove(appId: string, channel: string, socketId: string): ReconcileRemoval;
  /** Records subscriptions again, silently; answers how many were added. */
  restore(appId: string, subscriptions: { channel: string; socketId: string; member?: { userId: string; userInfo?: unknown } }[]): number;
}

export interface ReconcilePart {
  session: number;
  subscriptions: ReconciledSubscription[];
  last: boolean;
  /** The front-end thread the list is of; absent: the list is of every subscriber. */
  frontEnd?: number;
}

/** The key of the sessions of requests that name no front end (thread indexes are ≥ 0). */
const EVERY_FRONT_END = -1;

function keyOf(appId: string, channel: string, socketId: string): string {
  return `${appId}\u0000${channel}\u0000${socketId}`;
}

/** An unfinished session: the parts listed so far. */
interface OpenSession {
  session: number;
  listed: Map<string, ReconciledSubscription>;
}

export class Reconciler {
  /** Unfinished sessions by front end (EVERY_FRONT_END for requests naming none). */
  private readonly sessions = new Map<number, OpenSession>();

  constructor(private readonly deps: ReconcilerDeps) {}

  /** The digest of the stored subscriptions of `frontEnd` (all of them when absent), for the periodic check. */
  digest(frontEnd?: number): SubscriptionDigest {
    return subscriptionDigest(this.storedOf(frontEnd));
  }

  /** One part of a session; a part of a newer session of the same front end discards its unfinished older one. */
  part(req: ReconcilePart): { removed: ReconcileRemoval[]; restored: number } {
    const key = req.frontEnd ?? EVERY_FRONT_END;
    let open = this.sessions.get(key);
    if (!open || open.session !== req.session) {
      open = { session: req.session, listed: new Map() };
      this.sessions.set(key, open);
    }
    for (const sub of req.subscriptions) open.listed.set(keyOf(sub.appId, sub.channel, sub.socketId), sub);
    if (!req.last) return { removed: [], restored: 0 };
    this.sessions.delete(key);
    return this.apply(open.listed, req.frontEnd);
  }

  /** Removes every subscriber of a front-end thread that is gone; its unfinished session goes too. */
  drop(frontEnd: number): ReconcileRemoval[] {
    this.sessions.delete(frontEnd);
    return this.storedOf(frontEnd).map(([appId, channel, socketId]) => this.deps.remove(appId, channel, socketId));
  }

  private storedOf(frontEnd: number | undefined): Stored[] {
    const stored = this.deps.stored();
    return frontEnd === undefined ? stored : stored.filter(([, , socketId]) => threadOf(socketId) === frontEnd);
  }

  private apply(listed: Map<string, ReconciledSubscription>, frontEnd: number | undefined): { removed: ReconcileRemoval[]; restored: number } {
    const removed: ReconcileRemoval[] = [];
    for (const [appId, channel, socketId] of this.storedOf(frontEnd)) {
      const key = keyOf(appId, channel, socketId);
      if (listed.has(key)) listed.delete(key);
      else removed.push(this.deps.remove(appId, channel, socketId));
    }
    // What is left in `listed` the front end has and this shard is missing.
    const byApp = new Map<string, { channel: string; socketId: string; member?: { userId: string; userInfo?: unknown } }[]>();
    for (const sub of listed.values()) {
      if (sub.leaving) continue;
      let list = byApp.get(sub.appId);
      if (!list) byApp.set(sub.appId, (list = []));
      list.push(sub.member ? { channel: sub.channel, socketId: sub.socketId, member: sub.member } : { channel: sub.channel, socketId: sub.socketId });
    }
    let restored = 0;
    for (const [appId, subs] of byApp) restored += this.deps.restore(appId, subs);
    return { removed, restored };
  }
}
