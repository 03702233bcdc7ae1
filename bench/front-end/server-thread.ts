/**
 * A server thread of the front-end threads benchmark: its own uWebSockets.js App with one
 * WebSocket route. Every connection subscribes to topic `t`; `publish` sends one frame to the
 * topic of this thread's App, as a Herald front-end thread would deliver a channel message to
 * the subscribers it holds. The App either listens on the shared port itself (SO_REUSEPORT) or,
 * with the acceptor, hands its descriptor to the main thread's App, which passes it accepted
 * sockets. Loads uWS through Herald's loader, so it never runs on the JavaScript fallback.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { us_listen_socket, WebSocket } from 'uWebSockets.js';
import { loadUws } from '../../src/http/uws-native.js';
import { LIBUS_LISTEN_DEFAULT, type ListenWithOptions } from '../../src/http/uws-listen.js';
import type { ServerCommand, ServerReply, ServerThreadData } from './messages.js';
import { threadCpuUs } from './thread-cpu.js';

/** The acceptor's descriptor methods: in the 20.57 build (not in its index.d.ts), not in 20.30. */
export interface DescriptorApp {
  getDescriptor?: () => number;
  addChildAppDescriptor?: (descriptor: number) => unknown;
  removeChildAppDescriptor?: (descriptor: number) => unknown;
}

const port = parentPort!;
const data = workerData as ServerThreadData;
const { uws } = loadUws();
const app = uws.App();
const sockets = new Set<WebSocket<unknown>>();
const frame = Buffer.alloc(data.frameBytes, 'x');
frame.write(`{"event":"bench","channel":"t","data":"`);
frame.write('"}', data.frameBytes - 2);
let listenSocket: us_listen_socket | false = false;

const reply = (message: ServerReply): void => port.postMessage(message);

app.ws('/*', {
  compression: uws.DISABLED,
  maxPayloadLength: 16 * 1024,
  maxBackpressure: 64 * 1024 * 1024,
  idleTimeout: 0,
  open: (ws) => {
    sockets.add(ws);
    ws.subscribe('t');
  },
  close: (ws) => {
    sockets.delete(ws);
  },
});

if (data.mode === 'reuseport') {
  (app.listen as unknown as ListenWithOptions).call(app, data.host, data.port, LIBUS_LISTEN_DEFAULT, (socket) => {
    listenSocket = socket;
    reply({ type: 'ready', listening: socket !== false });
  });
} else {
  reply({ type: 'ready', listening: false, descriptor: (app as unknown as DescriptorApp).getDescriptor!() });
}

port.on('message', (command: ServerCommand) => {
  switch (command.type) {
    case 'count':
      reply({ type: 'count', open: sockets.size, cpuUs: threadCpuUs() });
      break;
    case 'publish':
      for (let i = 0; i < command.messages; i++) app.publish('t', frame, false);
      reply({ type: 'published' });
      break;
    case 'close':
      if (listenSocket) uws.us_listen_socket_close(listenSocket);
      for (const ws of [...sockets]) ws.close();
      (app as unknown as { close?: () => void }).close?.();
      port.close();
      break;
  }
});
