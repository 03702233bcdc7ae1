/**
 * One load process of bench:large-host (bench/large-host.ts forks several: one process holds
 * at most ~20,000 open files). It opens `subscribers` raw WebSocket clients (a socket and a
 * frame parser each, far cheaper per frame than a WebSocket library) on channels of its own
 * (`<prefix>0` … `<prefix><channels-1>`, subscriber i on channel i mod channels) and says
 * `ready`; on `go` it sends signed C1 triggers round-robin over those channels from
 * `concurrency` keep-alive connections for `durationMs` (closed loop), waits for the frames
 * they should deliver (bounded), reports `result` and exits.
 *
 * Messages (IPC): parent → child `go`; child → parent `ready`, then `result`.
 */
import { randomBytes } from 'node:crypto';
import { connect, type Socket } from 'node:net';
import { TriggerClient } from '../fanout/trigger-client.js';

/** What the parent passes as the one command-line argument (JSON). */
export interface LoadSettings {
  /** `ws://host:port/app/<key>?…` of the server. */
  wsUrl: string;
  /** Where triggers go, `http://host:port`. */
  baseUrl: string;
  app: { id: string; key: string; secret: string };
  prefix: string;
  subscribers: number;
  channels: number;
  concurrency: number;
  durationMs: number;
  payloadBytes: number;
}

export type LoadMessage =
  | { type: 'ready'; subscribed: number; failed: number; firstError?: string }
  | { type: 'result'; triggersOk: number; triggersFailed: number; firstError?: string; sendMs: number; delivered: number; expected: number; deliverMs: number };

/** Longest wait for the frames after the last trigger was answered, ms. */
const DRAIN_TIMEOUT_MS = 10_000;
/** Nothing arrived for this long after the last trigger: the rest is lost, ms. */
const DRAIN_STALL_MS = 1_000;
/** Subscribers connecting at once. */
const CONNECT_WAVE = 200;
/** Longest wait for one subscriber's subscription_succeeded, ms. */
const SUBSCRIBE_TIMEOUT_MS = 30_000;
/** The frames the triggers deliver start so (both servers write `event` first). */
const EVENT_PREFIX = Buffer.from('{"event":"bench-event"');

const settings = JSON.parse(process.argv[2] ?? '{}') as LoadSettings;
let delivered = 0;

/** A masked client text frame (payloads up to 64 KiB). */
function clientFrame(text: string): Buffer {
  const payload = Buffer.from(text);
  const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
  const mask = randomBytes(4);
  for (let i = 0; i < payload.length; i++) payload[i]! ^= mask[i & 3]!;
  return Buffer.concat([header, mask, payload]);
}

const PONG = clientFrame('{"event":"pusher:pong","data":{}}');

/** Opens one subscriber: resolves with its socket once subscribed, or with an error text. */
function openSubscriber(url: URL, channel: string): Promise<Socket | string> {
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    socket.setNoDelay(true);
    let settled = false;
    const settle = (outcome: Socket | string): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (typeof outcome === 'string') socket.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(() => settle(`no subscription_succeeded on ${channel} in ${SUBSCRIBE_TIMEOUT_MS} ms`), SUBSCRIBE_TIMEOUT_MS);
    let buffer: Buffer = Buffer.alloc(0);
    let upgraded = false;
    let established = false;
    socket.on('connect', () => {
      socket.write(
        `GET ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString('base64')}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    socket.on('error', (err) => settle(String(err)));
    socket.on('close', () => settle('closed by the server'));
    socket.on('data', (chunk: Buffer) => {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      if (!upgraded) {
        const end = buffer.indexOf('\r\n\r\n');
        if (end < 0) return;
        const status = buffer.toString('latin1', 0, Math.min(end, 40));
        if (!status.includes(' 101 ')) return settle(`upgrade refused: ${status}`);
        upgraded = true;
        buffer = buffer.subarray(end + 4);
      }
      let offset = 0;
      while (buffer.length - offset >= 2) {
        const opcode = buffer[offset]! & 0x0f;
        let length = buffer[offset + 1]! & 0x7f;
        let headerLength = 2;
        if (length === 126) {
          if (buffer.length - offset < 4) break;
          length = buffer.readUInt16BE(offset + 2);
          headerLength = 4;
        } else if (length === 127) {
          if (buffer.length - offset < 10) break;
          length = Number(buffer.readBigUInt64BE(offset + 2));
          headerLength = 10;
        }
        if (buffer.length - offset < headerLength + length) break;
        const start = offset + headerLength;
        offset = start + length;
        if (opcode === 0x9) socket.write(Buffer.from([0x8a, 0x80, 0, 0, 0, 0]));
        if (opcode !== 0x1) continue;
        if (length >= EVENT_PREFIX.length && buffer.compare(EVENT_PREFIX, 0, EVENT_PREFIX.length, start, start + EVENT_PREFIX.length) === 0) {
          delivered++;
          continue;
        }
        const text = buffer.toString('utf8', start, offset);
        if (!established) {
          established = true;
          socket.write(clientFrame(JSON.stringify({ event: 'pusher:subscribe', data: { channel } })));
        } else if (text.includes('subscription_succeeded')) {
          settle(socket);
        } else if (text.includes('"pusher:ping"')) {
          socket.write(PONG);
        } else if (text.includes('subscription_error') || text.includes('"pusher:error"')) {
          settle(`refused: ${text.slice(0, 200)}`);
        }
      }
      buffer = offset === buffer.length ? Buffer.alloc(0) : buffer.subarray(offset);
    });
  });
}

async function main(): Promise<void> {
  const url = new URL(settings.wsUrl);
  const sockets: Socket[] = [];
  let failed = 0;
  let firstError: string | undefined;
  for (let i = 0; i < settings.subscribers; i += CONNECT_WAVE) {
    const wave = Array.from({ length: Math.min(CONNECT_WAVE, settings.subscribers - i) }, (_, j) => openSubscriber(url, `${settings.prefix}${(i + j) % settings.channels}`));
    for (const outcome of await Promise.all(wave)) {
      if (typeof outcome === 'string') {
        failed++;
        firstError ??= outcome;
      } else sockets.push(outcome);
    }
  }
  const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
  send({ type: 'ready', subscribed: sockets.length, failed, ...(firstError ? { firstError } : {}) });
  await go;

  // Subscribers per channel: the frames one trigger delivers (subscriber i is on channel i mod channels).
  const perChannel = Array.from({ length: settings.channels }, (_, c) => (c < sockets.length % settings.channels ? 1 : 0) + Math.floor(sockets.length / settings.channels));
  const trigger = new TriggerClient(settings.baseUrl, settings.app, settings.concurrency, settings.payloadBytes);
  let expected = 0;
  let next = 0;
  const started = performance.now();
  const endAt = started + settings.durationMs;
  await Promise.all(
    Array.from({ length: settings.concurrency }, async () => {
      while (performance.now() < endAt) {
        const channel = next++ % settings.channels;
        if ((await trigger.trigger(`${settings.prefix}${channel}`)) === 200) expected += perChannel[channel]!;
      }
    }),
  );
  const sendMs = performance.now() - started;
  const drainUntil = performance.now() + DRAIN_TIMEOUT_MS;
  let last = -1;
  let lastChange = performance.now();
  while (delivered < expected && performance.now() < drainUntil && performance.now() - lastChange < DRAIN_STALL_MS) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    if (delivered !== last) {
      last = delivered;
      lastChange = performance.now();
    }
  }
  const deliverMs = (delivered >= expected ? performance.now() : lastChange) - started;
  send({ type: 'result', triggersOk: trigger.ok, triggersFailed: trigger.failed, ...(trigger.firstError ? { firstError: trigger.firstError } : {}), sendMs, delivered, expected, deliverMs });
  trigger.close();
  for (const socket of sockets) socket.destroy();
}

function send(message: LoadMessage): void {
  process.send!(message);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`load process failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
