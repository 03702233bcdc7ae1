/**
 * A load process of the front-end threads benchmark: opens WebSocket connections to the server
 * (the `ws` package, no permessage-deflate, no UTF-8 validation), a bounded number at a time,
 * and counts the frames they receive. Forked by threads.ts and driven over IPC (messages.ts).
 */
import WebSocket from 'ws';
import type { LoadCommand, LoadReply } from './messages.js';
import { processCpuUs } from './thread-cpu.js';

const sockets: WebSocket[] = [];
let received = 0;
let target = Infinity;

const reply = (message: LoadReply): void => {
  process.send!(message);
};

function onFrame(): void {
  received++;
  if (received === target) reply({ type: 'reached', frames: received });
}

/** Opens `count` connections, at most `concurrency` handshakes at a time. */
async function connect(url: string, count: number, concurrency: number): Promise<void> {
  let started = 0;
  let failed = 0;
  const one = (): Promise<void> =>
    new Promise((resolve) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, skipUTF8Validation: true });
      ws.on('open', () => {
        sockets.push(ws);
        resolve();
      });
      ws.on('message', onFrame);
      ws.on('error', () => {
        failed++;
        resolve();
      });
    });
  const lane = async (): Promise<void> => {
    while (started < count) {
      started++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  reply({ type: 'connected', open: sockets.length, failed });
}

process.on('message', (command: LoadCommand) => {
  switch (command.type) {
    case 'connect':
      void connect(command.url, command.count, command.concurrency);
      break;
    case 'expect':
      target = command.frames;
      if (received >= target) reply({ type: 'reached', frames: received });
      break;
    case 'cpu':
      reply({ type: 'cpu', cpuUs: processCpuUs() });
      break;
    case 'close':
      for (const ws of sockets) ws.terminate();
      process.disconnect();
      break;
  }
});
