/**
 * The seam of a recovering join in a cluster: between the kept events it reads and the live
 * events the socket gets once attached, nothing lost and nothing twice, while any node publishes.
 *
 * The node already listens to the channel's topic when it reads. The read publishes a mark
 * (this seam's token) to the node's own control topic in the same Redis step, and Redis writes
 * every pub/sub message to the node's subscriber connection in the order it ran them: the
 * frames the node receives before the mark are of events the read saw (or older), those after
 * it of events the read did not see. From the mark until the socket is attached, the seam
 * keeps the channel's history frames the node receives (the socket, not attached yet, misses
 * their live delivery); the join answers the read's events followed by them, in one list the
 * seam goes on filling until attach() closes it, in the turn the list is sent.
 */
import type { KeptEvent } from '../../messages.js';

/**
 * How long a seam stays open after its mark at most (ms): its join answers in the same turn,
 * so this only ends one whose socket was never attached nor left (nothing else would).
 */
const SEAM_OPEN_AFTER_MARK_MS = 10_000;

interface Seam {
  key: string;
  socketId: string;
  /** The socket ids the client had before (previous_socket_ids): frames left out for them are not kept either. */
  previousSocketIds: readonly string[];
  /** Whether the mark arrived: frames from then on are after the read. */
  marked: boolean;
  /** The events after the mark, then (adopt) the read's events before them. */
  events: KeptEvent[];
  onMark: () => void;
  /** Closes it SEAM_OPEN_AFTER_MARK_MS after the mark. */
  timer?: NodeJS.Timeout;
}

export interface OpenSeam {
  token: string;
  /** Resolves when the mark arrived. */
  marked: Promise<void>;
  /** The answer's events: the read's, then those that arrived after the mark (filled on until closed). */
  adopt(read: KeptEvent[]): KeptEvent[];
  close(): void;
}

export class RecoverySeams {
  private readonly byToken = new Map<string, Seam>();
  /** `appId\0channel` → its open seams. */
  private readonly byChannel = new Map<string, Set<Seam>>();
  /** `appId\0channel\0socketId` → its seam's token (closed by attach or a leave). */
  private readonly bySocket = new Map<string, string>();
  private counter = 0;

  /** `prefix`: starts every token (a front-end thread's names its marks for the main thread to carry). */
  constructor(private readonly prefix = '') {}

  /** `previousSocketIds`: the recovering client's previous socket ids (frames left out for one of them are not kept). */
  open(appId: string, channel: string, socketId: string, previousSocketIds: readonly string[] = []): OpenSeam {
    const token = `${this.prefix}${++this.counter}`;
    const key = `${appId}\u0000${channel}`;
    let onMark!: () => void;
    const marked = new Promise<void>((resolve) => (onMark = resolve));
    const seam: Seam = { key, socketId, previousSocketIds, marked: false, events: [], onMark };
    this.byToken.set(token, seam);
    let set = this.byChannel.get(key);
    if (!set) this.byChannel.set(key, (set = new Set()));
    set.add(seam);
    const socketKey = `${key}\u0000${socketId}`;
    const previous = this.bySocket.get(socketKey);
    if (previous !== undefined) this.closeToken(previous);
    this.bySocket.set(socketKey, token);
    return {
      token,
      marked,
      adopt: (read) => {
        seam.events.unshift(...read);
        return seam.events;
      },
      close: () => this.closeToken(token),
    };
  }

  /** A mark arrived on this node's control topic. */
  mark(token: string): void {
    const seam = this.byToken.get(token);
    if (!seam || seam.marked) return;
    seam.marked = true;
    seam.timer = setTimeout(() => this.closeToken(token), SEAM_OPEN_AFTER_MARK_MS);
    seam.timer.unref();
    seam.onMark();
  }

  /** A frame the node received for a channel (delivered to its topic as well). */
  frame(appId: string, channel: string, frame: string, exceptSocketId: string | undefined): void {
    const set = this.byChannel.get(`${appId}\u0000${channel}`);
    if (!set) return;
    let event: KeptEvent | null | undefined;
    for (const seam of set) {
      if (!seam.marked || seam.socketId === exceptSocketId || (exceptSocketId !== undefined && seam.previousSocketIds.includes(exceptSocketId))) continue;
      event ??= keptEventOf(frame);
      if (event) seam.events.push(event);
    }
  }

  /** The socket was attached to the channel (its answer went out) or left it: its seam closes. */
  closeFor(appId: string, channel: string, socketId: string): void {
    const token = this.bySocket.get(`${appId}\u0000${channel}\u0000${socketId}`);
    if (token !== undefined) this.closeToken(token);
  }

  private closeToken(token: string): void {
    const seam = this.byToken.get(token);
    if (!seam) return;
    this.byToken.delete(token);
    clearTimeout(seam.timer);
    const socketKey = `${seam.key}\u0000${seam.socketId}`;
    if (this.bySocket.get(socketKey) === token) this.bySocket.delete(socketKey);
    const set = this.byChannel.get(seam.key);
    set?.delete(seam);
    if (set?.size === 0) this.byChannel.delete(seam.key);
    seam.onMark();
  }
}

/** The kept event a history frame carries; null for another frame (member_added, ...). */
function keptEventOf(frame: string): KeptEvent | null {
  if (!frame.includes('"serial":"')) return null;
  try {
    const f = JSON.parse(frame) as { event?: unknown; data?: unknown; serial?: unknown; user_id?: unknown };
    if (typeof f.serial !== 'string' || typeof f.event !== 'string' || typeof f.data !== 'string') return null;
    const e: KeptEvent = { serial: f.serial, event: f.event, data: f.data, publishedAt: Date.now() };
    if (typeof f.user_id === 'string') e.userId = f.user_id;
    return e;
  } catch {
    return null;
  }
}
