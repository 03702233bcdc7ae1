/**
 * Front-end threads (issue #36): how to spread one port's connections over N threads, each
 * running its own uWebSockets.js App, and how to hand a channel frame to those threads.
 *
 * 1. Accept: N server threads (server-thread.ts) on one port, two ways:
 *    - `reuseport`: each thread's App listens on the port itself with LIBUS_LISTEN_DEFAULT
 *      (SO_REUSEPORT); the kernel spreads connections over the listen sockets by a hash of the
 *      4-tuple.
 *    - `acceptor`: one App on the main thread listens and hands every accepted socket to the
 *      threads' Apps (addChildAppDescriptor(getDescriptor()), round robin). The 20.57 build has
 *      it, the 20.30 one does not; a build without it is reported as such, not measured.
 *    K WebSocket connections are opened from separate load processes (load-process.ts); the
 *    table gives the connections each thread got, max/min, and the connect rate.
 * 2. Broadcast: every connection is subscribed to topic `t` on its thread's App; each round
 *    every thread publishes `window` frames to its own App and the load processes count them.
 *    Delivered frames/s and the server process's CPU per delivered frame.
 * 3. Handoff (handoff.ts): one frame to each of N threads by MessagePort (clone, transfer) or a
 *    SharedArrayBuffer ring with Atomics.notify/waitAsync, and through Herald's
 *    ThreadedTopicFanout (src/front-end/fanout.ts), cost per delivery.
 *
 * Loopback only. Figures on a shared 2-core machine are rough: compare rows of one run.
 *
 *   npm run bench:front-end-threads -- [--threads 1,2] [--connections 2000] [--load-processes 2]
 *     [--seconds 3] [--window 20] [--bytes 200] [--handoff-seconds 1.5] [--handoff-batch 1000]
 *     [--modes reuseport,acceptor] [--skip-handoff]
 *
 * Prints the tables and writes bench/results/front-end-threads-<timestamp>.json.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { loadUws } from '../../src/http/uws-native.js';
import { LIBUS_LISTEN_DEFAULT, LIBUS_LISTEN_EXCLUSIVE_PORT, type ListenWithOptions } from '../../src/http/uws-listen.js';
import { formatTable, machineInfo } from '../fanout/report.js';
import { runHandoff, type HandoffResult } from './handoff.js';
import type { AcceptMode, LoadCommand, LoadReply, ServerCommand, ServerReply, ServerThreadData } from './messages.js';
import type { DescriptorApp } from './server-thread.js';
import { processCpuUs } from './thread-cpu.js';

const { values } = parseArgs({
  options: {
    threads: { type: 'string', default: '1,2' },
    connections: { type: 'string', default: '2000' },
    'load-processes': { type: 'string', default: '2' },
    seconds: { type: 'string', default: '3' },
    window: { type: 'string', default: '20' },
    bytes: { type: 'string', default: '200' },
    modes: { type: 'string', default: 'reuseport,acceptor' },
    'handoff-seconds': { type: 'string', default: '1.5' },
    'handoff-batch': { type: 'string', default: '1000' },
    'skip-handoff': { type: 'boolean', default: false },
  },
});

const HOST = '127.0.0.1';
const threadCounts = values.threads.split(',').map(Number);
const connections = Number(values.connections);
const loadProcesses = Number(values['load-processes']);
const seconds = Number(values.seconds);
const window = Number(values.window);
const frameBytes = Number(values.bytes);
const modes = values.modes.split(',') as AcceptMode[];
/** Handshakes each load process has in flight at once. */
const CONCURRENCY = 64;

const { uws, build } = loadUws();

/** A port free now, chosen by the kernel (an ephemeral port bound by uWS cannot be shared). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen({ host: HOST, port: 0, exclusive: true }, () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

const listenWith = (app: TemplatedApp, port: number, options: number): Promise<us_listen_socket | false> =>
  new Promise((resolve) => (app.listen as unknown as ListenWithOptions).call(app, HOST, port, options, (socket) => resolve(socket)));

/** Whether a second listener joins a port opened with `first` options: what SO_REUSEPORT allows. */
async function sharesPort(first: number): Promise<boolean> {
  const port = await freePort();
  const a = uws.App();
  const b = uws.App();
  const one = await listenWith(a, port, first);
  const two = await listenWith(b, port, LIBUS_LISTEN_DEFAULT);
  for (const socket of [one, two]) if (socket) uws.us_listen_socket_close(socket);
  return one !== false && two !== false;
}

/** A worker thread and the replies it sends, one awaited at a time. */
class Thread<Command, Reply extends { type: string }> {
  constructor(readonly worker: Worker) {}

  next(type: Reply['type']): Promise<Reply> {
    return new Promise((resolve) => {
      const on = (reply: Reply): void => {
        if (reply.type !== type) return;
        this.worker.off('message', on);
        resolve(reply);
      };
      this.worker.on('message', on);
    });
  }

  send(command: Command): void {
    this.worker.postMessage(command);
  }
}

/** A load process and the replies it sends. */
class Load {
  readonly child: ChildProcess;
  constructor() {
    this.child = fork(new URL('./load-process.js', import.meta.url), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  }

  next<T extends LoadReply['type']>(type: T): Promise<Extract<LoadReply, { type: T }>> {
    return new Promise((resolve) => {
      const on = (reply: LoadReply): void => {
        if (reply.type !== type) return;
        this.child.off('message', on);
        resolve(reply as Extract<LoadReply, { type: T }>);
      };
      this.child.on('message', on);
    });
  }

  send(command: LoadCommand): void {
    this.child.send(command);
  }
}

interface AcceptResult {
  mode: AcceptMode;
  threads: number;
  skipped?: string;
  perThread?: number[];
  failed?: number;
  connectPerSecond?: number;
  deliveredPerSecond?: number;
  /** Server process CPU per delivered frame, ns. */
  cpuNsPerFrame?: number;
  /** Load processes' CPU per delivered frame, ns. */
  loadCpuNsPerFrame?: number;
  /** Server process CPU in the broadcast phase, % of one core. */
  serverCpuPercent?: number;
  /** Each server thread's CPU in the broadcast phase, % of one core. */
  threadCpuPercent?: number[];
}

async function runAccept(mode: AcceptMode, threads: number): Promise<AcceptResult> {
  const acceptor = mode === 'acceptor' ? uws.App() : undefined;
  const descriptors = acceptor as unknown as DescriptorApp | undefined;
  if (acceptor && typeof descriptors!.addChildAppDescriptor !== 'function') {
    return { mode, threads, skipped: `${build} has no addChildAppDescriptor/getDescriptor` };
  }
  const port = await freePort();
  const servers = Array.from({ length: threads }, (_, index) => {
    const data: ServerThreadData = { role: 'server', index, mode, host: HOST, port, frameBytes };
    return new Thread<ServerCommand, ServerReply>(new Worker(new URL('./server-thread.js', import.meta.url), { workerData: data }));
  });
  const ready = await Promise.all(servers.map((s) => s.next('ready')));
  let acceptorSocket: us_listen_socket | false = false;
  if (acceptor) {
    for (const r of ready) if (r.type === 'ready') descriptors!.addChildAppDescriptor!(r.descriptor!);
    acceptorSocket = await listenWith(acceptor, port, LIBUS_LISTEN_EXCLUSIVE_PORT);
    if (!acceptorSocket) throw new Error(`acceptor cannot listen on ${port}`);
  } else if (ready.some((r) => r.type === 'ready' && !r.listening)) {
    throw new Error(`a server thread cannot listen on ${port}`);
  }

  const loads = Array.from({ length: loadProcesses }, () => new Load());
  const shares = loads.map((_, i) => Math.floor(connections / loadProcesses) + (i < connections % loadProcesses ? 1 : 0));
  const connectStart = process.hrtime.bigint();
  const connected = loads.map((l) => l.next('connected'));
  loads.forEach((l, i) => l.send({ type: 'connect', url: `ws://${HOST}:${port}/`, count: shares[i]!, concurrency: CONCURRENCY }));
  const outcomes = await Promise.all(connected);
  const connectS = Number(process.hrtime.bigint() - connectStart) / 1e9;
  const open = outcomes.map((o) => o.open);
  const failed = outcomes.reduce((a, o) => a + o.failed, 0);

  const census = async (): Promise<{ open: number; cpuUs: number }[]> => {
    const replies = servers.map((s) => s.next('count'));
    for (const s of servers) s.send({ type: 'count' });
    return (await Promise.all(replies)).map((r) => (r.type === 'count' ? r : { open: 0, cpuUs: 0 }));
  };
  const counts = async (): Promise<number[]> => (await census()).map((c) => c.open);
  // The server threads see every handshake the load processes saw completed.
  let perThread = await counts();
  while (perThread.reduce((a, b) => a + b, 0) < open.reduce((a, b) => a + b, 0)) perThread = await counts();

  const loadCpu = async (): Promise<number> => {
    const replies = loads.map((l) => l.next('cpu'));
    for (const l of loads) l.send({ type: 'cpu' });
    return (await Promise.all(replies)).reduce((a, r) => a + r.cpuUs, 0);
  };
  const expected = open.map(() => 0);
  const round = async (): Promise<void> => {
    const reached = loads.map((l) => l.next('reached'));
    loads.forEach((l, i) => {
      expected[i]! += open[i]! * window;
      l.send({ type: 'expect', frames: expected[i]! });
    });
    const published = servers.map((s) => s.next('published'));
    for (const s of servers) s.send({ type: 'publish', messages: window });
    await Promise.all([...reached, ...published]);
  };
  await round(); // warm-up
  const loadStart = await loadCpu();
  const threadStart = (await census()).map((c) => c.cpuUs);
  const cpuStart = processCpuUs();
  const start = process.hrtime.bigint();
  let rounds = 0;
  while (Number(process.hrtime.bigint() - start) < seconds * 1e9) {
    await round();
    rounds++;
  }
  const elapsedS = Number(process.hrtime.bigint() - start) / 1e9;
  const cpuUs = processCpuUs() - cpuStart;
  const loadUs = (await loadCpu()) - loadStart;
  const threadUs = (await census()).map((c, i) => c.cpuUs - threadStart[i]!);
  const delivered = rounds * window * open.reduce((a, b) => a + b, 0);

  const closed = loads.map((l) => new Promise((resolve) => l.child.once('exit', resolve)));
  for (const l of loads) l.send({ type: 'close' });
  await Promise.all(closed);
  // The acceptor stops handing sockets over before the Apps it hands them to close.
  if (acceptor) {
    if (acceptorSocket) uws.us_listen_socket_close(acceptorSocket);
    for (const r of ready) if (r.type === 'ready') descriptors!.removeChildAppDescriptor?.(r.descriptor!);
  }
  const exited = servers.map((s) => new Promise((resolve) => s.worker.once('exit', resolve)));
  for (const s of servers) s.send({ type: 'close' });
  await Promise.all(exited);

  return {
    mode,
    threads,
    perThread,
    failed,
    connectPerSecond: open.reduce((a, b) => a + b, 0) / connectS,
    deliveredPerSecond: delivered / elapsedS,
    cpuNsPerFrame: (cpuUs * 1000) / delivered,
    loadCpuNsPerFrame: (loadUs * 1000) / delivered,
    serverCpuPercent: (cpuUs / 1e6 / elapsedS) * 100,
    threadCpuPercent: threadUs.map((us) => (us / 1e6 / elapsedS) * 100),
  };
}

const n = (value: number, digits = 0): string => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

const machine = machineInfo();
console.log(`front-end threads bench: ${build}, Node ${machine.node}, ${machine.nproc} cores (${machine.cpuModel}), load ${machine.loadAverageAtStart}`);
console.log(
  `${n(connections)} connections from ${loadProcesses} load processes, ${frameBytes}-byte frames, ${window} per thread per round, ${seconds} s broadcast`,
);
console.log(
  `SO_REUSEPORT: a second listener joins a LIBUS_LISTEN_DEFAULT port: ${(await sharesPort(LIBUS_LISTEN_DEFAULT)) ? 'yes' : 'no'}; ` +
    `an LIBUS_LISTEN_EXCLUSIVE_PORT one: ${(await sharesPort(LIBUS_LISTEN_EXCLUSIVE_PORT)) ? 'yes' : 'no'}`,
);

const accepts: AcceptResult[] = [];
for (const mode of modes) for (const threads of threadCounts) accepts.push(await runAccept(mode, threads));

const acceptRows = [['mode', 'threads', 'connections per thread', 'max/min', 'failed', 'connects/s', 'delivered/s', 'server CPU ns/frame', 'server CPU %', 'per thread %', 'load CPU ns/frame']];
for (const r of accepts) {
  if (r.skipped) {
    acceptRows.push([r.mode, String(r.threads), 'not measured (below)', '', '', '', '', '', '', '', '']);
    continue;
  }
  const per = r.perThread!;
  const ratio = Math.min(...per) === 0 ? 'inf' : n(Math.max(...per) / Math.min(...per), 2);
  acceptRows.push([
    r.mode,
    String(r.threads),
    per.join(' / '),
    ratio,
    String(r.failed),
    n(r.connectPerSecond!),
    n(r.deliveredPerSecond!),
    n(r.cpuNsPerFrame!),
    n(r.serverCpuPercent!),
    r.threadCpuPercent!.map((p) => n(p)).join(' / '),
    n(r.loadCpuNsPerFrame!),
  ]);
}
console.log(`\n${formatTable(acceptRows, 3)}`);
for (const skipped of new Set(accepts.map((r) => r.skipped).filter(Boolean))) console.log(`not measured: ${skipped}`);

let handoff: HandoffResult[] = [];
if (!values['skip-handoff']) {
  const handoffThreads = Math.max(...threadCounts);
  const batch = Number(values['handoff-batch']);
  const results = await runHandoff(
    { threads: handoffThreads, frameBytes, batch, seconds: Number(values['handoff-seconds']) },
    new URL('./handoff-sink.js', import.meta.url),
  );
  console.log(`\nhandoff: one ${frameBytes}-byte frame to each of ${handoffThreads} threads, batches of ${n(batch)}; ns per delivery (one frame reaching one thread)`);
  const rows = [['variant', 'deliveries', 'wall ns', 'CPU ns (all threads)', 'sender CPU ns', 'receivers CPU ns']];
  for (const r of results) rows.push([r.variant, n(r.deliveries), n(r.wallNs), n(r.cpuNs), n(r.senderNs), n(r.receiverNs)]);
  console.log(formatTable(rows, 1));
  handoff = results;
}

const resultsDir = fileURLToPath(new URL('../../../bench/results/', import.meta.url));
mkdirSync(resultsDir, { recursive: true });
const file = `${resultsDir}front-end-threads-${new Date().toISOString().replace(/[:.]/g, '-')}.json`;
writeFileSync(file, JSON.stringify({ command: process.argv.slice(2).join(' '), build, machine, options: values, accepts, handoff }, null, 2));
console.log(`\nwrote ${file}`);
