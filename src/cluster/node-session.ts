/**
 * A node's identity in the cluster. The node id is stable for the life of the process (logs,
 * control messages); the session id is the incarnation under which the node's
 * subscriptions and sockets are recorded in Redis. A node takes a new session whenever it may
 * have lost its registration (its heartbeat was missed and it was reaped, or Redis came back
 * from an outage): it registers everything again under the new one and retires the old one, so
 * a reaper busy with the old session can never remove what the new one records.
 */
import { randomBytes } from 'node:crypto';

/** Node ids: letters, digits, `_`, `-`, `.` (they are parts of Redis keys and session ids). */
export const NODE_ID_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;

export class NodeSession {
  private sessionId: string;
  private readonly goneListeners: (() => void)[] = [];

  constructor(readonly nodeId: string) {
    if (!NODE_ID_PATTERN.test(nodeId)) throw new Error(`invalid node id "${nodeId}": letters, digits, _ - . only, at most 64`);
    this.sessionId = NodeSession.newSessionId(nodeId);
  }

  /** The session id commands are recorded under now. */
  get current(): string {
    return this.sessionId;
  }

  /** Switches to a new session id; returns the previous one. */
  rotate(): string {
    const previous = this.sessionId;
    this.sessionId = NodeSession.newSessionId(this.nodeId);
    return previous;
  }

  /** Takes the session id the node switched to elsewhere (a front-end thread follows its main thread's). */
  adopt(sessionId: string): void {
    if (NodeSession.nodeIdOf(sessionId) !== this.nodeId) throw new Error(`session ${sessionId} is not node ${this.nodeId}'s`);
    this.sessionId = sessionId;
  }

  /** A script found the session gone (reaped): listeners (liveness.ts) re-register the node. */
  reportGone(): void {
    for (const listener of this.goneListeners) listener();
  }

  onGone(listener: () => void): void {
    this.goneListeners.push(listener);
  }

  /** The node id of a session id (newSessionId's inverse). */
  static nodeIdOf(session: string): string {
    const dot = session.lastIndexOf('.');
    return dot > 0 ? session.slice(0, dot) : session;
  }

  private static newSessionId(nodeId: string): string {
    return `${nodeId}.${randomBytes(6).toString('hex')}`;
  }
}

/** A random node id for processes that are not given one (`<hostname-ish>-<random>`). */
export function randomNodeId(hint = 'node'): string {
  const base = hint.replace(/[^A-Za-z0-9_.-]/g, '-').slice(0, 40) || 'node';
  return `${base}-${randomBytes(4).toString('hex')}`;
}
