/**
 * Where HTTP fallback sessions live when several nodes serve one cluster behind a load balancer
 * that does not keep a session's requests on one node. The node that opened a session holds it
 * (its queue, its receiving request) and records itself as the session's node; a request that
 * reaches another node is relayed to that node, and a poll's answer relayed back. Ids are the
 * session's key (its bound address and path): the node receiving a request computes it from
 * the request, so a relayed request reaches only a session of the address that sent it.
 * A cluster implements it on its Redis (cluster-directory.ts); a single node has none.
 */
export interface SessionDirectory {
  readonly nodeId: string;
  /**
   * Whether a stream for a session `owner` holds is relayed to it (streamOpen … streamEnd
   * below): between the front-end threads of one process it is; between a cluster's nodes it
   * is not (a stream opens a session where it lands).
   */
  relaysStreams(owner: string): boolean;
  /**
   * The node holding the session, or null when none does. Rejects when the directory cannot be
   * read (Redis away): the caller answers "retry" and opens nothing, since another node may
   * hold the session.
   */
  owner(id: string): Promise<string | null>;
  /**
   * Records this node as the session's holder for `ttlMs` (renewed while the session is used);
   * resolves once recorded: a new session is answered after it, so the client's next request,
   * wherever it lands, finds the session. Rejects when it could not be recorded. The node
   * records its sessions again when Redis is back (an empty Redis lost them).
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
  /** xhr_send reached another node with a body over the cap: the session's node sends it `message` (pusher:error) and closes it with 1009. */
  | { op: 'tooLarge'; id: string; message: string }
  /** A poll reached another node: the session's node answers it with `lines` (or `gone`). */
  | { op: 'poll'; id: string; pollId: string }
  | { op: 'lines'; pollId: string; body: string }
  /** The session is not on the node the directory named (it expired meanwhile). */
  | { op: 'gone'; pollId: string }
  /**
   * A stream reached another node than its session's (relaysStreams): the session's node makes
   * it the session's receiver and sends it the session's lines (`streamLines`, the first of them
   * `h`, which opens the response) until it lets it go (`streamEnd`, its last lines: replaced
   * by a newer receiver, or the session is over); `streamGone`: the session is not there.
   */
  | { op: 'streamOpen'; id: string; streamId: string }
  | { op: 'streamLines'; streamId: string; lines: string }
  | { op: 'streamEnd'; streamId: string; lines: string }
  | { op: 'streamGone'; streamId: string }
  /** The relayed stream's client went away: its session, if it is still the receiver, is idle from now on. */
  | { op: 'streamAborted'; id: string; streamId: string }
  /** The relayed stream's connection holds unsent lines (`blocked`), or took them (not blocked): the session's lines wait meanwhile. */
  | { op: 'streamBlocked'; id: string; streamId: string; blocked: boolean };
