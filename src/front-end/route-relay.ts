/**
 * Routes only the main thread can answer (the admin API, /metrics, the test hooks under
 * /debug/shards), served on front-end threads by passing each request to main over a
 * MessagePort. Both sides derive the same list from one Route array (`relaySpecs`), so a
 * request names its route by index:
 *
 * - thread (`relayedRoutes`): each route's handler posts the request, read in full (headers,
 *   params, body, the remote address), and answers with main's reply, or 503
 *   MAIN_THREAD_TIMEOUT in the route's error shape when main does not answer in time;
 * - main (`serveRelayedRoutes`): runs the route's real handler on the request and posts the
 *   reply back, its object body already JSON-encoded.
 *
 * The thread registers the relayed routes with `registerRoutes` like its own, so the body
 * limit, the drain check (`servedWhileDraining` is kept) and the HTTP metrics of the thread
 * that took the request apply there, before main is asked.
 */
import type { MessagePort } from 'node:worker_threads';
import { HeraldError } from '../errors.js';
import type { Route } from '../http/router.js';
import { errorReply, type Reply, type RequestContext } from '../http/uws-http.js';

/** A route as the thread registers it: everything but the handler, which runs on main. */
export type RelaySpec = Omit<Route, 'handler'>;

/** How long a thread waits for main's answer, ms (the slowest relayed routes wait 2 s on shards; the test hooks up to 10 s plus a shard request). */
export const RELAY_TIMEOUT_MS = 30_000;

/** Thread → main: one request, read in full on the thread. */
export interface RelayedRequest {
  readonly type: 'relay.request';
  readonly id: number;
  /** Index of the route in the list both sides derived from `relaySpecs`. */
  readonly route: number;
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly params: Readonly<Record<string, string>>;
  readonly body: Uint8Array;
  readonly remoteAddress: string;
}

/** Main → thread: the reply to request `id`; an object body arrives JSON-encoded. */
export interface RelayedReply {
  readonly type: 'relay.reply';
  readonly id: number;
  readonly status: number;
  readonly headers?: Record<string, string>;
  /** A string, or bytes (a Buffer body). */
  readonly body?: string | Uint8Array;
  readonly error?: { code: string; message: string };
}

export type RelayMessage = RelayedRequest | RelayedReply;

/** The thread's half of `routes`: plain data, cloned into the thread's workerData or a message. */
export function relaySpecs(routes: readonly Route[]): RelaySpec[] {
  return routes.map(({ method, pattern, options, servedWhileDraining }) => ({ method, pattern, options, ...(servedWhileDraining !== undefined && { servedWhileDraining }) }));
}

/**
 * Thread side: one Route per spec whose handler asks main over `port` and answers with its
 * reply. Replies that come after their timeout are dropped; a closed port fails the requests
 * waiting on it at once, as a timeout would.
 */
export function relayedRoutes(routes: readonly RelaySpec[], port: MessagePort, opts: { timeoutMs?: number } = {}): Route[] {
  const timeoutMs = opts.timeoutMs ?? RELAY_TIMEOUT_MS;
  /** Request id → its settle function (undefined: no answer will come). */
  const pending = new Map<number, (reply: RelayedReply | undefined) => void>();
  let nextId = 0;
  port.on('message', (message: RelayMessage | null) => {
    if (message?.type !== 'relay.reply') return;
    const settle = pending.get(message.id);
    if (settle === undefined) return;
    pending.delete(message.id);
    settle(message);
  });
  port.on('close', () => {
    for (const settle of [...pending.values()]) settle(undefined);
    pending.clear();
  });
  return routes.map(
    (spec, index): Route => ({
      ...spec,
      handler: (rc) =>
        new Promise<Reply>((resolve) => {
          const id = nextId++;
          const timer = setTimeout(() => settle(undefined), timeoutMs);
          const settle = (reply: RelayedReply | undefined): void => {
            clearTimeout(timer);
            pending.delete(id);
            resolve(reply === undefined ? errorReply(new HeraldError('MAIN_THREAD_TIMEOUT'), spec.options.errorStyle, rc.path) : replyOf(reply));
          };
          pending.set(id, settle);
          const body = ownedBytes(rc.body);
          const request: RelayedRequest = {
            type: 'relay.request',
            id,
            route: index,
            method: rc.method,
            path: rc.path,
            query: rc.query,
            headers: rc.headers,
            params: rc.params,
            body: body.bytes,
            remoteAddress: rc.remoteAddress,
          };
          port.postMessage(request, body.transfer);
        }),
    }),
  );
}

/**
 * Main side: answers the requests `port` brings with the handlers of `routes` (the same list
 * the thread's specs came from). Returns the function that stops listening.
 */
export function serveRelayedRoutes(port: MessagePort, routes: readonly Route[]): () => void {
  const onMessage = (message: RelayMessage | null): void => {
    if (message?.type !== 'relay.request') return;
    void answer(routes[message.route], message).then((reply) => {
      const bytes = reply.body instanceof Uint8Array ? ownedBytes(reply.body) : undefined;
      port.postMessage(bytes === undefined ? reply : { ...reply, body: bytes.bytes }, bytes?.transfer ?? []);
    });
  };
  port.on('message', onMessage);
  return () => {
    port.off('message', onMessage);
  };
}

/** Runs the route's handler on the relayed request; never rejects (a failure is its error reply). */
async function answer(route: Route | undefined, request: RelayedRequest): Promise<RelayedReply> {
  const style = route?.options.errorStyle ?? 'plain';
  const rc: RequestContext = {
    method: request.method,
    path: request.path,
    query: request.query,
    headers: request.headers,
    params: request.params,
    body: Buffer.from(request.body.buffer, request.body.byteOffset, request.body.byteLength),
    remoteAddress: request.remoteAddress,
  };
  let reply: Reply;
  try {
    if (route === undefined) throw new Error(`relayed request names route ${request.route}, which main does not have`);
    reply = await route.handler(rc);
  } catch (err) {
    reply = errorReply(err, style, request.path);
  }
  let body: string | Uint8Array | undefined;
  try {
    body = reply.body === undefined || typeof reply.body === 'string' || Buffer.isBuffer(reply.body) ? reply.body : JSON.stringify(reply.body);
  } catch (err) {
    // A reply body that cannot be encoded is a bug: answered 500, as uws-http.ts does.
    reply = errorReply(err, style, request.path);
    body = reply.body as string;
  }
  return {
    type: 'relay.reply',
    id: request.id,
    status: reply.status,
    ...(reply.headers !== undefined && { headers: reply.headers }),
    ...(body !== undefined && { body }),
    ...(reply.error !== undefined && { error: reply.error }),
  };
}

function replyOf(message: RelayedReply): Reply {
  const body = message.body instanceof Uint8Array ? Buffer.from(message.body.buffer, message.body.byteOffset, message.body.byteLength) : message.body;
  return {
    status: message.status,
    ...(body !== undefined && { body }),
    ...(message.headers !== undefined && { headers: message.headers }),
    ...(message.error !== undefined && { error: message.error }),
  };
}

/**
 * Bytes to post without cloning more than they hold: a clone copies a view's whole
 * ArrayBuffer (a pooled Buffer's is 8 KiB of others' bytes), so a partial view is copied out
 * and that copy transferred; a view of a whole buffer (which its owner may keep, e.g. a
 * dashboard asset) is cloned, never transferred.
 */
function ownedBytes(view: Uint8Array): { bytes: Uint8Array; transfer: ArrayBuffer[] } {
  if (view.byteLength === 0) return { bytes: new Uint8Array(0), transfer: [] };
  if (view.byteOffset === 0 && view.byteLength === view.buffer.byteLength) return { bytes: view, transfer: [] };
  const copy = new Uint8Array(view);
  return { bytes: copy, transfer: [copy.buffer] };
}
