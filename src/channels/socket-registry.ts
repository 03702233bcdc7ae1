/**
 * Main-thread per-connection state and the registry of live connections: by socket id and,
 * for signed-in users, by user id, per app. Used for socket_id exclusion, C5
 * terminate_connections, connection quotas, watchlists and the sweep. A connection's socket is
 * a ClientSocket: a uWS WebSocket, or an HTTP fallback session standing in for one.
 */
import type { RecognizedString } from 'uWebSockets.js';
import type { AppConfig } from '../config/schema.js';
import { CLOSE_CODES } from '../errors.js';
import { errorFrame } from './frames.js';
import type { SmallMap } from './small-map.js';

/**
 * Closes a connection the way the protocol asks: a `pusher:error` saying why, then the close
 * frame, in one cork. `errorCode` is the pusher:error `code` (the close code unless told
 * otherwise; null for errors that are not close codes, such as a 1009 close). `reason` is the
 * close frame's short text (at most 123 bytes; defaults to the message).
 */
export function endWithError(ws: ClientSocket, closeCode: number, message: string, errorCode: number | null = closeCode, reason = message): void {
  ws.cork(() => {
    ws.send(errorFrame(errorCode, message));
    ws.end(closeCode, closeReason(reason));
  });
}

/** `reason` cut to the 123 bytes of UTF-8 a close frame holds (never inside a character). */
function closeReason(reason: string): string {
  if (reason.length <= 30 || Buffer.byteLength(reason) <= 123) return reason;
  let cut = reason.slice(0, 123);
  while (Buffer.byteLength(cut) > 123) cut = cut.slice(0, -1);
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return cut;
}

const WANTED = 1;
const JOINED = 2;
const BUSY = 4;
const DELIVERED = 8;

/**
 * What the main thread believes about one channel of one connection (see subscriptions.ts).
 * One per (connection, channel): the four states are bits of one small integer (48 B per
 * membership instead of 72 B with four boolean fields).
 */
export class Membership {
  private flags = WANTED;
  /** Presence channels: the member of the latest subscribe (used by the next join). */
  request: { userId: string; userInfo: unknown } | undefined = undefined;
  /** Presence channels: the member recorded in the channel state for this connection. */
  joinedAs: { userId: string; userInfo: unknown } | undefined = undefined;

  /** The client wants to be subscribed (false after unsubscribe or close). */
  get wanted(): boolean {
    return (this.flags & WANTED) !== 0;
  }
  set wanted(on: boolean) {
    this.flags = on ? this.flags | WANTED : this.flags & ~WANTED;
  }

  /** The channel state has this subscription (as of the last answered adapter call). */
  get joined(): boolean {
    return (this.flags & JOINED) !== 0;
  }
  set joined(on: boolean) {
    this.flags = on ? this.flags | JOINED : this.flags & ~JOINED;
  }

  /** An adapter call (join or leave) for this channel is in flight. */
  get busy(): boolean {
    return (this.flags & BUSY) !== 0;
  }
  set busy(on: boolean) {
    this.flags = on ? this.flags | BUSY : this.flags & ~BUSY;
  }

  /** The client has been told subscription_succeeded and the socket is on the topic. */
  get delivered(): boolean {
    return (this.flags & DELIVERED) !== 0;
  }
  set delivered(on: boolean) {
    this.flags = on ? this.flags | DELIVERED : this.flags & ~DELIVERED;
  }
}

/**
 * A client connection as the channel code sees it: uWS' WebSocket has these methods as they are,
 * and an HTTP fallback session (http-fallback/session.ts) implements them over its queue, so the
 * endpoint, the protocol handler, the sweep, the registry and the adapter serve both alike.
 */
export interface ClientSocket {
  getUserData(): SocketUserData;
  /** Sends (or queues) a frame: 1 sent, 0 queued under backpressure, 2 dropped (uWS' codes). */
  send(message: string): number;
  /** Runs `cb`; what it sends goes out in one write. */
  cork(cb: () => void): unknown;
  /** Closes with the close code and reason, after what was sent; the close handler runs. */
  end(code?: number, reason?: string): void;
  subscribe(topic: string): boolean;
  unsubscribe(topic: string): boolean;
  isSubscribed(topic: string): boolean;
  getTopics(): string[];
  /** Sends to every subscriber of the topic but this socket (a client event). */
  publish(topic: RecognizedString, message: RecognizedString): boolean;
  /** Bytes sent to it and not yet written out (the sweep's backpressure check). */
  getBufferedAmount(): number;
}

export interface SocketState {
  readonly socketId: string;
  /** The app's config; replaced by a reload (SIGHUP) so new secrets and limits apply at once. */
  app: AppConfig;
  /** Set in open; never touched after `closed`. */
  ws: ClientSocket | null;
  closed: boolean;
  /** Channel name → membership, for channels joined, joining or leaving. */
  readonly channels: SmallMap<Membership>;
  /** Signed-in user (pusher:signin), if any. */
  userId: string | null;
  /** Epoch ms the connection opened (the sign-in deadline of requireUserAuthentication counts from it). */
  readonly openedMs: number;
  /** Epoch ms of the last frame received. */
  lastSeenMs: number;
  /** Epoch ms the server's pusher:ping went out, 0 when none is outstanding. */
  pingSentMs: number;
  /** Client-event rate window: start (epoch ms) and events in it. */
  clientEventWindowMs: number;
  clientEventCount: number;
}

/** What uWS carries for each socket: the state, or why the connection is refused. */
export interface SocketUserData {
  state: SocketState | null;
  reject: { code: number; message: string } | null;
  /**
   * The client's address (net/client-address.ts: the forwarded one behind a trusted proxy), for
   * per-address rules: a WebSocket's at its upgrade, an HTTP fallback session's the one it is bound to.
   */
  clientAddress: string;
  /**
   * A slow consumer being let go (ws/slow-consumers.ts): epoch ms by which it is closed whether or not
   * it read its backlog; 0 otherwise.
   */
  slowUntil?: number;
  /**
   * A connection waiting for the adapter to admit it (cluster connection quota, ws/admission.ts):
   * not registered yet, receives nothing; `closed` is set if it closes meanwhile.
   */
  admitting?: SocketState | null;
  /**
   * The app id this connection is counted against in the process' connection counts
   * (ws/admission.ts, several front-end threads), until it closes; undefined when not counted.
   */
  countedApp?: string | undefined;
}

interface AppSockets {
  readonly sockets: Map<string, SocketState>;
  /** Signed-in user id → that user's live connections. */
  readonly users: Map<string, Set<SocketState>>;
}

/**
 * One entry per connection (in its app's `sockets` map), and nothing else per connection: every
 * other view (all connections, socket-id uniqueness, the total count) is derived from the few
 * apps, so a connection costs one map entry here rather than three (~70 B less each).
 */
export class SocketRegistry {
  private readonly apps = new Map<string, AppSockets>();
  /** Live connections of every app (kept on add and remove: the overview reads it every few seconds). */
  private total = 0;

  /** Every live connection, for the sweep and closeAll (copy it before closing sockets while iterating). */
  *all(): Generator<SocketState, void, undefined> {
    for (const app of this.apps.values()) yield* app.sockets.values();
  }

  /** The live connections of one app (copy before closing them while iterating). */
  socketsOf(appId: string): Iterable<SocketState> {
    return this.apps.get(appId)?.sockets.values() ?? [];
  }

  private forApp(appId: string): AppSockets {
    let entry = this.apps.get(appId);
    if (!entry) {
      entry = { sockets: new Map(), users: new Map() };
      this.apps.set(appId, entry);
    }
    return entry;
  }

  connectionCount(appId?: string): number {
    if (appId !== undefined) return this.apps.get(appId)?.sockets.size ?? 0;
    return this.total;
  }

  /** Open connections per app id (for the metrics gauge). */
  connectionCounts(): Map<string, number> {
    const out = new Map<string, number>();
    for (const [appId, entry] of this.apps) out.set(appId, entry.sockets.size);
    return out;
  }

  /** True when any app has a live connection with this id (ids are unique per process). */
  hasSocketId(socketId: string): boolean {
    for (const app of this.apps.values()) if (app.sockets.has(socketId)) return true;
    return false;
  }

  add(state: SocketState): void {
    const sockets = this.forApp(state.app.id).sockets;
    const before = sockets.size;
    sockets.set(state.socketId, state);
    this.total += sockets.size - before;
  }

  /** Removes the connection; returns true when it was its user's last one (user went offline). */
  remove(state: SocketState): boolean {
    const app = this.apps.get(state.app.id);
    if (!app) return false;
    if (app.sockets.delete(state.socketId)) this.total--;
    let lastOfUser = false;
    if (state.userId !== null) lastOfUser = this.removeUserSocket(app, state.userId, state);
    if (app.sockets.size === 0 && app.users.size === 0) this.apps.delete(state.app.id);
    return lastOfUser;
  }

  get(appId: string, socketId: string): SocketState | undefined {
    return this.apps.get(appId)?.sockets.get(socketId);
  }

  /** Records a sign-in; returns true when it is the user's first connection (user came online). */
  addUser(state: SocketState, userId: string): boolean {
    const app = this.forApp(state.app.id);
    let set = app.users.get(userId);
    const first = !set;
    if (!set) {
      set = new Set();
      app.users.set(userId, set);
    }
    set.add(state);
    state.userId = userId;
    return first;
  }

  isOnline(appId: string, userId: string): boolean {
    return this.apps.get(appId)?.users.has(userId) ?? false;
  }

  /**
   * Closes every open connection of a signed-in user of the app (C5 terminate_connections, on
   * this process) with 4009 and its pusher:error; answers how many were closed.
   */
  terminateUser(appId: string, userId: string): number {
    let closed = 0;
    for (const state of this.userSockets(appId, userId)) {
      if (state.closed || !state.ws) continue;
      endWithError(state.ws, CLOSE_CODES.UNAUTHORIZED, 'Connection terminated by the server');
      closed++;
    }
    return closed;
  }

  userSockets(appId: string, userId: string): SocketState[] {
    const set = this.apps.get(appId)?.users.get(userId);
    return set ? [...set] : [];
  }

  private removeUserSocket(app: AppSockets, userId: string, state: SocketState): boolean {
    const set = app.users.get(userId);
    if (!set) return false;
    set.delete(state);
    if (set.size > 0) return false;
    app.users.delete(userId);
    return true;
  }
}
