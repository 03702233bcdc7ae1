/**
 * The sessions this node holds, by key (`<binding> <app key>/<server>/<session>`: routes.ts),
 * and everything that happens to them between requests:
 * - delivery: a session with something queued is flushed once per event-loop turn to its
 *   receiver (a stream stays open and is written to; a poll is answered and the session waits
 *   for the next one);
 * - the tick (every heartbeatMs / 2 at most): a silent stream gets a heartbeat, a poll held for
 *   heartbeatMs is answered with one, a session without a receiver for sessionTimeoutMs is
 *   dropped (closed as a dropped connection, 1006);
 * - the WebSocket endpoint's events (ws/socket-events.ts) for the session: its messages, its
 *   drain and its close, as uWS calls them for a WebSocket; its topics (topics.ts);
 * - in a cluster, its record in the directory (directory.ts): claimed when it opens (routes.ts),
 *   renewed while it is used, released when it goes.
 */
import type { RecognizedString } from 'uWebSockets.js';
import { describeError as describe, log } from '../../log.js';
import type { SocketEvents } from '../ws/socket-events.js';
import type { SessionDirectory } from './directory.js';
import { SessionSocket, type Receiver, type SessionHost } from './session.js';
import type { SessionTopics } from './topics.js';

export interface SessionTableOptions {
  /** A stream silent this long (ms) gets a heartbeat; a poll held this long is answered with one. */
  readonly heartbeatMs: number;
  /** A session without a stream or poll this long (ms) is dropped. */
  readonly sessionTimeoutMs: number;
  /** Bytes queued past which a session's frames are dropped (twice the slow-consumer limit). */
  readonly hardCapBytes: number;
  readonly events: SocketEvents;
  readonly topics: SessionTopics;
  /** Cluster mode: where sessions live (the record of this node's). */
  readonly directory?: SessionDirectory | undefined;
}


export class SessionTable implements SessionHost {
  private readonly sessions = new Map<string, SessionSocket>();
  /** Sessions with something to flush this turn. */
  private readonly dirty = new Set<SessionSocket>();
  private flushScheduled = false;
  private readonly timer: NodeJS.Timeout;
  readonly hardCapBytes: number;
  /** Life (ms) of a session's record in the cluster directory (renewed while the session is used). */
  readonly claimTtlMs: number;

  constructor(private readonly opts: SessionTableOptions) {
    const { heartbeatMs, sessionTimeoutMs } = opts;
    this.hardCapBytes = opts.hardCapBytes;
    this.claimTtlMs = Math.max(60_000, 3 * heartbeatMs, 3 * sessionTimeoutMs);
    const tickMs = Math.max(50, Math.min(1000, Math.floor(heartbeatMs / 2), Math.floor(sessionTimeoutMs / 2)));
    this.timer = setInterval(() => this.tick(Date.now()), tickMs);
    this.timer.unref();
  }

  /** Sessions held (connected or closing). */
  get size(): number {
    return this.sessions.size;
  }

  get(id: string): SessionSocket | undefined {
    return this.sessions.get(id);
  }

  /** A new session, bound to the client address that opened it; connected by the caller. */
  open(id: string, clientAddress: string, now: number): SessionSocket {
    const session = new SessionSocket(this, id, clientAddress, now);
    this.sessions.set(id, session);
    return session;
  }

  /**
   * `receiver` takes the session's frames from now on. pusher-js keeps one receiver per
   * session: one still open is let go (a stream ended, a poll answered with a heartbeat).
   */
  receive(session: SessionSocket, receiver: Receiver, now: number): void {
    const old = session.receiver;
    if (old) {
      this.release(session, now);
      try {
        old.finish(old.stream ? '' : 'h\n');
      } catch {
        // Aborted meanwhile.
      }
    }
    session.receiver = receiver;
    session.idleSinceMs = 0;
  }

  /** The session's receiver is answered or gone: idle from now on. */
  release(session: SessionSocket, now: number): void {
    session.receiver = null;
    session.idleSinceMs = now;
  }

  /** Writes the session's queue to its receiver, if it has one that can take it. */
  flush(session: SessionSocket, now: number): void {
    const r = session.receiver;
    if (!r || r.blocked || !session.pending) return;
    const body = session.take();
    if (body === '') return;
    if (r.stream) {
      let ok = true;
      if (session.finished) r.finish(body);
      else ok = r.write(body);
      r.lastWriteMs = now;
      if (session.finished) {
        this.release(session, now);
        this.drop(session, now);
      } else if (!ok) r.blocked = true;
      return;
    }
    r.finish(body);
    this.release(session, now);
    if (session.finished) this.drop(session, now);
  }

  /** Off the table; ended first (as a dropped connection) if it was still open. */
  drop(session: SessionSocket, now: number): void {
    if (!session.ended) session.close();
    const r = session.receiver;
    if (r) {
      this.release(session, now);
      try {
        r.finish('');
      } catch {
        // Already answered or aborted.
      }
    }
    if (this.sessions.get(session.id) === session) {
      this.sessions.delete(session.id);
      this.opts.directory?.release(session.id);
    }
    this.dirty.delete(session);
  }

  /** The client's messages, handled as WebSocket messages of the session. */
  inject(session: SessionSocket, messages: readonly string[]): void {
    const events = this.opts.events;
    // An empty array is pusher-js' heartbeat: activity, as a WebSocket ping frame.
    if (messages.length === 0 && !session.ended) events.activity(session);
    for (const message of messages) {
      if (session.ended) break;
      const bytes = Buffer.from(message, 'utf8');
      events.message(session, bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer, false);
    }
  }

  /** Cluster: records this node as the session's holder for claimTtlMs (a new session, before it is answered). */
  claim(id: string): Promise<void> {
    return this.opts.directory!.claim(id, this.claimTtlMs);
  }

  /** Cluster: the claim of a session refused before it was opened is given back. */
  unclaim(id: string): void {
    this.opts.directory?.release(id);
  }

  /** Cluster: records this node as the session's holder again once a third of the record's life has passed. */
  renew(session: SessionSocket, now: number): void {
    const directory = this.opts.directory;
    if (!directory || now - session.claimedAtMs < this.claimTtlMs / 3) return;
    session.claimedAtMs = now;
    directory.claim(session.id, this.claimTtlMs).catch(() => {
      // Not recorded (Redis away): tried again on the session's next request.
      session.claimedAtMs = 0;
    });
  }

  /** Flushes what is queued, drops every session and stops the tick (shutdown). */
  close(): void {
    clearInterval(this.timer);
    this.flushAll();
    const now = Date.now();
    for (const session of [...this.sessions.values()]) this.drop(session, now);
  }

  // SessionHost: what the sessions ask of the table.

  schedule(session: SessionSocket): void {
    this.dirty.add(session);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flushAll());
    }
  }

  ended(session: SessionSocket, code: number): void {
    this.opts.topics.removeAll(session);
    try {
      this.opts.events.close(session, code);
    } catch (err) {
      log.error('http fallback: session close handler failed', { error: describe(err) });
    }
  }

  drained(session: SessionSocket): void {
    try {
      this.opts.events.drain(session);
    } catch (err) {
      log.error('http fallback: session drain handler failed', { error: describe(err) });
    }
  }

  subscribe(session: SessionSocket, topic: string): boolean {
    return this.opts.topics.add(session, topic);
  }

  unsubscribe(session: SessionSocket, topic: string): boolean {
    return this.opts.topics.remove(session, topic);
  }

  publish(session: SessionSocket, topic: RecognizedString, message: RecognizedString): boolean {
    this.opts.topics.publishFrom(session, topic, message);
    return true;
  }

  private flushAll(): void {
    this.flushScheduled = false;
    const now = Date.now();
    for (const session of this.dirty) {
      try {
        this.flush(session, now);
      } catch (err) {
        log.error('http fallback: flush failed', { error: describe(err) });
      }
    }
    this.dirty.clear();
  }

  /** Heartbeats and idle expiry, for every session. */
  private tick(now: number): void {
    const { heartbeatMs, sessionTimeoutMs } = this.opts;
    for (const session of this.sessions.values()) {
      try {
        const r = session.receiver;
        if (r) {
          if (r.stream) {
            if (!r.blocked && now - r.lastWriteMs >= heartbeatMs) {
              r.write('h\n');
              r.lastWriteMs = now;
            }
          } else if (now - r.openedMs >= heartbeatMs) {
            r.finish('h\n');
            this.release(session, now);
          }
        } else if (now - session.idleSinceMs >= sessionTimeoutMs) {
          this.drop(session, now);
        }
      } catch (err) {
        log.error('http fallback: session sweep failed', { error: describe(err) });
      }
    }
  }
}
