/**
 * A load-client process of the fan-out benchmark: holds many cheap WebSocket clients (the
 * `ws` package, no permessage-deflate, no UTF-8 validation) and counts what they receive.
 * Forked by client-pool.ts and driven over IPC (client-messages.ts). It speaks the Pusher
 * protocol subset the benchmark needs: wait for connection_established, subscribe (signed
 * when the channel needs it), then count frames. A bench event's data starts with
 * `@<monotonic µs>@`, so a frame's latency is found with one indexOf and no JSON.parse.
 */
import { EventEmitter } from 'node:events';
import { Agent, request } from 'node:http';
import WebSocket from 'ws';
import { monotonicUs } from './clock.js';
import { LatencyHistogram } from './latency-histogram.js';
import { subscriptionAuth } from './signing.js';
import type { ChannelPlan, ClientMessage, OrchestratorCommand, SigningApp } from './client-messages.js';

const AT = 0x40; // '@'

/** Keep-alive connections for xhr_send (each stream has a connection of its own). */
const sendAgent = new Agent({ keepAlive: true, maxSockets: 32 });

/**
 * A pusher-js HTTP fallback session over xhr_streaming, with the subset of `ws`' WebSocket the
 * load client uses (send, readyState, terminate; message, error and close events): one
 * streamed POST receives, one POST per message sends.
 */
class HttpStreamSocket extends EventEmitter {
  readyState: number = WebSocket.CONNECTING;
  private readonly base: string;
  private readonly stream;

  constructor(url: string, localAddress: string | undefined) {
    super();
    const u = new URL(url);
    const session = Array.from({ length: 8 }, () => Math.floor(Math.random() * 32).toString(32)).join('');
    this.base = `${u.origin}${u.pathname}/${Math.floor(Math.random() * 1000)}/${session}`;
    this.stream = request(`${this.base}/xhr_streaming${u.search}`, { method: 'POST', agent: false, ...(localAddress ? { localAddress } : {}) }, (res) => {
      if (res.statusCode !== 200) {
        this.emit('error', new Error(`xhr_streaming answered ${res.statusCode}`));
        res.resume();
        return;
      }
      this.readyState = WebSocket.OPEN;
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        pending += chunk;
        let nl: number;
        while ((nl = pending.indexOf('\n')) >= 0) {
          const line = pending.slice(0, nl);
          pending = pending.slice(nl + 1);
          this.line(line);
        }
      });
      res.on('close', () => this.closed(1006));
    });
    this.stream.on('error', (err) => {
      if (this.readyState === WebSocket.CONNECTING) this.emit('error', err);
      this.closed(1006);
    });
    this.stream.end();
  }

  private line(line: string): void {
    if (line.startsWith('a')) {
      for (const frame of JSON.parse(line.slice(1)) as string[]) this.emit('message', Buffer.from(frame));
    } else if (line.startsWith('c')) {
      this.closed((JSON.parse(line.slice(1)) as [number, string])[0]);
    }
  }

  private closed(code: number): void {
    if (this.readyState === WebSocket.CLOSED) return;
    this.readyState = WebSocket.CLOSED;
    this.stream.destroy();
    this.emit('close', code);
  }

  send(text: string): void {
    const body = JSON.stringify([text]);
    const req = request(`${this.base}/xhr_send`, { method: 'POST', agent: sendAgent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => res.resume());
    req.on('error', () => this.closed(1006));
    req.end(body);
  }

  terminate(): void {
    this.closed(1006);
  }
}

interface Client {
  index: number;
  ws: WebSocket | HttpStreamSocket;
  /** An HTTP fallback session rather than a WebSocket. */
  http: boolean;
  socketId: string;
  /** Resolves the pending subscribe, if any. */
  onSubscribed?: (ok: boolean, error?: string) => void;
  closing: boolean;
}

const clients: Client[] = [];
const histogram = new LatencyHistogram();
let received = 0;
let other = 0;
let closedByServer = 0;
const closeCodes: Record<string, number> = {};

function send(message: ClientMessage): void {
  process.send!(message);
}

/** Parses the digits after the first '@' (the send stamp) and records the latency. */
function recordBenchFrame(data: Buffer, at: number): void {
  let stamp = 0;
  for (let i = at + 1; i < data.length; i++) {
    const c = data[i]!;
    if (c < 0x30 || c > 0x39) break;
    stamp = stamp * 10 + (c - 0x30);
  }
  received++;
  histogram.record(monotonicUs() - stamp);
}

function onControlFrame(client: Client, data: Buffer): void {
  let frame: { event?: string; data?: unknown };
  try {
    frame = JSON.parse(data.toString()) as typeof frame;
  } catch {
    other++;
    return;
  }
  if (frame.event === 'pusher_internal:subscription_succeeded') {
    client.onSubscribed?.(true);
  } else if (frame.event === 'pusher:subscription_error' || frame.event === 'pusher:error') {
    if (client.onSubscribed) client.onSubscribed(false, JSON.stringify(frame.data));
    else other++;
  } else if (frame.event === 'pusher:ping') {
    client.ws.send('{"event":"pusher:pong","data":{}}');
  } else {
    other++;
  }
}

function openClient(url: string, index: number, localAddress: string | undefined): Promise<Client> {
  return new Promise((resolve, reject) => {
    const http = url.startsWith('http');
    const ws = http
      ? new HttpStreamSocket(url, localAddress)
      : new WebSocket(url, { perMessageDeflate: false, skipUTF8Validation: true, handshakeTimeout: 30_000, ...(localAddress ? { localAddress } : {}) });
    const client: Client = { index, ws, http, socketId: '', closing: false };
    let established = false;
    ws.on('message', (data: Buffer) => {
      if (established) {
        const at = data.indexOf(AT);
        if (at >= 0) recordBenchFrame(data, at);
        else onControlFrame(client, data);
        return;
      }
      try {
        const frame = JSON.parse(data.toString()) as { event?: string; data?: string };
        if (frame.event !== 'pusher:connection_established') throw new Error(`first frame was ${data.toString().slice(0, 200)}`);
        client.socketId = (JSON.parse(frame.data!) as { socket_id: string }).socket_id;
        established = true;
        resolve(client);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        ws.terminate();
      }
    });
    ws.on('error', (err) => {
      if (!established) reject(err);
    });
    ws.on('close', (code) => {
      if (!established) reject(new Error(`closed with ${code} before connection_established`));
      else if (!client.closing) {
        closedByServer++;
        closeCodes[code] = (closeCodes[code] ?? 0) + 1;
        client.onSubscribed?.(false, `closed with ${code}`);
      }
    });
  });
}

/** Runs `task(i)` for i in [0, count) with at most `concurrency` pending. */
async function windowed(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) await task(next++);
  });
  await Promise.all(lanes);
}

function channelFor(plan: ChannelPlan, client: Client): string {
  if (plan.kind === 'one') return plan.channel;
  if (plan.kind === 'by-transport') return client.http ? plan.http : plan.ws;
  return `${plan.prefix}${client.index % plan.modulo}`;
}

function subscribeFrame(client: Client, channel: string, signing: SigningApp | undefined): string {
  const data: Record<string, string> = { channel };
  if (channel.startsWith('presence-')) {
    const channelData = JSON.stringify({ user_id: `user-${client.index}`, user_info: { name: `Bench user ${client.index}` } });
    data.channel_data = channelData;
    if (signing) data.auth = subscriptionAuth(signing.key, signing.secret, client.socketId, channel, channelData);
  } else if (channel.startsWith('private-') && signing) {
    data.auth = subscriptionAuth(signing.key, signing.secret, client.socketId, channel);
  }
  return JSON.stringify({ event: 'pusher:subscribe', data });
}

async function connect(cmd: Extract<OrchestratorCommand, { type: 'connect' }>): Promise<void> {
  const errors: string[] = [];
  let opened = 0;
  let failed = 0;
  const firstStartUs = monotonicUs();
  let lastDoneUs = firstStartUs;
  await windowed(cmd.count, cmd.concurrency, async (i) => {
    try {
      clients.push(await openClient(cmd.url, cmd.indexBase + i, cmd.localAddress));
      opened++;
      lastDoneUs = monotonicUs();
    } catch (err) {
      failed++;
      if (errors.length < 5) errors.push(String(err));
    }
  });
  send({ type: 'connect', id: cmd.id, opened, failed, firstStartUs, lastDoneUs, errors });
}

async function subscribe(cmd: Extract<OrchestratorCommand, { type: 'subscribe' }>): Promise<void> {
  const errors: string[] = [];
  let succeeded = 0;
  let failed = 0;
  const live = clients.filter((c) => c.ws.readyState === WebSocket.OPEN);
  // Frames are built (and signed) before the clock starts: a storm measures the server.
  const frames = live.map((c) => subscribeFrame(c, channelFor(cmd.plan, c), cmd.signing));
  const firstStartUs = monotonicUs();
  let lastDoneUs = firstStartUs;
  await windowed(live.length, cmd.concurrency, (i) => {
    const client = live[i]!;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => client.onSubscribed?.(false, 'no subscription_succeeded within 60 s'), 60_000);
      client.onSubscribed = (ok, error) => {
        clearTimeout(timer);
        client.onSubscribed = undefined;
        if (ok) {
          succeeded++;
          lastDoneUs = monotonicUs();
        } else {
          failed++;
          if (errors.length < 5) errors.push(error ?? 'subscription failed');
        }
        resolve();
      };
      client.ws.send(frames[i]!);
    });
  });
  send({ type: 'subscribe', id: cmd.id, succeeded, failed, firstStartUs, lastDoneUs, errors });
}

async function closeAll(id: number): Promise<void> {
  await Promise.all(
    clients.map(
      (client) =>
        new Promise<void>((resolve) => {
          client.closing = true;
          if (client.ws.readyState === WebSocket.CLOSED) return resolve();
          client.ws.once('close', () => resolve());
          client.ws.terminate();
        }),
    ),
  );
  clients.length = 0;
  send({ type: 'ack', id });
}

let progressTimer: NodeJS.Timeout | undefined;
let lastReported = -1;

function setProgress(enabled: boolean): void {
  if (progressTimer) clearInterval(progressTimer);
  progressTimer = undefined;
  lastReported = -1;
  if (!enabled) return;
  progressTimer = setInterval(() => {
    if (received === lastReported) return;
    lastReported = received;
    send({ type: 'progress-report', received });
  }, 20);
}

process.on('message', (cmd: OrchestratorCommand) => {
  switch (cmd.type) {
    case 'connect':
      void connect(cmd);
      break;
    case 'subscribe':
      void subscribe(cmd);
      break;
    case 'reset':
      received = 0;
      other = 0;
      histogram.reset();
      send({ type: 'ack', id: cmd.id });
      break;
    case 'stats': {
      const cpu = process.cpuUsage();
      send({
        type: 'stats', id: cmd.id, received, other, closedByServer, closeCodes: { ...closeCodes },
        histogram: histogram.toData(), cpuUs: cpu.user + cpu.system,
      });
      break;
    }
    case 'close':
      void closeAll(cmd.id);
      break;
    case 'progress':
      setProgress(cmd.enabled);
      send({ type: 'ack', id: cmd.id });
      break;
  }
});

process.on('disconnect', () => process.exit(0));
