/**
 * Where HTTP fallback sessions live when several nodes serve one cluster behind a load balancer
 * that does not keep a session's requests on one node. The node that opened a session holds it
 * (its queue, its receiving request) and records itself as the session's node; a request that
 * reaches another node is relayed to that node, and a poll's answer relayed back.
 * The cluster adapter (Redis) implements it; a single node has none.
 */
export interface SessionDirectory {
  readonly nodeId: string;
  /** The node holding the session, or null (none, or the directory cannot be read). */
  owner(id: string): Promise<string | null>;
  /**
   * Records this node as the session's holder for `ttlMs` (renewed while the session is used);
   * resolves once recorded (or the record failed): a new session is answered after it, so the
   * client's next request, wherever it lands, finds the session.
   */
  claim(id: string, ttlMs: number): Promise<void>;
  /** The session is gone from this node. */
  release(id: string): void;
  /** A relay message to one node. */
  send(nodeId: string, message: FallbackRelay): void;
  /** Relay messages to this node. */
  onMessage(handler: (message: unknown, origin: string) => void): void;
}

/** What nodes tell each other about sessions. */
export type FallbackRelay =
  /** xhr_send reached another node: the messages, for the session's node to take. */
  | { op: 'send'; id: string; messages: string[] }
  /** A poll reached another node: the session's node answers it with `lines` (or `gone`). */
  | { op: 'poll'; id: string; pollId: string }
  | { op: 'lines'; pollId: string; body: string }
  /** The session is not on the node the directory named (it expired meanwhile). */
  | { op: 'gone'; pollId: string };
