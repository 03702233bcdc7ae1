/**
 * Topic delivery that reaches HTTP fallback sessions as well as WebSockets: it wraps the uWS
 * topics (MainApp) and is what the channel adapter publishes through, so every frame for a
 * channel (events, client events, member_added/removed, subscription_count, watchlist events,
 * frames relayed from other cluster nodes) reaches a session by the same path as a WebSocket.
 * A publish costs one map lookup more when no session is on the topic; with sessions, the
 * frame is JSON-encoded once for all of them.
 */
import type { RecognizedString } from 'uWebSockets.js';
import type { PublishingSocket, TopicFanout, TopicInterestHook } from '../../http/topic-fanout.js';
import { SessionSocket } from './session.js';

export class SessionTopics implements TopicFanout {
  private readonly members = new Map<string, Set<SessionSocket>>();

  /** `interest`: told of each session's subscribe and unsubscribe (front-end threads). */
  constructor(
    private readonly inner: TopicFanout,
    private readonly interest?: TopicInterestHook,
  ) {}

  add(session: SessionSocket, topic: string): boolean {
    if (session.topics.has(topic)) return false;
    session.topics.add(topic);
    let set = this.members.get(topic);
    if (!set) this.members.set(topic, (set = new Set()));
    set.add(session);
    this.interest?.add(topic);
    return true;
  }

  remove(session: SessionSocket, topic: string): boolean {
    if (!session.topics.delete(topic)) return false;
    const set = this.members.get(topic);
    if (set) {
      set.delete(session);
      if (set.size === 0) this.members.delete(topic);
    }
    this.interest?.remove(topic);
    return true;
  }

  /** Takes a session off every topic (it ended). */
  removeAll(session: SessionSocket): void {
    for (const topic of [...session.topics]) this.remove(session, topic);
  }

  publish(topic: RecognizedString, message: RecognizedString): void {
    this.inner.publish(topic, message);
    this.deliver(topic, message, null);
  }

  numSubscribers(topic: RecognizedString): number {
    const n = this.inner.numSubscribers(topic);
    if (this.members.size === 0 || typeof topic !== 'string') return n;
    return n + (this.members.get(topic)?.size ?? 0);
  }

  publishFrom(ws: PublishingSocket, topic: RecognizedString, message: RecognizedString): void {
    if (ws instanceof SessionSocket) {
      this.inner.publish(topic, message);
      this.deliver(topic, message, ws);
      return;
    }
    this.inner.publishFrom(ws, topic, message);
    this.deliver(topic, message, null);
  }

  private deliver(topic: RecognizedString, message: RecognizedString, except: SessionSocket | null): void {
    if (this.members.size === 0 || typeof topic !== 'string') return;
    const set = this.members.get(topic);
    if (!set) return;
    const text = typeof message === 'string' ? message : Buffer.from(message as Uint8Array).toString('utf8');
    const encoded = JSON.stringify(text);
    for (const session of set) if (session !== except) session.push(encoded);
  }
}
