/**
 * Orchestrator side of the load clients: forks `processes` load-client.ts children, spreads
 * sockets over them, and merges what they report. Also keeps the running total of received
 * bench events from their ~20 ms progress reports, which the trigger loops use as their
 * flow-control window.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { LatencyHistogram, type HistogramData } from './latency-histogram.js';
import type {
  ChannelPlan, ClientMessage, ClientReply, ConnectResult, OrchestratorCommand, SigningApp, StatsResult, SubscribeResult,
} from './client-messages.js';

type CommandBody<T extends OrchestratorCommand['type']> = Omit<Extract<OrchestratorCommand, { type: T }>, 'id' | 'type'>;

/** What a connect or subscribe wave achieved, over all processes. */
export interface WaveResult {
  done: number;
  failed: number;
  /** First start to last success, ms. */
  elapsedMs: number;
  errors: string[];
  /** Successes per process. */
  doneByProcess: number[];
}

/** Merged counters of all processes. */
export interface PoolStats {
  received: number;
  other: number;
  closedByServer: number;
  closeCodes: Record<string, number>;
  histogram: LatencyHistogram;
  /** CPU µs per process, cumulative. */
  cpuUs: number[];
  /** Bench events received per process (process i connected to url i mod the URLs given). */
  receivedByProcess: number[];
  /** Each process's latency histogram. */
  histogramByProcess: HistogramData[];
}

class ClientProcess {
  readonly child: ChildProcess;
  received = 0;
  private nextId = 1;
  private readonly pending = new Map<number, (reply: ClientReply) => void>();

  constructor(onProgress: () => void) {
    const file = fileURLToPath(new URL('./load-client.js', import.meta.url));
    this.child = fork(file, [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    this.child.on('message', (message: ClientMessage) => {
      if (message.type === 'progress-report') {
        this.received = message.received;
        onProgress();
        return;
      }
      const resolve = this.pending.get(message.id);
      this.pending.delete(message.id);
      resolve?.(message);
    });
    this.child.on('exit', (code) => {
      for (const resolve of this.pending.values()) resolve({ type: 'ack', id: -1 });
      this.pending.clear();
      if (code !== 0 && code !== null) process.stderr.write(`load client exited with ${code}\n`);
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  command<T extends OrchestratorCommand['type'], R extends ClientReply>(type: T, body: CommandBody<T>): Promise<R> {
    const id = this.nextId++;
    return new Promise<R>((resolve) => {
      this.pending.set(id, resolve as (reply: ClientReply) => void);
      this.child.send({ type, id, ...body } as OrchestratorCommand);
    });
  }
}

export class ClientPool {
  private readonly processes: ClientProcess[];
  private waiters: (() => void)[] = [];

  constructor(processCount: number) {
    this.processes = Array.from({ length: processCount }, () => new ClientProcess(() => this.wake()));
  }

  /** Process ids of the load clients (for CPU accounting). */
  get pids(): number[] {
    return this.processes.map((p) => p.pid);
  }

  /** Bench events received so far, per the latest progress reports. */
  get received(): number {
    let total = 0;
    for (const p of this.processes) total += p.received;
    return total;
  }

  /** Resolves on the next progress report (or after `timeoutMs`). */
  nextProgress(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.waiters.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /**
   * Opens `count` sockets spread evenly over the processes; socket numbers are global (process i
   * holds a contiguous range of them). With several URLs (the nodes of a cluster), process i
   * connects to urls[i % length]. With `sourceAddresses`, process i connects from
   * sourceAddresses[i % length].
   */
  async connect(urls: string | readonly string[], count: number, concurrencyPerProcess: number, sourceAddresses: readonly string[] = []): Promise<WaveResult> {
    const urlList = typeof urls === 'string' ? [urls] : urls;
    const shares = split(count, this.processes.length);
    let base = 0;
    const results = await Promise.all(
      this.processes.map((p, i) => {
        const indexBase = base;
        base += shares[i]!;
        const localAddress = sourceAddresses.length ? sourceAddresses[i % sourceAddresses.length] : undefined;
        return p.command<'connect', ConnectResult>('connect', { url: urlList[i % urlList.length]!, count: shares[i]!, indexBase, concurrency: concurrencyPerProcess, ...(localAddress ? { localAddress } : {}) });
      }),
    );
    return merge(results.map((r) => ({ done: r.opened, failed: r.failed, first: r.firstStartUs, last: r.lastDoneUs, errors: r.errors })));
  }

  async subscribe(plan: ChannelPlan, concurrencyPerProcess: number, signing?: SigningApp): Promise<WaveResult> {
    const results = await Promise.all(
      this.processes.map((p) => p.command<'subscribe', SubscribeResult>('subscribe', { plan, concurrency: concurrencyPerProcess, signing })),
    );
    return merge(results.map((r) => ({ done: r.succeeded, failed: r.failed, first: r.firstStartUs, last: r.lastDoneUs, errors: r.errors })));
  }

  async reset(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.command('reset', {})));
    for (const p of this.processes) p.received = 0;
  }

  async setProgress(enabled: boolean): Promise<void> {
    await Promise.all(this.processes.map((p) => p.command('progress', { enabled })));
  }

  async stats(): Promise<PoolStats> {
    const all = await Promise.all(this.processes.map((p) => p.command<'stats', StatsResult>('stats', {})));
    const histogram = new LatencyHistogram();
    const closeCodes: Record<string, number> = {};
    let received = 0;
    let other = 0;
    let closedByServer = 0;
    for (const s of all) {
      histogram.merge(s.histogram);
      received += s.received;
      other += s.other;
      closedByServer += s.closedByServer;
      for (const [code, n] of Object.entries(s.closeCodes)) closeCodes[code] = (closeCodes[code] ?? 0) + n;
    }
    return { received, other, closedByServer, closeCodes, histogram, cpuUs: all.map((s) => s.cpuUs), receivedByProcess: all.map((s) => s.received), histogramByProcess: all.map((s) => s.histogram) };
  }

  async closeSockets(): Promise<void> {
    await Promise.all(this.processes.map((p) => p.command('close', {})));
  }

  /** Ends the processes. */
  async dispose(): Promise<void> {
    await Promise.all(
      this.processes.map(
        (p) =>
          new Promise<void>((resolve) => {
            if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
            p.child.once('exit', () => resolve());
            p.child.kill('SIGKILL');
          }),
      ),
    );
  }
}

/** How `connect` shares `count` sockets over `parts` processes (process i takes the next share[i] socket numbers). */
export function split(count: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(count / parts) + (i < count % parts ? 1 : 0));
}

function merge(parts: { done: number; failed: number; first: number; last: number; errors: string[] }[]): WaveResult {
  const active = parts.filter((p) => p.done + p.failed > 0);
  const first = Math.min(...active.map((p) => p.first));
  const last = Math.max(...active.map((p) => p.last));
  return {
    done: parts.reduce((n, p) => n + p.done, 0),
    failed: parts.reduce((n, p) => n + p.failed, 0),
    elapsedMs: active.length ? (last - first) / 1000 : 0,
    errors: parts.flatMap((p) => p.errors).slice(0, 5),
    doneByProcess: parts.map((p) => p.done),
  };
}
