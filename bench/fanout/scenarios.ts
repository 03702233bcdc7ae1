/**
 * The fan-out scenarios. Each runs against one freshly started target (Herald or the ceiling),
 * is bounded in time and count, and returns named metrics that fanout.ts lines up side by side.
 *
 * Trigger scenarios (broadcast, unicast, batch) run three phases, each ended by a drain (wait
 * until every expected frame has arrived, bounded) so loss is counted, not guessed:
 *  1. max: closed loop over `httpConnections` keep-alive sockets, throttled so no subscriber
 *     has more than SOCKET_BACKLOG frames outstanding (the server's backpressure limit is
 *     never reached, so the server is never forced to drop or disconnect);
 *  2. moderate: open loop at a fixed, comfortable rate, for the latency figures;
 *  3. half: open loop at half of Herald's max trigger rate (measured in phase 1 on Herald; the
 *     ceiling is driven at Herald's figure, so both p99s are at the same rate).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { monotonicUs } from './clock.js';
import { ClientPool, type PoolStats, type WaveResult } from './client-pool.js';
import type { ChannelPlan } from './client-messages.js';
import { CpuMeter, machineBusyCpuUs, mainThreadCpuUs, processCpuUs, processSystemCpuUs, rssKb, threadCpuUs } from '../proc-stats.js';
import { readdirSync, readlinkSync } from 'node:fs';
import { freePort, RedisServer } from '../../test/helpers/redis-server.js';
import { BENCH_APP, startTarget, type RunningTarget, type TargetName, type TargetOptions } from './targets.js';
import { TriggerClient } from './trigger-client.js';

/** A figure of one scenario on one target. */
export interface Metric {
  name: string;
  unit: string;
  value: number;
  /** Which direction is good, for reading the ratio. */
  better: 'higher' | 'lower' | 'none';
}

/** Counts and times for a whole run; `--quick` picks the small set. */
export interface Sizes {
  broadcastSmall: number;
  broadcastLarge: number;
  unicastChannels: number;
  batchChannels: number;
  presenceMembers: number;
  connectStorm: number;
  idleConnections: number;
  /** Connections of the `scale` scenario (one server process holds them all). */
  scaleConnections: number;
  /**
   * Connections of the `scale-2proc` scenario: two Herald processes on one port (`reusePort`,
   * a cluster over a private Redis) hold them together; its ceiling run is one bare-uWS process
   * with half of them.
   */
  scale2procConnections: number;
  /** Length of each trigger phase, ms. */
  phaseMs: number;
}

export const FULL_SIZES: Sizes = {
  broadcastSmall: 1_000,
  broadcastLarge: 10_000,
  unicastChannels: 1_000,
  batchChannels: 1_000,
  presenceMembers: 1_000,
  connectStorm: 10_000,
  idleConnections: 10_000,
  scaleConnections: 19_000,
  scale2procConnections: 38_000,
  phaseMs: 5_000,
};

export const QUICK_SIZES: Sizes = {
  broadcastSmall: 200,
  broadcastLarge: 1_000,
  unicastChannels: 200,
  batchChannels: 200,
  presenceMembers: 100,
  connectStorm: 1_000,
  idleConnections: 1_000,
  scaleConnections: 2_000,
  scale2procConnections: 4_000,
  phaseMs: 1_500,
};

export interface ScenarioContext {
  /** The server the triggers go to (and, by default, the one the subscribers connect to). */
  target: RunningTarget;
  /** Where the load clients connect, process i to the URL i mod length (default: the target's). */
  subscriberUrls?: readonly string[];
  /** Processes counted as the server in the CPU figures (default: the target's). */
  serverPids?: readonly number[];
  /** With several server processes: where each takes triggers (RunningTarget.baseUrl). */
  triggerUrls?: readonly string[];
  /** Event data size of the triggers, bytes (TriggerClient's). */
  payloadBytes?: number;
  pool: ClientPool;
  trigger: TriggerClient;
  sizes: Sizes;
  /** Keep-alive HTTP connections for the closed-loop phase. */
  httpConnections: number;
  /** Herald's max units/s for this scenario when already measured (the ceiling run uses it). */
  heraldMaxUnitsPerSec?: number;
  log: (line: string) => void;
}

export interface Scenario {
  name: string;
  description: string;
  /** Runs only when named on the command line (heavy). */
  onlyWhenNamed?: boolean;
  /**
   * Starts the servers itself (default: one fresh `startTarget(target, options)`); triggers go
   * to the first, the load clients connect to each one's wsUrl and the CPU figures count all.
   */
  start?(target: TargetName, options: TargetOptions): Promise<RunningTarget[]>;
  /** Runs after the servers stopped, whatever happened (with `start`). */
  afterStop?(): Promise<void>;
  run(ctx: ScenarioContext): Promise<Metric[]>;
}

/**
 * Frames a subscriber may have outstanding in the max phase: enough to keep every queue busy
 * between two progress reports, far under the 1 MiB backpressure cap (~64 × 150 B).
 */
const SOCKET_BACKLOG = 64;
/** Upper bound on units sent in one phase, whatever the duration. */
const MAX_UNITS_PER_PHASE = 500_000;
/** Open-loop phases give up sending (and say so) past this many unanswered requests. */
const MAX_IN_FLIGHT = 4_096;
/** Longest wait for stragglers after a phase, ms. */
const DRAIN_TIMEOUT_MS = 15_000;

export const metric = (name: string, unit: string, value: number, better: Metric['better'] = 'none'): Metric => ({ name, unit, value, better });

/** How one trigger "unit" (a C1 request or a C2 batch) is sent and what it should deliver. */
export interface TriggerShape {
  /** Sends unit number `i`. */
  fire(trigger: TriggerClient, i: number): Promise<number>;
  /** Frames one unit delivers in total. */
  deliveriesPerUnit: number;
  /** Events one unit carries (1 for C1, the batch size for C2). */
  eventsPerUnit: number;
  /** Subscriber sockets (for the backlog window). */
  subscribers: number;
  /** Rate of the moderate phase, units/s. */
  moderateRate: number;
  /** Plural, e.g. `triggers`. */
  unitName: string;
  /** Singular, e.g. `trigger`. */
  unitSingular: string;
}

export interface PhaseResult {
  unitsOk: number;
  unitsFailed: number;
  sendMs: number;
  /** From the first send until the last expected frame arrived (or the drain gave up), ms. */
  totalMs: number;
  expected: number;
  stats: PoolStats;
  /** % of one core: server (all threads), its main thread, each load client, trigger sender, the rest of the machine. */
  cpu: CpuFigures;
  /** Open loop only: false when the sender could not keep the rate. */
  rateHeld: boolean;
}

/** CPU over a phase, % of one core (ticks of 10 ms: short phases are coarse). */
interface CpuFigures {
  server: number;
  serverMain: number;
  /** Kernel time of the server process (all threads). */
  serverSystem: number;
  clients: number[];
  trigger: number;
  others: number;
  seconds: number;
}

/** Where the CPU went during a connect or join wave: server (all threads, main), load clients, the rest. */
function waveCpuMetrics(cpu: CpuFigures): Metric[] {
  return [
    metric('cpu server (all threads)', '% core', cpu.server),
    metric('cpu server main thread', '% core', cpu.serverMain),
    metric('cpu load clients (sum)', '% core', cpu.clients.reduce((a, b) => a + b, 0)),
    metric('cpu other processes', '% core', cpu.others),
  ];
}

/** Server CPU time per operation, µs: how much of a core one trigger/connect/join costs the server, whoever was saturated. */
function serverCpuPer(cpu: CpuFigures, operations: number, which: 'server' | 'serverMain' = 'server'): number {
  return operations > 0 ? (cpu[which] / 100) * cpu.seconds * 1e6 / operations : 0;
}

function cpuMeter(ctx: ScenarioContext): CpuMeter {
  const servers = ctx.serverPids ?? [ctx.target.pid];
  const pids = ctx.pool.pids;
  const sum = (read: (pid: number) => number): number => servers.reduce((total, pid) => total + read(pid), 0);
  return new CpuMeter(() => {
    const self = process.cpuUsage();
    return [machineBusyCpuUs(), sum(processCpuUs), sum(mainThreadCpuUs), sum(processSystemCpuUs), ...pids.map(processCpuUs), self.user + self.system];
  });
}

function cpuResult(meter: CpuMeter): CpuFigures {
  const p = meter.percent();
  const [machine, server, serverMain, serverSystem] = [p[0]!, p[1]!, p[2]!, p[3]!];
  const clients = p.slice(4, -1);
  const trigger = p[p.length - 1]!;
  const others = Math.max(0, machine - server - trigger - clients.reduce((a, b) => a + b, 0));
  return { server, serverMain, serverSystem, clients, trigger, others, seconds: meter.elapsedSeconds() };
}

/** Waits until the pool has received `expected` frames, or nothing arrived for a while. */
async function drain(ctx: ScenarioContext, expected: number): Promise<void> {
  const deadline = Date.now() + DRAIN_TIMEOUT_MS;
  let last = -1;
  let stalledSince = Date.now();
  while (ctx.pool.received < expected && Date.now() < deadline) {
    await ctx.pool.nextProgress(100);
    if (ctx.pool.received !== last) {
      last = ctx.pool.received;
      stalledSince = Date.now();
    } else if (Date.now() - stalledSince > 3_000) {
      break;
    }
  }
}

async function waitForAnswers(trigger: TriggerClient): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (trigger.inFlight > 0 && Date.now() < deadline) await sleep(5);
}

/** Per-thread CPU of the server processes at the start of a phase, to log where its CPU went. */
function threadCpuStart(ctx: ScenarioContext): Map<number, Map<number, number>> {
  return new Map((ctx.serverPids ?? [ctx.target.pid]).map((pid) => [pid, threadCpuUs(pid)]));
}

/** Logs each server thread's CPU per unit over the phase, busiest first ("main" is tid == pid; others by tid, in order of creation). */
function logThreadCpu(ctx: ScenarioContext, phase: string, start: Map<number, Map<number, number>>, units: number, unit: string): void {
  if (units <= 0) return;
  for (const [pid, before] of start) {
    const parts = [...threadCpuUs(pid)]
      .map(([tid, us]) => ({ tid, us: us - (before.get(tid) ?? 0) }))
      .filter((t) => t.us > 0)
      .sort((a, b) => b.us - a.us)
      .map((t) => `${t.tid === pid ? 'main' : `tid ${t.tid}`} ${(t.us / units).toFixed(2)}`);
    ctx.log(`  ${phase}: server ${pid} cpu per ${unit} by thread, µs: ${parts.join(', ') || 'none'}`);
  }
}

async function finishPhase(ctx: ScenarioContext, shape: TriggerShape, startUs: number, sendMs: number, okBefore: number, failedBefore: number, meter: CpuMeter, rateHeld: boolean, threads: { phase: string; start: Map<number, Map<number, number>> }): Promise<PhaseResult> {
  await waitForAnswers(ctx.trigger);
  const cpu = cpuResult(meter);
  const unitsOk = ctx.trigger.ok - okBefore;
  logThreadCpu(ctx, threads.phase, threads.start, unitsOk, shape.unitSingular);
  const unitsFailed = ctx.trigger.failed - failedBefore;
  const expected = unitsOk * shape.deliveriesPerUnit;
  await drain(ctx, expected);
  const totalMs = (monotonicUs() - startUs) / 1000;
  const stats = await ctx.pool.stats();
  return { unitsOk, unitsFailed, sendMs, totalMs, expected, stats, cpu, rateHeld };
}

/** Phase 1: as fast as the server answers, within the per-subscriber backlog window. */
export async function maxPhase(ctx: ScenarioContext, shape: TriggerShape): Promise<PhaseResult> {
  await ctx.pool.reset();
  const okBefore = ctx.trigger.ok;
  const failedBefore = ctx.trigger.failed;
  const windowUnits = Math.max(1, Math.floor((SOCKET_BACKLOG * shape.subscribers) / shape.deliveriesPerUnit));
  const threads = threadCpuStart(ctx);
  const meter = cpuMeter(ctx);
  const startUs = monotonicUs();
  const endAt = performance.now() + ctx.sizes.phaseMs;
  let sent = 0;
  const lane = async (): Promise<void> => {
    while (performance.now() < endAt && sent < MAX_UNITS_PER_PHASE) {
      while (sent - ctx.pool.received / shape.deliveriesPerUnit > windowUnits && performance.now() < endAt) {
        await ctx.pool.nextProgress(50);
      }
      await shape.fire(ctx.trigger, sent++);
    }
  };
  await Promise.all(Array.from({ length: ctx.httpConnections }, lane));
  const sendMs = (monotonicUs() - startUs) / 1000;
  return finishPhase(ctx, shape, startUs, sendMs, okBefore, failedBefore, meter, true, { phase: 'max', start: threads });
}

/** Phases 2 and 3: `rate` units/s for the phase length, whatever the answers. */
export async function fixedRatePhase(ctx: ScenarioContext, shape: TriggerShape, rate: number): Promise<PhaseResult> {
  await ctx.pool.reset();
  const okBefore = ctx.trigger.ok;
  const failedBefore = ctx.trigger.failed;
  const total = Math.max(1, Math.min(MAX_UNITS_PER_PHASE, Math.round((rate * ctx.sizes.phaseMs) / 1000)));
  const threads = threadCpuStart(ctx);
  const meter = cpuMeter(ctx);
  const startUs = monotonicUs();
  const start = performance.now();
  let sent = 0;
  let rateHeld = true;
  while (sent < total) {
    const due = Math.min(total, Math.floor(((performance.now() - start) / 1000) * rate) + 1);
    while (sent < due) {
      if (ctx.trigger.inFlight >= MAX_IN_FLIGHT) {
        rateHeld = false;
        break;
      }
      void shape.fire(ctx.trigger, sent++);
    }
    if (!rateHeld) break;
    const nextAt = start + (sent / rate) * 1000;
    const wait = nextAt - performance.now();
    // Timers are ~1 ms coarse; below that, yield to I/O and re-check.
    if (wait >= 1) await sleep(Math.floor(wait));
    else await new Promise((r) => setImmediate(r));
  }
  const sendMs = (monotonicUs() - startUs) / 1000;
  return finishPhase(ctx, shape, startUs, sendMs, okBefore, failedBefore, meter, rateHeld, { phase: `${Math.round(rate)}/s`, start: threads });
}

/** The figures of one phase; `throughput` adds the rates and the CPU of every process. */
export function phaseMetrics(prefix: string, shape: TriggerShape, r: PhaseResult, throughput: boolean): Metric[] {
  const lat = r.stats.histogram.summary();
  const out: Metric[] = [];
  if (throughput) {
    out.push(metric(`${prefix} ${shape.unitName}/s`, '/s', (r.unitsOk / r.sendMs) * 1000, 'higher'));
    if (shape.eventsPerUnit > 1) out.push(metric(`${prefix} events/s`, '/s', ((r.unitsOk * shape.eventsPerUnit) / r.sendMs) * 1000, 'higher'));
    out.push(metric(`${prefix} delivered msgs/s`, '/s', (r.stats.received / r.totalMs) * 1000, 'higher'));
  } else {
    out.push(metric(`${prefix} rate achieved`, `${shape.unitName}/s`, (r.unitsOk / r.sendMs) * 1000));
  }
  out.push(
    metric(`${prefix} latency p50`, 'ms', lat.p50, 'lower'),
    metric(`${prefix} latency p99`, 'ms', lat.p99, 'lower'),
    metric(`${prefix} latency max`, 'ms', lat.max, 'lower'),
    metric(`${prefix} loss`, 'msgs', r.expected - r.stats.received, 'lower'),
  );
  if (r.unitsFailed > 0) out.push(metric(`${prefix} failed triggers`, 'reqs', r.unitsFailed, 'lower'));
  if (!r.rateHeld) out.push(metric(`${prefix} rate NOT held (sender gave up)`, 'flag', 1, 'lower'));
  if (r.stats.closedByServer > 0) out.push(metric(`${prefix} sockets closed by server`, 'sockets', r.stats.closedByServer, 'lower'));
  if (throughput) {
    out.push(
      metric(`${prefix} cpu server (all threads)`, '% core', r.cpu.server),
      metric(`${prefix} cpu server main thread`, '% core', r.cpu.serverMain),
      metric(`${prefix} cpu server in kernel (sys)`, '% core', r.cpu.serverSystem),
      metric(`${prefix} cpu load clients (sum)`, '% core', r.cpu.clients.reduce((a, b) => a + b, 0)),
      metric(`${prefix} cpu trigger sender`, '% core', r.cpu.trigger),
      metric(`${prefix} cpu other processes`, '% core', r.cpu.others),
      metric(`${prefix} server cpu per ${shape.unitSingular}`, 'µs', serverCpuPer(r.cpu, r.unitsOk), 'lower'),
      metric(`${prefix} server main-thread cpu per ${shape.unitSingular}`, 'µs', serverCpuPer(r.cpu, r.unitsOk, 'serverMain'), 'lower'),
    );
    if (shape.deliveriesPerUnit > 1) out.push(metric(`${prefix} server cpu per delivered msg`, 'µs', serverCpuPer(r.cpu, r.stats.received), 'lower'));
  } else {
    // A fixed rate both targets are driven at: their CPU per operation compares like for like
    // (at the max phase's rate a busier server also writes more frames per socket write).
    out.push(metric(`${prefix} server cpu per ${shape.unitSingular}`, 'µs', serverCpuPer(r.cpu, r.unitsOk), 'lower'));
    if (shape.deliveriesPerUnit > 1) out.push(metric(`${prefix} server cpu per delivered msg`, 'µs', serverCpuPer(r.cpu, r.stats.received), 'lower'));
  }
  return out;
}

/** Opens `count` sockets and subscribes them per `plan` (signed where needed); the subscribe wave's result. */
export async function connectAndSubscribe(ctx: ScenarioContext, count: number, plan: ChannelPlan): Promise<WaveResult> {
  const connected = await ctx.pool.connect(ctx.subscriberUrls ?? ctx.target.wsUrl, count, 100);
  if (connected.failed > 0) ctx.log(`  ${connected.failed} connects failed: ${connected.errors.join('; ')}`);
  const subscribed = await ctx.pool.subscribe(plan, 200, { key: BENCH_APP.key, secret: BENCH_APP.secret });
  if (subscribed.failed > 0) ctx.log(`  ${subscribed.failed} subscriptions failed: ${subscribed.errors.join('; ')}`);
  if (subscribed.done === 0) throw new Error(`no subscription succeeded: ${subscribed.errors.join('; ')}`);
  if (ctx.target.name === 'herald') {
    const spread = await frontEndSpread(ctx.target);
    if (spread.length > 1) ctx.log(`  connections per front-end thread: ${spread.join(' / ')}`);
  }
  return subscribed;
}

/** Herald's open WebSockets per front-end thread (`herald_front_end_connections` of /metrics); empty when unreadable. */
async function frontEndSpread(target: RunningTarget): Promise<number[]> {
  try {
    const text = await (await fetch(`${target.baseUrl}/metrics`)).text();
    return [...text.matchAll(/^herald_front_end_connections\{thread="(\d+)"\} (\d+)/gm)].sort((a, b) => Number(a[1]) - Number(b[1])).map((m) => Number(m[2]));
  } catch {
    return [];
  }
}

/**
 * Turns the progress reports on and sends one unit per keep-alive connection (JITs both sides,
 * opens the sockets), drained before the phases reset the counters. Returns the frames the
 * warm-up should have delivered and how many arrived.
 */
export async function warmUp(ctx: ScenarioContext, shape: TriggerShape): Promise<{ expected: number; received: number }> {
  await ctx.pool.setProgress(true);
  const statuses = await Promise.all(Array.from({ length: ctx.httpConnections }, (_, i) => shape.fire(ctx.trigger, i)));
  const warmOk = statuses.filter((s) => s === 200).length;
  if (warmOk === 0) throw new Error(`warm-up triggers failed: ${ctx.trigger.firstError ?? 'no answer'}`);
  const expected = warmOk * shape.deliveriesPerUnit;
  await drain(ctx, expected);
  const received = ctx.pool.received;
  await sleep(200);
  return { expected, received };
}

async function triggerScenario(ctx: ScenarioContext, sockets: number, plan: ChannelPlan, shape: TriggerShape): Promise<Metric[]> {
  const subscribed = await connectAndSubscribe(ctx, sockets, plan);
  const setup = [metric('subscribed sockets', 'sockets', subscribed.done)];
  shape.subscribers = subscribed.done;
  await warmUp(ctx, shape);

  const max = await maxPhase(ctx, shape);
  const maxRate = (max.unitsOk / max.sendMs) * 1000;
  ctx.log(`  max: ${maxRate.toFixed(0)} ${shape.unitName}/s, ${((max.stats.received / max.totalMs) * 1000).toFixed(0)} delivered/s, loss ${max.expected - max.stats.received}`);
  const moderate = await fixedRatePhase(ctx, shape, shape.moderateRate);
  const halfRate = (ctx.heraldMaxUnitsPerSec ?? maxRate) / 2;
  const half = await fixedRatePhase(ctx, shape, halfRate);
  ctx.log(`  moderate ${shape.moderateRate}/s p99 ${moderate.stats.histogram.summary().p99.toFixed(2)} ms; half-max ${halfRate.toFixed(0)}/s p99 ${half.stats.histogram.summary().p99.toFixed(2)} ms`);
  await ctx.pool.setProgress(false);
  return [
    ...setup,
    ...phaseMetrics('max:', shape, max, true),
    metric(`moderate: rate`, `${shape.unitName}/s`, shape.moderateRate),
    ...phaseMetrics('moderate:', shape, moderate, false),
    metric('half: rate (half of Herald max)', `${shape.unitName}/s`, halfRate),
    ...(ctx.heraldMaxUnitsPerSec === undefined && ctx.target.name === 'ceiling' ? [metric('half: Herald max unknown, used own max', 'flag', 1)] : []),
    ...phaseMetrics('half:', shape, half, false),
  ];
}

/**
 * The broadcast load: C1 triggers to one public channel all `subscribers` sockets are on
 * (`bench-history-broadcast`, a channel whose events are kept with a serial, with `history`).
 */
export function broadcastLoad(subscribers: number, moderateRate: number, history = false): { plan: ChannelPlan; shape: TriggerShape } {
  const channel = history ? 'bench-history-broadcast' : 'bench-broadcast';
  return {
    plan: { kind: 'one', channel },
    shape: {
      fire: (trigger) => trigger.trigger(channel),
      deliveriesPerUnit: subscribers,
      eventsPerUnit: 1,
      subscribers,
      moderateRate,
      unitName: 'triggers',
      unitSingular: 'trigger',
    },
  };
}

/**
 * The unicast load: `channels` public channels with one socket each (socket i on channel i), C1
 * triggers round-robin; unit i goes to channel `channelOf(i)` (default i mod channels).
 */
export function unicastLoad(channels: number, moderateRate: number, channelOf = (i: number): number => i % channels): { plan: ChannelPlan; shape: TriggerShape } {
  return {
    plan: { kind: 'modulo', prefix: 'bench-unicast-', modulo: channels },
    shape: {
      fire: (trigger, i) => trigger.trigger(`bench-unicast-${channelOf(i)}`),
      deliveriesPerUnit: 1,
      eventsPerUnit: 1,
      subscribers: channels,
      moderateRate,
      unitName: 'triggers',
      unitSingular: 'trigger',
    },
  };
}

function broadcast(name: string, size: (s: Sizes) => number, moderateDeliveriesPerSec: number, history = false): Scenario {
  return {
    name,
    description: history
      ? 'one public history channel (apps[].history: events kept with a serial), N subscribers; C1 triggers to it'
      : 'one public channel, N subscribers; C1 triggers to it (broadcast)',
    run: (ctx) => {
      const subscribers = size(ctx.sizes);
      const load = broadcastLoad(subscribers, Math.max(1, Math.round(moderateDeliveriesPerSec / subscribers)), history);
      return triggerScenario(ctx, subscribers, load.plan, load.shape);
    },
  };
}

const unicast: Scenario = {
  name: 'unicast',
  description: 'N public channels × 1 subscriber; C1 triggers round-robin (trigger-bound)',
  run: (ctx) => {
    const load = unicastLoad(ctx.sizes.unicastChannels, 1_000);
    return triggerScenario(ctx, ctx.sizes.unicastChannels, load.plan, load.shape);
  },
};

const BATCH_SIZE = 10;

const batch: Scenario = {
  name: 'batch',
  description: `N public channels × 1 subscriber; C2 batches of ${BATCH_SIZE} events on consecutive channels`,
  run: (ctx) => {
    const channels = ctx.sizes.batchChannels;
    return triggerScenario(ctx, channels, { kind: 'modulo', prefix: 'bench-batch-', modulo: channels }, {
      fire: (trigger, i) => trigger.triggerBatch(Array.from({ length: BATCH_SIZE }, (_, k) => `bench-batch-${(i * BATCH_SIZE + k) % channels}`)),
      deliveriesPerUnit: BATCH_SIZE,
      eventsPerUnit: BATCH_SIZE,
      subscribers: channels,
      moderateRate: 100,
      unitName: 'batches',
      unitSingular: 'batch',
    });
  },
};

const presenceStorm: Scenario = {
  name: 'presence-storm',
  description: 'N members join one presence channel at once (signed auth): time until all have subscription_succeeded',
  run: async (ctx) => {
    const members = ctx.sizes.presenceMembers;
    const connected = await ctx.pool.connect(ctx.target.wsUrl, members, 100);
    if (connected.failed > 0) ctx.log(`  ${connected.failed} connects failed: ${connected.errors.join('; ')}`);
    await ctx.pool.reset();
    const meter = cpuMeter(ctx);
    const wave = await ctx.pool.subscribe({ kind: 'one', channel: 'presence-bench' }, members, { key: BENCH_APP.key, secret: BENCH_APP.secret });
    const cpu = cpuResult(meter);
    if (wave.failed > 0) ctx.log(`  ${wave.failed} joins failed: ${wave.errors.join('; ')}`);
    // Let member_added frames settle before counting them.
    let other = -1;
    for (let i = 0; i < 50; i++) {
      await sleep(200);
      const now = (await ctx.pool.stats()).other;
      if (now === other) break;
      other = now;
    }
    ctx.log(`  ${wave.done} joined in ${wave.elapsedMs.toFixed(0)} ms`);
    return [
      metric('joined', 'members', wave.done, 'higher'),
      metric('failed joins', 'members', wave.failed, 'lower'),
      metric('time until all joined', 'ms', wave.elapsedMs, 'lower'),
      metric('joins/s', '/s', (wave.done / wave.elapsedMs) * 1000, 'higher'),
      metric('member_added frames received', 'frames', other),
      ...waveCpuMetrics(cpu),
      metric('server cpu per join', 'µs', serverCpuPer(cpu, wave.done), 'lower'),
    ];
  },
};

const connectStorm: Scenario = {
  name: 'connect-storm',
  description: 'N WebSocket connects, 500 handshakes in flight: connects/s until all have connection_established',
  run: async (ctx) => {
    const count = ctx.sizes.connectStorm;
    const meter = cpuMeter(ctx);
    const wave = await ctx.pool.connect(ctx.target.wsUrl, count, 250);
    const cpu = cpuResult(meter);
    if (wave.failed > 0) ctx.log(`  ${wave.failed} connects failed: ${wave.errors.join('; ')}`);
    ctx.log(`  ${wave.done} connected in ${wave.elapsedMs.toFixed(0)} ms`);
    return [
      metric('connected', 'sockets', wave.done, 'higher'),
      metric('failed connects', 'sockets', wave.failed, 'lower'),
      metric('connects/s', '/s', (wave.done / wave.elapsedMs) * 1000, 'higher'),
      ...waveCpuMetrics(cpu),
      metric('server cpu per connect', 'µs', serverCpuPer(cpu, wave.done), 'lower'),
    ];
  },
};

const idleMemory: Scenario = {
  name: 'idle-memory',
  description: 'server VmRSS before and after N idle connections, then after each subscribes to its own channel',
  run: async (ctx) => {
    const count = ctx.sizes.idleConnections;
    const pid = ctx.target.pid;
    await sleep(1_000);
    const empty = rssKb(pid);
    const wave = await ctx.pool.connect(ctx.target.wsUrl, count, 100);
    await sleep(2_000);
    const connected = rssKb(pid);
    const subscribed = await ctx.pool.subscribe({ kind: 'modulo', prefix: 'idle-', modulo: count }, 200);
    await sleep(2_000);
    const withSubscription = rssKb(pid);
    const perConnection = ((connected.total - empty.total) * 1024) / Math.max(1, wave.done);
    ctx.log(`  VmRSS empty ${empty.total} KiB, +${wave.done} idle ${connected.total} KiB (${perConnection.toFixed(0)} B each), +1 subscription each ${withSubscription.total} KiB`);
    const per = (after: number, before: number, n: number): number => ((after - before) * 1024) / Math.max(1, n);
    return [
      metric('idle connections', 'sockets', wave.done),
      metric('VmRSS empty server', 'KiB', empty.total, 'lower'),
      metric('VmRSS with idle connections', 'KiB', connected.total, 'lower'),
      metric('VmRSS per idle connection', 'B', perConnection, 'lower'),
      metric('  idle: RssAnon part', 'B', per(connected.anon, empty.anon, wave.done), 'lower'),
      metric('  idle: RssFile part', 'B', per(connected.file, empty.file, wave.done), 'lower'),
      metric('VmRSS per connection + 1 subscription', 'B', per(withSubscription.total, empty.total, subscribed.done), 'lower'),
      metric('  subscribed: RssAnon part', 'B', per(withSubscription.anon, empty.anon, subscribed.done), 'lower'),
      metric('  subscribed: RssFile part', 'B', per(withSubscription.file, empty.file, subscribed.done), 'lower'),
    ];
  },
};

/**
 * pusher-js' HTTP fallback beside WebSockets: N WebSockets and N xhr_streaming sessions held by
 * one server at once, each group on its own public channel; C1 broadcasts to the WebSockets'
 * channel, then to the sessions' (the max phase of `broadcast` for each), and VmRSS before and
 * after each group connects. The ceiling (bare uWS) has no HTTP fallback: not applicable there.
 */
const httpFallback: Scenario = {
  name: 'http-fallback',
  description: 'N WebSockets beside N xhr_streaming sessions (pusher-js HTTP fallback); broadcasts to each group in turn, RSS per session',
  run: async (ctx) => {
    if (ctx.target.name === 'ceiling') return [metric('not applicable: the bare-uWS ceiling has no HTTP fallback', 'flag', 1)];
    const n = ctx.sizes.broadcastSmall;
    const pid = ctx.target.pid;
    await sleep(1_000);
    const empty = rssKb(pid);
    const ws = await ctx.pool.connect(ctx.target.wsUrl, n, 100);
    await sleep(2_000);
    const withWs = rssKb(pid);
    const sessionsUrl = `${ctx.target.baseUrl}/pusher/app/${BENCH_APP.key}?protocol=7&client=js&version=8.6.0`;
    const sessions = await ctx.pool.connect(sessionsUrl, n, 50);
    if (sessions.failed > 0) ctx.log(`  ${sessions.failed} sessions failed: ${sessions.errors.join('; ')}`);
    await sleep(2_000);
    const withSessions = rssKb(pid);
    const subscribed = await ctx.pool.subscribe({ kind: 'by-transport', ws: 'bench-fb-ws', http: 'bench-fb-http' }, 100, { key: BENCH_APP.key, secret: BENCH_APP.secret });
    if (subscribed.failed > 0) ctx.log(`  ${subscribed.failed} subscriptions failed: ${subscribed.errors.join('; ')}`);
    const per = (after: number, before: number, count: number): number => ((after - before) * 1024) / Math.max(1, count);
    const out: Metric[] = [
      metric('WebSockets', 'sockets', ws.done),
      metric('xhr_streaming sessions', 'sessions', sessions.done),
      metric('VmRSS per WebSocket', 'B', per(withWs.total, empty.total, ws.done), 'lower'),
      metric('VmRSS per streaming session', 'B', per(withSessions.total, withWs.total, sessions.done), 'lower'),
    ];
    const figures: Record<string, { rate: number; cpuPerFrame: number; mainPerFrame: number }> = {};
    for (const [label, channel, count] of [['ws', 'bench-fb-ws', ws.done], ['http', 'bench-fb-http', sessions.done]] as const) {
      const shape: TriggerShape = {
        fire: (trigger) => trigger.trigger(channel),
        deliveriesPerUnit: count,
        eventsPerUnit: 1,
        subscribers: count,
        moderateRate: 10,
        unitName: 'triggers',
        unitSingular: 'trigger',
      };
      const warm = await warmUp(ctx, shape);
      // Frames of the warm-up still arriving after its drain gave up are counted in the max phase (negative loss).
      if (warm.received < warm.expected) ctx.log(`  ${label}: warm-up drain gave up at ${warm.received} of ${warm.expected} frames`);
      const max = await maxPhase(ctx, shape);
      await ctx.pool.setProgress(false);
      const delivered = max.stats.received;
      const rate = (delivered / max.totalMs) * 1000;
      const cpuPerFrame = serverCpuPer(max.cpu, delivered);
      const mainPerFrame = serverCpuPer(max.cpu, delivered, 'serverMain');
      figures[label] = { rate, cpuPerFrame, mainPerFrame };
      ctx.log(`  ${label}: ${rate.toFixed(0)} delivered/s, server cpu ${cpuPerFrame.toFixed(2)} µs per frame (main thread ${mainPerFrame.toFixed(2)}), loss ${max.expected - delivered}`);
      out.push(
        metric(`${label}: delivered msgs/s`, '/s', rate, 'higher'),
        metric(`${label}: server cpu per delivered frame`, 'µs', cpuPerFrame, 'lower'),
        metric(`${label}: server main-thread cpu per delivered frame`, 'µs', mainPerFrame, 'lower'),
        metric(`${label}: loss`, 'msgs', max.expected - delivered, 'lower'),
      );
      // A trigger that timed out on the client may still have been delivered (negative loss).
      if (max.unitsFailed > 0) out.push(metric(`${label}: failed triggers`, 'reqs', max.unitsFailed, 'lower'));
    }
    out.push(metric('streaming / WebSocket cpu per frame', 'ratio', figures.http!.cpuPerFrame / Math.max(1e-9, figures.ws!.cpuPerFrame), 'lower'));
    return out;
  },
};

/** Load-client processes of the scale scenario, each connecting from its own loopback address. */
const SCALE_CLIENT_PROCESSES = 4;
const SCALE_SOURCE_ADDRESSES = Array.from({ length: SCALE_CLIENT_PROCESSES }, (_, i) => `127.0.0.${11 + i}`);

/** The sockets a process holds open (its /proc/<pid>/fd entries that are sockets; 0 when unreadable). */
function openSockets(pid: number): number {
  try {
    let n = 0;
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        if (readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith('socket:')) n++;
      } catch {
        // Closed while listing.
      }
    }
    return n;
  } catch {
    return 0;
  }
}

/**
 * The scale scenarios read VmRSS 3 s after everyone left, and again this much later: in a cluster
 * the leave storm grows each node's V8 heap (by ~60 MB at 19,000 leaves with batched Redis
 * changes, ~170 MB when each leave was its own script call), which V8 gives back only with a
 * memory-reducing GC some 10–40 s later (docs/benchmarks.md).
 */
const LEFT_SETTLE_MS = 40_000;

/** Script calls (EVALSHA + EVAL) redis-server ran so far, from its own `INFO commandstats`. */
async function redisScriptCalls(server: RedisServer): Promise<number> {
  const admin = server.client();
  try {
    const info = await admin.info('commandstats');
    let calls = 0;
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)) calls += Number(m[1]);
    return calls;
  } finally {
    await admin.quit();
  }
}

/** VmRSS of several processes together, KiB. */
function rssSumKb(pids: readonly number[]): number {
  return pids.reduce((total, pid) => total + rssKb(pid).total, 0);
}

/**
 * The measurement of `scale` and `scale-2proc`: `count` connections from SCALE_CLIENT_PROCESSES
 * load clients (each from its own loopback source address) to the target's wsUrl, held by the
 * server processes `ctx.serverPids` (default the target's) together, all subscribed to one
 * channel; connect rate, VmRSS per connection (summed over the server processes; `redisPid`'s
 * VmRSS apart), the broadcast max phase, and VmRSS once everyone has left (leak check).
 */
async function measureScale(ctx: ScenarioContext, count: number, redis?: { server: RedisServer; pid: number }, triggerEveryProcess = false): Promise<Metric[]> {
  const redisPid = redis?.pid;
  const pids = ctx.serverPids ?? [ctx.target.pid];
  const pool = new ClientPool(SCALE_CLIENT_PROCESSES);
  const scaled: ScenarioContext = { ...ctx, pool };
  const several = pids.length > 1;
  let others: TriggerClient[] = [];
  try {
    await sleep(1_000);
    const empty = rssSumKb(pids);
    const emptySockets = pids.map(openSockets);
    const redisEmpty = redisPid ? rssKb(redisPid).total : 0;
    const scriptsEmpty = redis ? await redisScriptCalls(redis.server) : 0;
    const meter = cpuMeter(scaled);
    const connected = await pool.connect(ctx.target.wsUrl, count, 250, SCALE_SOURCE_ADDRESSES);
    const connectCpu = cpuResult(meter);
    if (connected.failed > 0) ctx.log(`  ${connected.failed} connects failed: ${connected.errors.join('; ')}`);
    // Where the kernel put the connections (SO_REUSEPORT hashes each one to a listener).
    const sockets = pids.map((pid, i) => openSockets(pid) - emptySockets[i]!);
    const subscribed = await pool.subscribe({ kind: 'one', channel: 'bench-scale' }, 200);
    if (subscribed.failed > 0) ctx.log(`  ${subscribed.failed} subscriptions failed: ${subscribed.errors.join('; ')}`);
    await sleep(2_000);
    const full = rssSumKb(pids);
    const redisFull = redisPid ? rssKb(redisPid).total : 0;
    const scriptsFull = redis ? await redisScriptCalls(redis.server) : 0;
    const perConnection = ((full - empty) * 1024) / Math.max(1, subscribed.done);
    ctx.log(`  ${connected.done} connected at ${((connected.done / connected.elapsedMs) * 1000).toFixed(0)}/s${several ? ` (${sockets.map((n, i) => `process ${i + 1}: ${n}`).join(', ')})` : ''}; VmRSS${several ? ` of the ${pids.length} processes` : ''} ${empty} → ${full} KiB (${perConnection.toFixed(0)} B per connection + subscription)${redisPid ? `; redis-server ${redisEmpty} → ${redisFull} KiB` : ''}`);

    await pool.setProgress(true);
    // Processes that share no state (bare uWS) each get every trigger: ctx.trigger (process 1)
    // counts the unit, which is answered when every process answered.
    if (triggerEveryProcess) others = (ctx.triggerUrls ?? []).slice(1).map((url) => new TriggerClient(url, BENCH_APP, ctx.httpConnections, ctx.payloadBytes ?? 100));
    const shape: TriggerShape = {
      fire: others.length === 0
        ? (trigger) => trigger.trigger('bench-scale')
        : async (trigger) => {
            const statuses = await Promise.all([trigger.trigger('bench-scale'), ...others.map((t) => t.trigger('bench-scale'))]);
            return statuses.find((st) => st !== 200) ?? 200;
          },
      deliveriesPerUnit: subscribed.done,
      eventsPerUnit: 1,
      subscribers: subscribed.done,
      moderateRate: 1,
      unitName: 'triggers',
      unitSingular: 'trigger',
    };
    const warm = await shape.fire(ctx.trigger, 0);
    if (warm !== 200) throw new Error(`warm-up trigger failed: ${ctx.trigger.firstError ?? warm}`);
    await drain(scaled, subscribed.done);
    const max = await maxPhase(scaled, shape);
    await pool.setProgress(false);
    const afterBroadcast = rssSumKb(pids);
    const delivered = (max.stats.received / max.totalMs) * 1000;
    ctx.log(`  broadcast: ${delivered.toFixed(0)} delivered/s (${(delivered / pids.length).toFixed(0)} per server process), loss ${max.expected - max.stats.received}`);

    const scriptsBeforeLeave = redis ? await redisScriptCalls(redis.server) : 0;
    await pool.closeSockets();
    await sleep(3_000);
    const left = rssSumKb(pids);
    const scriptsLeft = redis ? await redisScriptCalls(redis.server) : 0;
    // A second look later: what the leaves' own work (in a cluster, their Redis changes) left behind, settled.
    await sleep(LEFT_SETTLE_MS);
    const settled = rssSumKb(pids);
    const redisLeft = redisPid ? rssKb(redisPid).total : 0;
    let redisKeys = -1;
    if (redis) {
      const admin = redis.server.client();
      redisKeys = await admin.dbsize().finally(() => admin.quit());
    }
    const over = (kb: number): string => `${kb - empty >= 0 ? '+' : ''}${kb - empty} KiB`;
    if (redis) ctx.log(`  redis script calls: ${scriptsFull - scriptsEmpty} for the connects and subscribes, ${scriptsLeft - scriptsBeforeLeave} in the 3 s after everyone left`);
    ctx.log(`  VmRSS after the broadcast ${afterBroadcast} KiB; after everyone left: ${left} KiB (${over(left)} over the empty server${several ? 's' : ''}), ${(3_000 + LEFT_SETTLE_MS) / 1000} s later ${settled} KiB (${over(settled)})${several ? ` [${pids.map((pid) => rssKb(pid).total).join(' + ')}]` : ''}${redis ? `; redis keys left: ${redisKeys}` : ''}`);
    return [
      metric('server processes', 'processes', pids.length),
      metric('connected', 'sockets', connected.done, 'higher'),
      metric('failed connects', 'sockets', connected.failed, 'lower'),
      ...(several ? sockets.map((n, i) => metric(`  on server process ${i + 1}`, 'sockets', n)) : []),
      metric('connects/s', '/s', (connected.done / connected.elapsedMs) * 1000, 'higher'),
      metric('server cpu per connect', 'µs', serverCpuPer(connectCpu, connected.done), 'lower'),
      metric('subscribed', 'sockets', subscribed.done, 'higher'),
      metric('VmRSS empty server', 'KiB', empty, 'lower'),
      metric('VmRSS with everyone subscribed', 'KiB', full, 'lower'),
      metric('VmRSS per connection + 1 subscription', 'B', perConnection, 'lower'),
      ...(redisPid
        ? [
            metric('redis-server VmRSS empty', 'KiB', redisEmpty, 'lower'),
            metric('redis-server VmRSS with everyone subscribed', 'KiB', redisFull, 'lower'),
            metric('redis-server VmRSS per connection', 'B', ((redisFull - redisEmpty) * 1024) / Math.max(1, subscribed.done), 'lower'),
            metric('redis script calls per connect + subscribe', 'calls', (scriptsFull - scriptsEmpty) / Math.max(1, subscribed.done), 'lower'),
          ]
        : []),
      ...phaseMetrics('broadcast:', shape, max, true),
      metric('broadcast: delivered msgs/s per server process', '/s', delivered / pids.length, 'higher'),
      metric('broadcast: server cpu per delivered frame', 'µs', serverCpuPer(max.cpu, max.stats.received), 'lower'),
      metric('VmRSS after the broadcast', 'KiB', afterBroadcast, 'lower'),
      metric('VmRSS after everyone left', 'KiB', left, 'lower'),
      metric('VmRSS after everyone left − empty', 'KiB', left - empty, 'lower'),
      metric(`VmRSS ${(3_000 + LEFT_SETTLE_MS) / 1000} s after everyone left − empty`, 'KiB', settled - empty, 'lower'),
      ...(redis
        ? [
            metric('redis script calls per leave (3 s after the close)', 'calls', (scriptsLeft - scriptsBeforeLeave) / Math.max(1, subscribed.done), 'lower'),
            metric('redis-server VmRSS after everyone left', 'KiB', redisLeft, 'lower'),
            metric('redis keys after everyone left', 'keys', redisKeys, 'lower'),
          ]
        : []),
    ];
  } finally {
    for (const t of others) t.close();
    await pool.closeSockets().catch(() => undefined);
    await pool.dispose();
  }
}

/**
 * As many connections as one server process can hold here (the open-file limit is 20,000 per
 * process and cannot be raised): connect rate, VmRSS per connection holding one subscription,
 * broadcast to all of them (max phase only), and VmRSS once everyone has left (leak check).
 * Clients are spread over SCALE_CLIENT_PROCESSES processes, each from its own 127.0.0.x source
 * address, so neither a client's open-file limit nor the ephemeral ports of one
 * (source, destination) pair run out.
 */
const scale: Scenario = {
  name: 'scale',
  description: `N connections on one server process (${SCALE_CLIENT_PROCESSES} client processes, sources ${SCALE_SOURCE_ADDRESSES[0]}-${SCALE_SOURCE_ADDRESSES.at(-1)}), all on one channel; broadcast; all leave`,
  onlyWhenNamed: true,
  run: (ctx) => measureScale(ctx, ctx.sizes.scaleConnections),
};

/** Herald processes of `scale-2proc`, sharing one port. */
const SCALE_PROCESSES = 2;

/**
 * `scale` past one process' open-file limit: SCALE_PROCESSES Herald processes on ONE port
 * (`"reusePort": true`; the kernel spreads the connections over their listeners) sharing channel
 * state as a cluster over a private redis-server (a free port, never 6379), holding
 * `scale2procConnections` together; the triggers' keep-alive connections land on either process,
 * so a broadcast reaches the other one's subscribers through Redis. The ceiling is as many
 * bare-uWS processes on one port holding the same connections; as they share no state, the
 * bench sends every trigger to each of them (on its private trigger port): the least work that
 * broadcasts to every connection on this machine with this many processes.
 */
function scale2proc(): Scenario {
  let redis: { server: RedisServer; pid: number } | undefined;
  const stopRedis = async (): Promise<void> => {
    await redis?.server.stop();
    redis = undefined;
  };
  return {
    name: 'scale-2proc',
    description: `N connections on ${SCALE_PROCESSES} Herald processes on one port (reusePort, cluster over a private Redis); ceiling: ${SCALE_PROCESSES} bare-uWS processes on one port, each trigger sent to each; all on one channel; broadcast; all leave`,
    onlyWhenNamed: true,
    start: async (target, options) => {
      if (target === 'ceiling') {
        const port = await freePort();
        const ceilings: RunningTarget[] = [];
        try {
          for (let i = 1; i <= SCALE_PROCESSES; i++) ceilings.push(await startTarget('ceiling', { ...options, port, profileLabel: `${options.profileLabel ?? 'scale-2proc'}-process${i}` }));
        } catch (err) {
          await Promise.all(ceilings.map((c) => c.stop()));
          throw err;
        }
        return ceilings;
      }
      const server = new RedisServer();
      await server.start();
      const admin = server.client();
      const info = await admin.info('server').finally(() => admin.quit());
      redis = { server, pid: Number(/process_id:(\d+)/.exec(info)?.[1] ?? 0) };
      const port = await freePort();
      const nodes: RunningTarget[] = [];
      try {
        for (let i = 1; i <= SCALE_PROCESSES; i++) {
          // No push instance: in a cluster each is served by one node (a lease), and push is not measured here.
          const extraConfig = { push: [], reusePort: true, cluster: { redisUrl: server.url, keyPrefix: 'bench:', nodeId: `scale-node${i}` } };
          nodes.push(await startTarget('herald', { ...options, port, extraConfig, profileLabel: `${options.profileLabel ?? 'scale-2proc'}-node${i}` }));
        }
      } catch (err) {
        await Promise.all(nodes.map((n) => n.stop()));
        await stopRedis();
        throw err;
      }
      return nodes;
    },
    afterStop: stopRedis,
    run: (ctx) => {
      const processes = ctx.serverPids?.length ?? 1;
      const count = Math.round((ctx.sizes.scale2procConnections * processes) / SCALE_PROCESSES);
      return ctx.target.name === 'ceiling' ? measureScale(ctx, count, undefined, true) : measureScale(ctx, count, redis);
    },
  };
}

/** Every scenario, in run order (idle-memory first, while the machine is calm). */
export const SCENARIOS: Scenario[] = [
  idleMemory,
  broadcast('broadcast-1k', (s) => s.broadcastSmall, 100_000),
  broadcast('broadcast-10k', (s) => s.broadcastLarge, 100_000),
  broadcast('broadcast-1k-history', (s) => s.broadcastSmall, 100_000, true),
  broadcast('broadcast-10k-history', (s) => s.broadcastLarge, 100_000, true),
  unicast,
  batch,
  presenceStorm,
  httpFallback,
  connectStorm,
  scale,
  scale2proc(),
];
