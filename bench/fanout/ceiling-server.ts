/**
 * The ceiling for Herald's stack: a bare uWebSockets.js server that speaks just the subset of
 * the Pusher protocol the fan-out benchmark uses, with no auth, no validation beyond JSON.parse,
 * no shards and no bookkeeping. Whatever it reaches on this machine is the most Herald could.
 *
 * - WS `/app/:key`: sends `pusher:connection_established`; `pusher:subscribe` → `ws.subscribe`
 *   + `pusher_internal:subscription_succeeded` (on `presence-` channels it also publishes a
 *   `pusher_internal:member_added` to the others, so a join storm carries the same frame count
 *   as on Herald, but it keeps no member list); `pusher:ping` → `pusher:pong`.
 * - HTTP `POST /apps/:id/events` and `/apps/:id/batch_events`: `app.publish` of
 *   `{"event","channel","data"}` per channel, answers `{}`. Signatures are not checked.
 *
 * Run as its own process: `node dist/bench/fanout/ceiling-server.js [--host H] [--port P]`;
 * prints `ceiling trigger port T`, then `ceiling listening on port N`. Port P is shared with
 * other processes on it (SO_REUSEPORT, uWS's default); T is a free port of this process alone,
 * the same app, so triggers can be sent to one process of several on one port. Loads uWS through Herald's loader so it never runs
 * on the JavaScript fallback.
 */
import { parseArgs } from 'node:util';
import type { HttpResponse, WebSocket } from 'uWebSockets.js';
import { loadUws } from '../../src/http/uws-native.js';

interface SocketData {
  socketId: string;
}

/** Largest trigger body read (bytes), as Herald's default request cap. */
const MAX_BODY_BYTES = 256 * 1024;

const { values } = parseArgs({
  options: { host: { type: 'string', default: '127.0.0.1' }, port: { type: 'string', default: '0' } },
});

const { uws } = loadUws();
const app = uws.App();
let nextSocket = 1;
const textDecoder = new TextDecoder();

app.ws<SocketData>('/app/:key', {
  compression: uws.DISABLED,
  maxPayloadLength: 32 * 1024,
  maxBackpressure: 1024 * 1024,
  idleTimeout: 0,
  upgrade: (res, req, context) => {
    res.upgrade<SocketData>(
      { socketId: `${process.pid}.${nextSocket++}` },
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  },
  open: (ws) => {
    const data = JSON.stringify({ socket_id: ws.getUserData().socketId, activity_timeout: 120 });
    ws.send(JSON.stringify({ event: 'pusher:connection_established', data }));
  },
  message: (ws, message) => {
    let frame: { event?: unknown; data?: { channel?: unknown; channel_data?: unknown } };
    try {
      frame = JSON.parse(textDecoder.decode(message)) as typeof frame;
    } catch {
      return;
    }
    if (frame.event === 'pusher:subscribe' && typeof frame.data?.channel === 'string') {
      subscribe(ws, frame.data.channel, frame.data.channel_data);
    } else if (frame.event === 'pusher:unsubscribe' && typeof frame.data?.channel === 'string') {
      ws.unsubscribe(frame.data.channel);
    } else if (frame.event === 'pusher:ping') {
      ws.send('{"event":"pusher:pong","data":"{}"}');
    }
  },
});

function subscribe(ws: WebSocket<SocketData>, channel: string, channelData: unknown): void {
  ws.subscribe(channel);
  if (!channel.startsWith('presence-')) {
    ws.send(JSON.stringify({ event: 'pusher_internal:subscription_succeeded', channel, data: '{}' }));
    return;
  }
  let member: { user_id?: unknown; user_info?: unknown } = {};
  try {
    member = JSON.parse(String(channelData)) as typeof member;
  } catch {
    // No bookkeeping, no validation: an unreadable channel_data joins with no id.
  }
  const presence = { presence: { ids: [member.user_id], hash: { [String(member.user_id)]: member.user_info }, count: 1 } };
  ws.send(JSON.stringify({ event: 'pusher_internal:subscription_succeeded', channel, data: JSON.stringify(presence) }));
  ws.publish(channel, JSON.stringify({ event: 'pusher_internal:member_added', channel, data: JSON.stringify(member) }));
}

interface TriggerBody {
  name?: unknown;
  data?: unknown;
  channel?: unknown;
  channels?: unknown;
  batch?: TriggerBody[];
}

function publishEvent(event: TriggerBody): void {
  const channels = Array.isArray(event.channels) ? event.channels : [event.channel];
  for (const channel of channels) {
    if (typeof channel !== 'string') continue;
    app.publish(channel, JSON.stringify({ event: event.name, channel, data: event.data }), false);
  }
}

function answer(res: HttpResponse, status: string, body: string): void {
  res.cork(() => {
    res.writeStatus(status).writeHeader('content-type', 'application/json').end(body);
  });
}

/** Reads the body (capped), parses it and hands it to `handle`; answers `{}` or 400. */
function triggerRoute(handle: (body: TriggerBody) => void) {
  return (res: HttpResponse): void => {
    const state = { aborted: false };
    res.onAborted(() => {
      state.aborted = true;
    });
    const chunks: Buffer[] = [];
    let size = 0;
    res.onData((chunk, isLast) => {
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) {
        if (!state.aborted) answer(res, '413 Payload Too Large', '{"error":"too large"}');
        state.aborted = true;
        return;
      }
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!isLast || state.aborted) return;
      let body: TriggerBody;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString()) as TriggerBody;
      } catch {
        answer(res, '400 Bad Request', '{"error":"bad json"}');
        return;
      }
      handle(body);
      answer(res, '200 OK', '{}');
    });
  };
}

app.post('/apps/:id/events', triggerRoute(publishEvent));
app.post('/apps/:id/batch_events', triggerRoute((body) => (Array.isArray(body.batch) ? body.batch : []).forEach(publishEvent)));
app.any('/*', (res) => answer(res, '404 Not Found', '{"error":"not found"}'));

// First the private port (a free one: no other process has it), known when "listening" is printed.
app.listen(values.host!, 0, (socket) => {
  if (!socket) {
    process.stderr.write(`ceiling: cannot listen on a trigger port of ${values.host}\n`);
    process.exit(1);
  }
  process.stdout.write(`ceiling trigger port ${uws.us_socket_local_port(socket)}\n`);
});
app.listen(values.host!, Number(values.port), (socket) => {
  if (!socket) {
    process.stderr.write(`ceiling: cannot listen on ${values.host}:${values.port}\n`);
    process.exit(1);
  }
  process.stdout.write(`ceiling listening on port ${uws.us_socket_local_port(socket)}\n`);
});

process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
