/**
 * The admin live stream (`GET /admin/v1/stream`, stream.ts) on front-end threads: the
 * thread that took the request opens the stream on main over a MessagePort, main runs the
 * stream as it runs its own (checks, `stats` every second, the watched app's debug events)
 * and pushes each chunk to the thread, which writes it to its response.
 *
 * - Either side ends it: the client going away (thread → `stream.closed`), or shutdown on main
 *   (`stream.end`).
 * - Backpressure stays with the socket: the thread tells main when its response falls behind
 *   and catches up (`stream.behind`), and main drops optional events meanwhile, as it does for
 *   its own streams.
 * - When main does not answer the opening in time, the thread answers 503 MAIN_THREAD_TIMEOUT.
 */
import type { MessagePort } from 'node:worker_threads';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { readStreamRequest, UwsStreamSink, type StreamRequest, type StreamSink } from './stream.js';
import { HeraldError } from '../errors.js';
import { describeError, log } from '../log.js';
import { errorReply, type Reply } from '../http/uws-http.js';
import { RELAY_TIMEOUT_MS } from '../front-end/route-relay.js';

export const ADMIN_STREAM_PATH = '/admin/v1/stream';

/** A refusal as it crosses the port: status, headers, a string body. */
export interface RelayedRefusal {
  readonly status: number;
  readonly headers?: Record<string, string>;
  readonly body: string;
}

/** Thread → main. */
export type StreamUpMessage =
  | { readonly type: 'stream.open'; readonly id: number; readonly request: StreamRequest }
  | { readonly type: 'stream.behind'; readonly id: number; readonly behind: boolean }
  | { readonly type: 'stream.closed'; readonly id: number };

/** Main → thread. */
export type StreamDownMessage =
  | { readonly type: 'stream.refuse'; readonly id: number; readonly reply: RelayedRefusal }
  | { readonly type: 'stream.begin'; readonly id: number }
  | { readonly type: 'stream.write'; readonly id: number; readonly chunk: string }
  | { readonly type: 'stream.end'; readonly id: number };

export type StreamRelayMessage = StreamUpMessage | StreamDownMessage;

/** The thread's side of the relayed streams over one port. */
export interface RelayedStreams {
  /** Serves `GET /admin/v1/stream` on `app` (the thread's app, and each app a TLS reload makes). */
  register(app: TemplatedApp): void;
  /** Ends every open stream (the thread's shutdown). */
  endAll(): void;
}

/** Thread side: the admin live stream, each one opened on main over `port`. */
export function relayedStreams(port: MessagePort, opts: { timeoutMs?: number } = {}): RelayedStreams {
  const timeoutMs = opts.timeoutMs ?? RELAY_TIMEOUT_MS;
  const streams = new Map<number, { sink: UwsStreamSink; timer: NodeJS.Timeout | undefined }>();
  let nextId = 0;
  const post = (message: StreamUpMessage): void => port.postMessage(message);
  const forget = (id: number): void => {
    const stream = streams.get(id);
    if (stream === undefined) return;
    clearTimeout(stream.timer);
    streams.delete(id);
  };
  port.on('message', (message: StreamRelayMessage) => {
    if (!isDownMessage(message)) return;
    const stream = streams.get(message.id);
    if (stream === undefined) return;
    clearTimeout(stream.timer);
    stream.timer = undefined;
    switch (message.type) {
      case 'stream.refuse':
        forget(message.id);
        stream.sink.refuse(message.reply);
        break;
      case 'stream.begin':
        stream.sink.begin();
        break;
      case 'stream.write':
        stream.sink.write(message.chunk);
        break;
      case 'stream.end':
        forget(message.id);
        stream.sink.end();
        break;
    }
  });
  const endAll = (): void => {
    for (const [id, stream] of [...streams]) {
      forget(id);
      stream.sink.end();
    }
  };
  port.on('close', endAll);
  const register = (app: TemplatedApp): void => {
    app.get(ADMIN_STREAM_PATH, (res: HttpResponse, req: HttpRequest) => {
      try {
        const request = readStreamRequest(res, req);
        const id = nextId++;
        const sink = new UwsStreamSink(res, (behind) => post({ type: 'stream.behind', id, behind }));
        const timer = setTimeout(() => {
          forget(id);
          sink.refuse(errorReply(new HeraldError('MAIN_THREAD_TIMEOUT'), 'channel', ADMIN_STREAM_PATH));
        }, timeoutMs);
        streams.set(id, { sink, timer });
        sink.onClosed(() => {
          if (!streams.has(id)) return;
          forget(id);
          post({ type: 'stream.closed', id });
        });
        post({ type: 'stream.open', id, request });
      } catch (err) {
        log.error('relayed admin stream failed', { error: describeError(err) });
        try {
          res.cork(() => res.writeStatus('500 Internal Server Error').end('', true));
        } catch {
          // Already answered or aborted.
        }
      }
    });
  };
  return { register, endAll };
}

/**
 * Main side: opens the streams `port` asks for with `open` (AdminEndpoints.openStream) and
 * forwards what they write. Returns the function that stops listening.
 */
export function serveRelayedStreams(port: MessagePort, open: (request: StreamRequest, sink: StreamSink) => void): () => void {
  const sinks = new Map<number, PortStreamSink>();
  const onMessage = (message: StreamRelayMessage | null): void => {
    switch (message?.type) {
      case 'stream.open': {
        const sink = new PortStreamSink(port, message.id, () => sinks.delete(message.id));
        sinks.set(message.id, sink);
        try {
          open(message.request, sink);
        } catch (err) {
          log.error('admin stream failed', { error: describeError(err) });
          sink.refuse(errorReply(err, 'channel', ADMIN_STREAM_PATH));
        }
        break;
      }
      case 'stream.behind': {
        const sink = sinks.get(message.id);
        if (sink) sink.behind = message.behind;
        break;
      }
      case 'stream.closed':
        sinks.get(message.id)?.clientGone();
        break;
      default:
        break;
    }
  };
  port.on('message', onMessage);
  const onClose = (): void => {
    for (const sink of [...sinks.values()]) sink.clientGone();
  };
  port.on('close', onClose);
  return () => {
    port.off('message', onMessage);
    port.off('close', onClose);
  };
}

const DOWN_TYPES: ReadonlySet<string> = new Set<StreamDownMessage['type']>(['stream.refuse', 'stream.begin', 'stream.write', 'stream.end']);

/** The port carries other relays' messages too (front-end/route-relay.ts): only these are the streams'. */
function isDownMessage(message: unknown): message is StreamDownMessage {
  return typeof message === 'object' && message !== null && DOWN_TYPES.has((message as { type?: string }).type ?? '');
}

/** A stream whose response is on a front-end thread: each call becomes one message. */
class PortStreamSink implements StreamSink {
  behind = false;
  private done = false;
  private readonly closedListeners: (() => void)[] = [];

  constructor(
    private readonly port: MessagePort,
    private readonly id: number,
    private readonly forget: () => void,
  ) {}

  onClosed(listener: () => void): void {
    this.closedListeners.push(listener);
  }

  refuse(reply: Reply): void {
    if (this.finish()) return;
    const body = typeof reply.body === 'string' ? reply.body : Buffer.isBuffer(reply.body) ? reply.body.toString() : JSON.stringify(reply.body ?? '');
    this.post({ type: 'stream.refuse', id: this.id, reply: { status: reply.status, body, ...(reply.headers !== undefined && { headers: reply.headers }) } });
  }

  begin(): void {
    if (!this.done) this.post({ type: 'stream.begin', id: this.id });
  }

  write(chunk: string): void {
    if (!this.done) this.post({ type: 'stream.write', id: this.id, chunk });
  }

  end(): void {
    if (this.finish()) return;
    this.post({ type: 'stream.end', id: this.id });
  }

  /** The thread's client went away (or the thread did). */
  clientGone(): void {
    if (this.finish()) return;
    for (const listener of this.closedListeners.splice(0)) listener();
  }

  /** Marks the stream done; true when it already was. */
  private finish(): boolean {
    if (this.done) return true;
    this.done = true;
    this.forget();
    return false;
  }

  private post(message: StreamDownMessage): void {
    this.port.postMessage(message);
  }
}
