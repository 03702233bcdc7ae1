/**
 * A front end's side of its ports to the shards (ShardPool.attachFrontEnd makes them, one per
 * shard): requests go straight to the shard workers, not through the main thread, with the
 * pool's rules for callers. Each request carries an id and a deadline; a timeout, a full
 * queue, a closed port or a worker that died answers SHARD_UNAVAILABLE instead of hanging.
 * At most `maxQueuePerShard` requests per shard are unanswered at once (one timed out still
 * counts until its answer comes: the worker still has it); more are refused at once.
 *
 * A shard whose worker died: its port closes, and the requests it held fail at once; until
 * the new port comes (`replacePort`, forwarded from the pool's onFrontEndPort), requests to it
 * wait, each within its own timeout, as the pool's own requests wait for a new worker.
 * `replacePort` runs the onShardRestart listeners before anything else can be sent on the new
 * port, so what they send (the restore) is the first the new worker gets from this front end,
 * then sends `core.restored`, which the worker waits for from every front end before it runs
 * their other requests, then the requests that waited, in the order they were made. A port
 * the pool detached (`core.detached` comes before its close) gets no replacement: requests to
 * it are refused at once.
 */
import type { ShardNotice } from './front-end-notices.js';
import type { MessagePort } from 'node:worker_threads';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import { ShardCodec } from './codec.js';
import type { ShardEnvelope, ShardPortReply, ShardRequestOf, ShardRequestType, ShardResponseOf } from './messages.js';
import { DEFAULT_MAX_QUEUE_PER_SHARD, QueueFullRefusal, replyValue, timedOut, workerStopped } from './replies.js';
import type { ShardRequester, ShardRestartListener } from './requester.js';

const codec = new ShardCodec();

export interface PortShardRequesterOptions {
  /** Default time a request waits for its answer, ms. */
  requestTimeoutMs: number;
  /** Requests unanswered per shard at once (default DEFAULT_MAX_QUEUE_PER_SHARD); more fail at once. */
  maxQueuePerShard?: number;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (err: HeraldError) => void;
  timer: NodeJS.Timeout;
  /** The caller was answered (timed out); the entry stays counted until the worker answers. */
  settled: boolean;
}

/** One shard's line: its port, and the requests sent on it and not answered yet, by id. */
interface ShardLine {
  port: MessagePort;
  /** False once the port closed (its worker died): requests wait for replacePort. */
  open: boolean;
  /** The pool detached this front end: no port will replace this one. */
  detached: boolean;
  pending: Map<number, Pending>;
}

/** A request made while its shard's line was closed, sent once the new port comes. */
interface Waiting {
  message: { type: string };
  /** When its timeout ends (ms). */
  deadline: number;
  resolve: (value: unknown) => void;
  reject: (err: HeraldError) => void;
  timer: NodeJS.Timeout;
}

/** Requests to the shards over a front end's own ports; see the file header. */
export class PortShardRequester<Api> implements ShardRequester<Api> {
  readonly shardCount: number;
  private readonly lines: ShardLine[];
  private readonly timeoutMs: number;
  private readonly maxQueue: number;
  private readonly queueFull: QueueFullRefusal;
  private readonly restartListeners: ShardRestartListener[] = [];
  private readonly noticeListeners: ((notice: ShardNotice) => void)[] = [];
  /** Per shard: requests waiting for its new port, in the order made. */
  private readonly waiting: Waiting[][];
  private nextId = 1;
  private closed = false;

  /** `ports[shard]`: this front end's port to that shard. */
  constructor(ports: MessagePort[], opts: PortShardRequesterOptions) {
    this.shardCount = ports.length;
    this.timeoutMs = opts.requestTimeoutMs;
    this.maxQueue = opts.maxQueuePerShard ?? DEFAULT_MAX_QUEUE_PER_SHARD;
    this.queueFull = new QueueFullRefusal(ports.length);
    this.lines = ports.map((port, shard) => this.open(shard, port));
    this.waiting = ports.map(() => []);
  }

  /** False once close() was called: requests are refused from then on. */
  get accepting(): boolean {
    return !this.closed;
  }

  /** Requests sent to the shard and not answered yet (timed out ones included). */
  inFlightCount(shard: number): number {
    return (this.lines[shard]?.pending.size ?? 0) + (this.waiting[shard]?.length ?? 0);
  }

  /** Registers a listener of the shards' notices (front-end-notices.ts), in the order each shard posts them. */
  onNotice(listener: (notice: ShardNotice) => void): void {
    this.noticeListeners.push(listener);
  }

  /**
   * Registers a listener told when a shard's worker was replaced (replacePort): it runs before
   * any other request goes out on the new port, so requests it sends are the first there.
   */
  onShardRestart(listener: ShardRestartListener): void {
    this.restartListeners.push(listener);
  }

  /** Sends one request to a shard and resolves with its answer. Throws HeraldError. */
  request<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>, timeoutMs = this.timeoutMs): Promise<ShardResponseOf<Api, K>> {
    return this.post(shard, message, timeoutMs) as Promise<ShardResponseOf<Api, K>>;
  }

  /** Fire-and-forget: failures are logged, never thrown. */
  send<K extends ShardRequestType<Api>>(shard: number, message: ShardRequestOf<Api, K>): void {
    this.request(shard, message).catch(() => undefined);
  }

  /** The same request to every shard, in parallel; answers in shard order. */
  broadcast<K extends ShardRequestType<Api>>(message: ShardRequestOf<Api, K>, timeoutMs?: number): Promise<ShardResponseOf<Api, K>[]> {
    return Promise.all(this.lines.map((_, shard) => this.request(shard, message, timeoutMs)));
  }

  /**
   * The shard's worker was replaced and `port` is this front end's line to the new one. The
   * requests pending on the old port fail (SHARD_UNAVAILABLE), the onShardRestart listeners
   * run (their requests are the first on the new port), then `core.restored` goes out.
   */
  replacePort(shard: number, port: MessagePort): void {
    const old = this.lines[shard];
    if (!old) throw new Error(`no shard ${shard}`);
    if (this.closed) {
      port.close();
      return;
    }
    this.shut(shard, old, workerStopped(shard));
    this.lines[shard] = this.open(shard, port);
    for (const listener of this.restartListeners) {
      try {
        listener(shard);
      } catch (err) {
        log.error('shard restart listener failed', { shard, error: describeError(err) });
      }
    }
    this.post(shard, { type: 'core.restored' }, this.timeoutMs).catch(() => undefined);
    const waited = this.waiting[shard]!.splice(0);
    for (const w of waited) {
      clearTimeout(w.timer);
      this.post(shard, w.message, Math.max(1, w.deadline - Date.now())).then(w.resolve, w.reject);
    }
  }

  /** Refuses requests from now on, fails those pending (SHARD_UNAVAILABLE) and closes the ports. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    const stopping = new HeraldError('SHARD_UNAVAILABLE', 'Server is shutting down');
    this.lines.forEach((line, shard) => this.shut(shard, line, stopping));
    for (const waited of this.waiting) {
      for (const w of waited.splice(0)) {
        clearTimeout(w.timer);
        w.reject(stopping);
      }
    }
  }

  private open(shard: number, port: MessagePort): ShardLine {
    const line: ShardLine = { port, open: true, detached: false, pending: new Map() };
    port.on('message', (bytes: Uint8Array) => this.answered(shard, line, bytes));
    // The worker holding the other end died (or the pool detached this front end).
    port.on('close', () => {
      if (!line.open) return;
      if (!this.closed) log.warn('shard port closed; requests to the shard fail until its new worker is attached', { shard, inFlight: line.pending.size });
      this.shut(shard, line, workerStopped(shard));
    });
    return line;
  }

  /** Closes a line's port and fails every request pending on it with `error`. */
  private shut(shard: number, line: ShardLine, error: HeraldError): void {
    line.open = false;
    line.port.close();
    const pending = [...line.pending.values()];
    line.pending.clear();
    for (const entry of pending) this.settle(shard, entry, error);
  }

  private post(shard: number, message: { type: string }, timeoutMs: number): Promise<unknown> {
    const line = this.lines[shard];
    if (!line) return Promise.reject(new Error(`no shard ${shard}`));
    if (this.closed) return this.refuse(shard, message, new HeraldError('SHARD_UNAVAILABLE', 'Server is shutting down'));
    const unanswered = line.pending.size + this.waiting[shard]!.length;
    if (unanswered >= this.maxQueue) return Promise.reject(this.queueFull.error(shard, unanswered));
    if (!line.open) {
      if (line.detached) return this.refuse(shard, message, new HeraldError('SHARD_UNAVAILABLE', `Shard ${shard} is not attached to this front end`));
      return this.waitForPort(shard, message, timeoutMs);
    }
    const id = this.nextId++;
    const envelope: ShardEnvelope = { id, deadline: Date.now() + timeoutMs, request: message };
    const encoded = codec.encode(envelope);
    return new Promise((resolve, reject) => {
      const entry: Pending = {
        resolve,
        reject,
        settled: false,
        timer: setTimeout(() => {
          // Still counted in flight: the worker has it and will answer it (unless it dies).
          this.settle(shard, entry, timedOut(shard, timeoutMs), message.type);
        }, timeoutMs),
      };
      line.pending.set(id, entry);
      // Posted now, synchronously: what is sent first reaches the worker first.
      line.port.postMessage(encoded, [encoded.buffer]);
    });
  }

  /** Keeps a request until the shard's new port comes (replacePort), or fails it at its timeout. */
  private waitForPort(shard: number, message: { type: string }, timeoutMs: number): Promise<unknown> {
    const waited = this.waiting[shard]!;
    return new Promise((resolve, reject) => {
      const w: Waiting = {
        message,
        deadline: Date.now() + timeoutMs,
        resolve,
        reject,
        timer: setTimeout(() => {
          const at = waited.indexOf(w);
          if (at >= 0) waited.splice(at, 1);
          log.warn('shard request failed', { shard, type: message.type, error: `no new worker within ${timeoutMs} ms` });
          reject(timedOut(shard, timeoutMs));
        }, timeoutMs),
      };
      waited.push(w);
    });
  }

  private refuse(shard: number, message: { type: string }, error: HeraldError): Promise<never> {
    log.warn('shard request failed', { shard, type: message.type, error: error.message });
    return Promise.reject(error);
  }

  private answered(shard: number, line: ShardLine, bytes: Uint8Array): void {
    let reply: ShardPortReply;
    try {
      reply = codec.decode(bytes) as ShardPortReply;
    } catch (err) {
      log.error('shard port reply undecodable', { shard, error: String(err) });
      return;
    }
    if ('notice' in reply) {
      const notice = (reply as { notice: ShardNotice }).notice;
      if (notice.type === 'core.detached') {
        line.detached = true;
        return;
      }
      for (const listener of this.noticeListeners) listener(notice);
      return;
    }
    const entry = line.pending.get(reply.id);
    if (!entry) return; // failed with its port already (replacePort, close)
    line.pending.delete(reply.id);
    if (entry.settled) return;
    entry.settled = true;
    clearTimeout(entry.timer);
    try {
      entry.resolve(replyValue(reply));
    } catch (err) {
      entry.reject(err as HeraldError);
    }
  }

  /** Fails a request's caller once; `type` given: logged as the pool logs a request that failed. */
  private settle(shard: number, entry: Pending, error: HeraldError, type?: string): void {
    clearTimeout(entry.timer);
    if (entry.settled) return;
    entry.settled = true;
    if (type !== undefined) log.warn('shard request failed', { shard, type, error: error.message });
    entry.reject(error);
  }
}
