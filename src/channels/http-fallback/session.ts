/**
 * One HTTP fallback session (pusher-js' xhr_streaming and xhr_polling transports): to the
 * WebSocket endpoint, the registry, the sweep and the channel adapter it is a connection like a
 * WebSocket, a ClientSocket (socket-registry.ts: send, cork, end, topics, publish, buffered
 * amount), and it queues what is sent to it until a stream or poll (its receiver) takes it.
 *
 * Framing, one line per message, as pusher-js reads it: `o` (open), `h` (heartbeat),
 * `a[<frame>,…]` (frames, each a JSON string), `c[<code>,"<reason>"]` (close).
 */
import type { RecognizedString } from 'uWebSockets.js';
import type { ClientSocket, SocketUserData } from '../socket-registry.js';
import { CLOSE_CODES } from '../../errors.js';
import { errorFrame } from '../frames.js';

/** What a session needs from the place that holds the sessions (session-table.ts). */
export interface SessionHost {
  /** Sends `session`'s queue to its receiver soon (once per event-loop turn for every session). */
  schedule(session: SessionSocket): void;
  /** The session ended (end() or close()): it is off its topics; the close handler runs. */
  ended(session: SessionSocket, code: number): void;
  /** Its queue went empty while it was a slow consumer being let go (uWS' drain). */
  drained(session: SessionSocket): void;
  /** Topic membership (the sessions' side of topic delivery, topics.ts). */
  subscribe(session: SessionSocket, topic: string): boolean;
  unsubscribe(session: SessionSocket, topic: string): boolean;
  /** Sends to every subscriber of the topic but `session` (a client event). */
  publish(session: SessionSocket, topic: RecognizedString, message: RecognizedString): boolean;
  /** Bytes queued past which frames are dropped (the socket's hard cap: twice the slow-consumer limit). */
  readonly hardCapBytes: number;
}

/**
 * The open request that takes a session's frames: a stream (kept open) or a poll (answered
 * once); on this node, or a poll on another node of the cluster (its answer relayed there).
 */
export interface Receiver {
  readonly stream: boolean;
  /** Streams: writes lines; false when the connection holds them unsent (blocked). */
  write(lines: string): boolean;
  /** Ends it: a poll's one answer, or a stream's last lines. */
  finish(lines: string): void;
  /** uWS holds unsent bytes for it: nothing more is written until it is writable. */
  blocked: boolean;
  /** Epoch ms of the last write (streams: a heartbeat follows heartbeatMs of silence). */
  lastWriteMs: number;
  /** Epoch ms it opened (polls: answered with a heartbeat after heartbeatMs). */
  readonly openedMs: number;
}

export class SessionSocket implements ClientSocket {
  private readonly userData: SocketUserData;
  /** Topics it is on (channels and watchlist users). */
  readonly topics = new Set<string>();
  /** Frames waiting for a receiver, each JSON-encoded (a JSON string literal). */
  private queue: string[] = [];
  private queuedBytes = 0;
  receiver: Receiver | null = null;
  /** Epoch ms since which it has had no receiver (idle expiry), or 0 while it has one. */
  idleSinceMs: number;
  /** Set by end()/close(): the `c` line still to deliver (null once delivered). */
  closeLine: string | null = null;
  ended = false;
  /** The close line went to a receiver: the session can go. */
  finished = false;
  /** Cluster: when this node last recorded itself as the session's holder (0: never). */
  claimedAtMs = 0;

  constructor(
    private readonly host: SessionHost,
    /** The session's key in its table: `<app key>/<server>/<session>`. */
    readonly id: string,
    /** The client address it is bound to (the address that opened it). */
    clientAddress: string,
    now: number,
  ) {
    this.userData = { state: null, reject: null, slowUntil: 0, clientAddress };
    this.idleSinceMs = now;
  }

  getUserData(): SocketUserData {
    return this.userData;
  }

  /** uWS' send: 1 queued; 2 dropped (ended, or past the hard cap as uWS drops past maxBackpressure). */
  send(message: string | ArrayBuffer | Uint8Array): number {
    if (this.ended) return 2;
    const text = typeof message === 'string' ? message : Buffer.from(message as Uint8Array).toString('utf8');
    return this.push(JSON.stringify(text));
  }

  /** Queues a frame already JSON-encoded (topic delivery encodes a frame once for every session). */
  push(encoded: string): number {
    if (this.ended) return 2;
    // A slow consumer being let go is off every topic: what it is still sent (its pusher:error) must get through.
    if (this.queuedBytes > this.host.hardCapBytes && !this.userData.slowUntil) return 2;
    this.queue.push(encoded);
    this.queuedBytes += encoded.length + 1;
    this.host.schedule(this);
    return 1;
  }

  cork(cb: () => void): this {
    cb();
    return this;
  }

  /** uWS' end: the close is queued after what was sent; the close handler runs now. */
  end(code = 1000, reason = ''): void {
    if (this.ended) return;
    this.ended = true;
    this.closeLine = `c${JSON.stringify([code, reason])}`;
    this.host.ended(this, code);
    this.host.schedule(this);
  }

  /** An xhr_send over the body cap (read here or on another node): the client is told `message` (pusher:error), then the session ends with 1009. */
  endTooLarge(message: string): void {
    this.cork(() => {
      this.send(errorFrame(null, message));
      this.end(CLOSE_CODES.MESSAGE_TOO_BIG, 'Message too big');
    });
  }

  /** uWS' close: ends at once, nothing more is delivered but the close (1006, as a dropped connection). */
  close(): void {
    if (this.ended) return;
    this.queue = [];
    this.queuedBytes = 0;
    this.end(1006, 'Connection closed');
  }

  subscribe(topic: string): boolean {
    if (this.ended) return false;
    return this.host.subscribe(this, topic);
  }

  unsubscribe(topic: string): boolean {
    return this.host.unsubscribe(this, topic);
  }

  publish(topic: RecognizedString, message: RecognizedString): boolean {
    return this.host.publish(this, topic, message);
  }

  isSubscribed(topic: string): boolean {
    return this.topics.has(topic);
  }

  getTopics(): string[] {
    return [...this.topics];
  }

  /** Bytes queued for the client (the sweep's backpressure check: past the limit, 4100). */
  getBufferedAmount(): number {
    return this.queuedBytes;
  }

  /** Something to write: frames, or the close line. */
  get pending(): boolean {
    return this.queue.length > 0 || this.closeLine !== null;
  }

  /**
   * Takes what is queued as the lines to write (frames, then the close line once the frames are
   * out), or '' when there is nothing. A slow consumer being let go hears of its drain.
   */
  take(): string {
    let out = '';
    if (this.queue.length > 0) {
      out = `a[${this.queue.join(',')}]\n`;
      this.queue = [];
      this.queuedBytes = 0;
      if (this.userData.slowUntil) this.host.drained(this);
    }
    // drained() may have queued a pusher:error and the close.
    if (this.queue.length > 0) {
      out += `a[${this.queue.join(',')}]\n`;
      this.queue = [];
      this.queuedBytes = 0;
    }
    if (this.closeLine !== null) {
      out += `${this.closeLine}\n`;
      this.closeLine = null;
      this.finished = true;
    }
    return out;
  }
}
