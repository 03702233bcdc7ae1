/**
 * A front-end thread for the fanout tests (worker_threads, built code from dist/): a bare uWS
 * App on its own port whose WebSocket clients subscribe to the topics in their URL, and a
 * ThreadedTopicFanout over the shared buffers. Plain JavaScript, run by the worker directly.
 *
 * URL query: `id` (the socket id), `topics` (comma-separated), `quiet` (comma-separated topics
 * subscribed without telling the interest table: a thread that should get nothing for them).
 * Each client gets `ready` once subscribed.
 *
 * Driven over the parent port:
 *   {type: 'publish', topic, frames: [string...], except?}   publishes in one turn; answers {type: 'published'}
 *   {type: 'stop'}   closes the sockets, the listener and the fanout; answers {type: 'stopped', delivered}
 * Sends {type: 'listening', port} first.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { pathToFileURL, URLSearchParams } from 'node:url';
import { join } from 'node:path';

const { init, thread, root, maxQueuedBytes } = workerData;
const dist = (path) => import(pathToFileURL(join(root, 'dist/src', path)).href);
const { loadUws } = await dist('http/uws-native.js');
const { ThreadedTopicFanout } = await dist('front-end/fanout.js');
const { interestSubscriptionHandler } = await dist('channels/ws/endpoint.js');
const { uws } = loadUws();

const app = uws.App();
const sockets = new Map();
/** Frames delivered from other producers' records, counted by onDelivered. */
let delivered = 0;
const local = {
  publish: (topic, message) => void app.publish(topic, message),
  numSubscribers: (topic) => app.numSubscribers(topic),
  publishFrom: (ws, topic, message) => void ws.publish(topic, message),
};
const fanout = new ThreadedTopicFanout(init, thread, local, {
  lookupSocket: (id, topic) => {
    const ws = sockets.get(id);
    return ws && ws.isSubscribed(topic) ? ws : undefined;
  },
  onDelivered: (_topic, frames) => {
    delivered += frames;
  },
  ...(maxQueuedBytes !== undefined && { maxQueuedBytes }),
});

const interested = interestSubscriptionHandler(fanout.interest);

app.ws('/*', {
  upgrade: (res, req, context) => {
    const query = new URLSearchParams(req.getQuery() ?? '');
    const list = (name) => (query.get(name) ?? '').split(',').filter(Boolean);
    res.upgrade(
      { id: query.get('id') ?? '', topics: list('topics'), quiet: new Set(list('quiet')) },
      req.getHeader('sec-websocket-key'),
      req.getHeader('sec-websocket-protocol'),
      req.getHeader('sec-websocket-extensions'),
      context,
    );
  },
  // The WebSocket endpoint's handler; `quiet` topics are kept from it.
  subscription: (ws, topic, newCount, oldCount) => {
    if (!ws.getUserData().quiet.has(Buffer.from(topic).toString('utf8'))) interested(ws, topic, newCount, oldCount);
  },
  open: (ws) => {
    const data = ws.getUserData();
    sockets.set(data.id, ws);
    for (const topic of [...data.topics, ...data.quiet]) ws.subscribe(topic);
    ws.send('ready');
  },
  close: (ws) => {
    sockets.delete(ws.getUserData().id);
  },
});

let listenSocket;
app.listen('127.0.0.1', 0, (socket) => {
  listenSocket = socket;
  parentPort.postMessage({ type: 'listening', port: uws.us_socket_local_port(socket) });
});

parentPort.on('message', async (message) => {
  if (message.type === 'publish') {
    for (const frame of message.frames) {
      if (message.except) fanout.publishExcept(message.topic, frame, message.except);
      else fanout.publish(message.topic, frame);
    }
    parentPort.postMessage({ type: 'published' });
  } else if (message.type === 'stop') {
    for (const ws of [...sockets.values()]) ws.end(1000);
    uws.us_listen_socket_close(listenSocket);
    app.close?.();
    fanout.close();
    await fanout.stopped;
    parentPort.postMessage({ type: 'stopped', delivered });
    parentPort.close();
  }
});
