/**
 * Shard side of channels.reconcile: the front end lists, in parts of one session, every
 * subscription it has on this shard; the last part compares the list with what the shard has
 * stored. A subscriber the front end does not have (a ghost: its leave was lost) is removed as a
 * leave would be, webhooks included; a subscription the front end has and the shard lacks is
 * recorded again silently (as after a worker restart), unless its leave is already on the way.
 * The main thread sends the session only while no other membership request of this shard is
 * in flight, so both sides describe the same moment.
 */
import type { ReconcileRemoval, ReconciledSubscription } from '../messages.js';

export interface ReconcilerDeps {
  /** Every subscription the shard has stored: [appId, channel, socketId]. */
  stored(): [appId: string, channel: string, socketId: string][];
  /** Removes one subscriber as a leave would (webhooks); answers what others should be told. */
  remove(appId: string, channel: string, socketId: string): ReconcileRemoval;
  /** Records subscriptions again, silently; answers how many were added. */
  restore(appId: string, subscriptions: { channel: string; socketId: string; member?: { userId: string; userInfo?: unknown } }[]): number;
}

function keyOf(appId: string, channel: string, socketId: string): string {
  return `${appId}\u0000${channel}\u0000${socketId}`;
}

export class Reconciler {
  private session = -1;
  private listed = new Map<string, ReconciledSubscription>();

  constructor(private readonly deps: ReconcilerDeps) {}

  /** One part of a session; a part of a newer session discards an unfinished older one. */
  part(req: { session: number; subscriptions: ReconciledSubscription[]; last: boolean }): { removed: ReconcileRemoval[]; restored: number } {
    if (req.session !== this.session) {
      this.session = req.session;
      this.listed = new Map();
    }
    for (const sub of req.subscriptions) this.listed.set(keyOf(sub.appId, sub.channel, sub.socketId), sub);
    if (!req.last) return { removed: [], restored: 0 };
    const listed = this.listed;
    this.listed = new Map();
    this.session = -1;
    return this.apply(listed);
  }

  private apply(listed: Map<string, ReconciledSubscription>): { removed: ReconcileRemoval[]; restored: number } {
    const removed: ReconcileRemoval[] = [];
    for (const [appId, channel, socketId] of this.deps.stored()) {
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
