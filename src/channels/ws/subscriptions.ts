/**
 * Keeps each connection's channel memberships in step with the channel state (the adapter's:
 * the shards, or Redis in a cluster), whatever order subscribe, unsubscribe and close arrive
 * in. Per (connection, channel) the client's wish (`wanted`) and the recorded state (`joined`)
 * are reconciled with at most one adapter call in flight: a close during a join is followed by a leave as soon as the join answers, and an
 * unsubscribe + subscribe during a leave re-joins after it. No member or subscriber is left
 * behind by a socket that drops without unsubscribing: the adapter queues joins and leaves
 * per shard, drops a queued join the client no longer wants, and never drops a leave.
 */
import { HeraldError } from '../../errors.js';
import { describeError, log } from '../../log.js';
import type { ChannelAdapter, FrontEndSubscription, LostChannels, SubscribeRequest, SubscribeResult } from '../adapter/channel-adapter.js';
import { countsSubscriptions } from '../names.js';
import * as frames from '../frames.js';
import { Membership, type SocketState } from '../socket-registry.js';

/** What a recovering subscribe asks for (`since`, `previous_socket_ids`), as the client sent it. */
export interface Recovering {
  /** The last serial the client saw on the channel. */
  since: string;
  /**
   * The socket ids it had since (history/previous-sockets.ts); null when malformed: the
   * subscription goes ahead without a replay, and the client gets herald:recovery_failed
   * (`invalid_previous_socket_ids`).
   */
  previousSocketIds: readonly string[] | null;
}

export class Subscriptions {
  /**
   * Closed connections with a membership still to leave (a leave queued or in flight). Open
   * ones are found through `open` instead: no set entry per connection (~35 B each).
   */
  private readonly closing = new Set<SocketState>();

  /**
   * `draining`: the server is shutting down (see leave). `open`: the open connections (the
   * registry's), whose memberships `frontEndOn` lists along with those of `closing`.
   */
  constructor(
    private readonly adapter: ChannelAdapter,
    private readonly draining: () => boolean,
    private readonly open: () => Iterable<SocketState>,
  ) {
    adapter.onStateLost((lost) => this.frontEndOn(lost));
  }

  /**
   * The subscriptions recorded in the channel state (as far as this thread knows) on the given
   * channels: for the adapter to record again after it lost them, or to reconcile a shard with.
   * Leaves queued or in flight are included, marked `leaving`: after a lost state they failed
   * or will fail, and their retry then removes the member for real (member_removed, webhooks).
   * Joins queued or in flight are not: they fail, and the client is told so, or they have not
   * reached the channel state yet.
   */
  private frontEndOn(lost: LostChannels): FrontEndSubscription[] {
    const out: FrontEndSubscription[] = [];
    for (const state of this.open()) if (!state.closed) this.collectJoined(state, lost, out);
    for (const state of this.closing) this.collectJoined(state, lost, out);
    return out;
  }

  private collectJoined(state: SocketState, lost: LostChannels, out: FrontEndSubscription[]): void {
    for (const [channel, m] of state.channels) {
      if (!m.joined || !lost(state.app.id, channel)) continue;
      const sub: FrontEndSubscription = { appId: state.app.id, channel, socketId: state.socketId };
      if (m.joinedAs) sub.member = { userId: m.joinedAs.userId, userInfo: m.joinedAs.userInfo };
      if (!m.wanted) sub.leaving = true;
      out.push(sub);
    }
  }

  /**
   * What each subscription that asked to recover asked for, until its join is answered: kept
   * beside the memberships, since few have one.
   */
  private readonly recovering = new WeakMap<Membership, Recovering>();

  /**
   * The client asked to subscribe (already authorised). A repeated subscribe is ignored. With
   * `recovery` (a recovering client's last serial), subscription_succeeded is followed by the
   * channel's kept events after it (less those left out for this client), or
   * herald:recovery_failed, before any live event.
   */
  subscribe(state: SocketState, channel: string, member?: { userId: string; userInfo: unknown }, recovery?: Recovering): void {
    let m = state.channels.get(channel);
    if (m?.wanted) return;
    if (!m) {
      m = new Membership();
      state.channels.set(channel, m);
    }
    m.wanted = true;
    m.request = member;
    if (recovery === undefined) this.recovering.delete(m);
    else this.recovering.set(m, recovery);
    this.reconcile(state, channel, m);
  }

  /** The client asked to unsubscribe; unknown channels are ignored. */
  unsubscribe(state: SocketState, channel: string): void {
    const m = state.channels.get(channel);
    if (!m || !m.wanted) return;
    m.wanted = false;
    if (m.delivered) {
      m.delivered = false;
      if (!state.closed && state.ws) this.adapter.detach(state.ws, state.app.id, channel);
    }
    this.reconcile(state, channel, m);
  }

  /** The socket closed: leave every channel joined or being joined. uWS already dropped its topics. */
  closed(state: SocketState): void {
    for (const [channel, m] of state.channels) {
      m.wanted = false;
      m.delivered = false;
      this.reconcile(state, channel, m);
    }
    if (state.channels.size > 0) this.closing.add(state);
  }

  private reconcile(state: SocketState, channel: string, m: Membership): void {
    if (m.busy) return;
    if (m.wanted && !m.joined) {
      this.join(state, channel, m);
    } else if (!m.wanted && m.joined) {
      if (state.closed && this.draining() && state.app.webhooks.length === 0) {
        // Shutting down: channel state is in memory and goes with the process; a leave
        // matters only for the webhooks it produces (channel_vacated, member_removed).
        m.joined = false;
        this.reconcile(state, channel, m);
        return;
      }
      this.leave(state, channel, m);
    } else if (!m.wanted && !m.joined && state.channels.get(channel) === m) {
      state.channels.delete(channel);
      if (state.channels.size === 0) this.closing.delete(state);
    }
  }

  private join(state: SocketState, channel: string, m: Membership): void {
    m.busy = true;
    const member = m.request;
    const req: SubscribeRequest = member
      ? { appId: state.app.id, channel, socketId: state.socketId, member: { userId: member.userId, userInfo: member.userInfo } }
      : { appId: state.app.id, channel, socketId: state.socketId };
    const recovery = this.recovering.get(m);
    this.recovering.delete(m);
    // Malformed previous_socket_ids: joined without a replay, and told so (deliver).
    const refused = recovery !== undefined && recovery.previousSocketIds === null;
    if (recovery !== undefined && recovery.previousSocketIds !== null) {
      req.since = recovery.since;
      if (recovery.previousSocketIds.length > 0) req.previousSocketIds = recovery.previousSocketIds;
    }
    const stillWanted = (): boolean => m.wanted && !state.closed;
    this.adapter.subscribe(req, stillWanted).then(
      (res) => {
        m.busy = false;
        if (res === null) {
          // Withdrawn before it reached the channel state: nothing to undo.
          this.reconcile(state, channel, m);
          return;
        }
        m.joined = true;
        m.joinedAs = member;
        if (refused) res.recovery = { events: [], failed: 'invalid_previous_socket_ids' };
        if (m.wanted && !state.closed) this.deliver(state, channel, m, res);
        else this.announceJoinToOthers(state, channel, m, res);
        this.reconcile(state, channel, m);
      },
      (err: unknown) => {
        m.busy = false;
        const limit = err instanceof HeraldError && err.code !== 'SHARD_UNAVAILABLE' && err.code !== 'INTERNAL';
        // A refused join changed nothing; after any other failure the channel state may have it: leave.
        m.joined = !limit;
        m.joinedAs = member;
        if (m.wanted && !state.closed && state.ws) {
          const herr = limit ? (err as HeraldError) : new HeraldError('SUBSCRIPTION_FAILED');
          state.ws.send(frames.subscriptionError(channel, herr));
        }
        if (!limit) log.warn('channel subscribe failed', { appId: state.app.id, channel, error: String(err) });
        m.wanted = false;
        this.reconcile(state, channel, m);
      },
    ).catch((err: unknown) => this.bookkeepingFailed(state, channel, 'join', err));
  }

  /** subscription_succeeded, the cached event, then the others' member_added and the new count. */
  private deliver(state: SocketState, channel: string, m: Membership, res: SubscribeResult): void {
    const ws = state.ws!;
    const appId = state.app.id;
    ws.cork(() => {
      ws.send(frames.subscriptionSucceeded(channel, res.presenceJson ?? res.presence));
      const recovery = res.recovery;
      if (recovery) {
        // What the client missed, read with the join: live events (later serials) follow from attach.
        if (recovery.failed !== null) ws.send(frames.recoveryFailed(channel, recovery.failed));
        for (const e of recovery.events) ws.send(frames.keptEvent(e.event, channel, e.data, e.serial, e.userId));
        if (recovery.failed === null) ws.send(frames.recovered(channel, recovery.events.length));
      }
      // Attached now, in the turn the join answered: later events reach it live (see ChannelAdapter.attach).
      const cached = this.adapter.attach(ws, appId, channel, res);
      m.delivered = true;
      if (cached !== undefined) {
        ws.send(cached ? frames.channelEvent(cached.event, channel, cached.data) : frames.cacheMiss(channel));
      }
      if (res.memberAdded && m.joinedAs) {
        // Everyone on the channel but the new member's connection.
        this.adapter.publish(appId, channel, frames.memberAdded(channel, m.joinedAs.userId, m.joinedAs.userInfo), state.socketId);
      }
    });
    if (countsSubscriptions(state.app, channel)) {
      this.adapter.publish(appId, channel, frames.subscriptionCount(channel, res.subscriptionCount));
    }
  }

  /**
   * A join the client no longer wants (closed or unsubscribed meanwhile): the socket is on no
   * topic, but others may already see the member in their snapshots, so they get the same
   * member_added / count they would have, and the leave that follows corrects it.
   */
  private announceJoinToOthers(state: SocketState, channel: string, m: Membership, res: SubscribeResult): void {
    const appId = state.app.id;
    if (res.memberAdded && m.joinedAs) this.adapter.publish(appId, channel, frames.memberAdded(channel, m.joinedAs.userId, m.joinedAs.userInfo));
    if (countsSubscriptions(state.app, channel)) {
      this.adapter.publish(appId, channel, frames.subscriptionCount(channel, res.subscriptionCount));
    }
  }

  /**
   * A bug in the handling of an answer (frames, reconcile). Logged; the promise chain ends here,
   * since an unhandled rejection would end the process.
   */
  private bookkeepingFailed(state: SocketState, channel: string, step: 'join' | 'leave', err: unknown): void {
    log.error(`channel ${step} bookkeeping failed`, { appId: state.app.id, channel, error: describeError(err) });
  }

  private leave(state: SocketState, channel: string, m: Membership): void {
    m.busy = true;
    this.adapter.unsubscribe(state.app.id, channel, state.socketId).then(
      (res) => {
        m.busy = false;
        m.joined = false;
        const appId = state.app.id;
        if (res.memberRemoved && m.joinedAs) this.adapter.publish(appId, channel, frames.memberRemoved(channel, m.joinedAs.userId));
        if (countsSubscriptions(state.app, channel)) {
          this.adapter.publish(appId, channel, frames.subscriptionCount(channel, res.subscriptionCount));
        }
        m.joinedAs = undefined;
        this.reconcile(state, channel, m);
      },
      (err: unknown) => {
        // The adapter retries a leave until it is applied: it fails only when the server shuts
        // down, and then the channel state stops answering. Best effort, no noise.
        if (!this.draining()) log.warn('channel unsubscribe failed', { appId: state.app.id, channel, error: String(err) });
        m.busy = false;
        m.joined = false;
        this.reconcile(state, channel, m);
      },
    ).catch((err: unknown) => this.bookkeepingFailed(state, channel, 'leave', err));
  }
}
