/**
 * A few long-lived HTTP/2 sessions to one origin, each carrying many concurrent streams, as
 * APNs and FCM ask of their clients. Sessions that receive GOAWAY, close or fail are dropped
 * and replaced on the next request, and so is a session a request timed out on (a half-open
 * connection would otherwise fail every send until the OS gives up on it); nothing is
 * retried here (that is retry.ts's job).
 */
import http2 from 'node:http2';

/** A complete response: status, headers and the body read into memory (at most maxBodyBytes). */
export interface Http2Response {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
}

export interface Http2SessionPoolOptions {
  /** `https://host[:port]`; any path is ignored. */
  origin: string;
  /** PEM CA certificates trusted instead of the system roots (tests); undefined for system roots. */
  ca?: Buffer | undefined;
  /** Number of sessions to spread streams over. Default 2. */
  size?: number;
  /** Deadline per request, from sending to the end of the response, in ms. Default 10 000. */
  requestTimeoutMs?: number;
  /** Response bodies beyond this many bytes are cut (gateway error bodies are tiny). Default 64 KiB. */
  maxBodyBytes?: number;
}

interface Slot {
  session: http2.ClientHttp2Session | undefined;
  /** Streams open on `session`; new streams go to the least busy slot. */
  active: number;
  /** Streams opened on `session`: a session is retired well before HTTP/2 stream ids run out (2^31). */
  opened: number;
}

/** Stream ids are odd 31-bit numbers; retire a session long before it could run out. */
const MAX_STREAMS_PER_SESSION = 1_000_000_000;
/** How long close() lets in-flight streams finish before destroying sessions, in ms. */
const CLOSE_GRACE_MS = 2_000;

/** The pool; plain class, safe to use in worker threads. */
export class Http2SessionPool {
  readonly #origin: string;
  readonly #ca: Buffer | undefined;
  readonly #requestTimeoutMs: number;
  readonly #maxBodyBytes: number;
  readonly #slots: Slot[];
  /** Every session not yet closed, including ones draining after GOAWAY. */
  readonly #open = new Set<http2.ClientHttp2Session>();
  #closed = false;

  constructor(options: Http2SessionPoolOptions) {
    this.#origin = new URL(options.origin).origin;
    this.#ca = options.ca;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
    this.#maxBodyBytes = options.maxBodyBytes ?? 64 * 1024;
    const size = options.size ?? 2;
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`pool size must be an integer >= 1, got ${size}`);
    this.#slots = Array.from({ length: size }, () => ({ session: undefined, active: 0, opened: 0 }));
  }

  /** Number of sessions currently open (tests use it to see reconnects and pooling). */
  get openSessions(): number {
    return this.#open.size;
  }

  /**
   * Sends one request (`:method` defaults to POST) and resolves with the whole response.
   * Rejects on transport trouble: connection failure, stream reset, timeout, pool closed.
   */
  request(headers: http2.OutgoingHttpHeaders, body: string | Buffer): Promise<Http2Response> {
    if (this.#closed) return Promise.reject(new Error('HTTP/2 session pool is closed'));
    const slot = this.#leastBusySlot();
    let session: http2.ClientHttp2Session;
    let stream: http2.ClientHttp2Stream;
    try {
      session = this.#sessionFor(slot);
      stream = session.request({ ':method': 'POST', ...headers });
    } catch (error) {
      this.#retire(slot);
      return Promise.reject(error);
    }
    slot.active++;
    slot.opened++;
    if (slot.opened >= MAX_STREAMS_PER_SESSION) this.#retire(slot);

    return new Promise<Http2Response>((resolve, reject) => {
      let settled = false;
      let status = 0;
      let responseHeaders: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      let bodyBytes = 0;
      // A deadline for the whole exchange, not stream inactivity: a response trickling in
      // byte by byte must not hold a send (and its permit) for ever.
      const deadline = setTimeout(() => {
        finish(Object.assign(new Error(`no response within ${this.#requestTimeoutMs} ms`), { code: 'ETIMEDOUT' }));
        stream.close(http2.constants.NGHTTP2_CANCEL);
        this.#retireAfterTimeout(slot, session);
      }, this.#requestTimeoutMs);
      const finish = (error: Error | undefined): void => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        slot.active--;
        if (error) reject(error);
        else resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks) });
      };
      stream.on('response', (h) => {
        status = Number(h[':status']);
        responseHeaders = h;
      });
      stream.on('data', (chunk: Buffer) => {
        if (bodyBytes >= this.#maxBodyBytes) return;
        const kept = chunk.subarray(0, this.#maxBodyBytes - bodyBytes);
        chunks.push(kept);
        bodyBytes += kept.length;
      });
      stream.on('end', () => finish(status ? undefined : new Error('stream ended without a response')));
      stream.on('error', (error) => finish(error));
      // Every stream closes, mostly after 'end' settled it: build the Error (a stack capture) only when it is news.
      stream.on('close', () => settled || finish(new Error(`stream closed before the response ended (rst code ${stream.rstCode})`)));
      stream.end(body);
    });
  }

  /** Lets in-flight streams finish (up to 2 s), then destroys whatever is left. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    for (const slot of this.#slots) slot.session = undefined;
    const sessions = [...this.#open];
    await Promise.all(sessions.map((session) => new Promise<void>((resolve) => {
      if (session.closed && session.destroyed) {
        resolve();
        return;
      }
      const timer = setTimeout(() => session.destroy(), CLOSE_GRACE_MS);
      session.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      session.close();
    })));
  }

  #leastBusySlot(): Slot {
    let best = this.#slots[0]!;
    for (const slot of this.#slots) {
      if (slot.active < best.active) best = slot;
    }
    return best;
  }

  #sessionFor(slot: Slot): http2.ClientHttp2Session {
    const current = slot.session;
    if (current && !current.closed && !current.destroyed) return current;
    const session = http2.connect(this.#origin, this.#ca ? { ca: this.#ca } : {});
    slot.session = session;
    slot.opened = 0;
    this.#open.add(session);
    const forget = (): void => {
      if (slot.session === session) {
        slot.session = undefined;
      }
    };
    // GOAWAY: the server will take no new streams here; in-flight ones may still finish.
    session.on('goaway', forget);
    // Errors also surface on the affected streams; here they only mean "replace this session".
    session.on('error', forget);
    session.on('close', () => {
      forget();
      this.#open.delete(session);
    });
    return session;
  }

  /**
   * A request on `session` timed out: if the slot still uses it, stop giving it streams and
   * close it. Its other streams may finish; one that cannot (a dead connection) is cut by its
   * own deadline, and the session is destroyed once every stream's deadline has passed.
   */
  #retireAfterTimeout(slot: Slot, session: http2.ClientHttp2Session): void {
    if (slot.session !== session) return;
    this.#retire(slot);
    setTimeout(() => session.destroy(), this.#requestTimeoutMs + CLOSE_GRACE_MS).unref();
  }

  /** Stops giving new streams to the slot's session and closes it once its streams finish. */
  #retire(slot: Slot): void {
    const session = slot.session;
    slot.session = undefined;
    if (session && !session.closed) session.close();
  }
}
