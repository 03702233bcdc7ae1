/**
 * `npm run bench:large-host [-- [--loaders N] [--subscribers N] [--duration S] [--payload BYTES]
 *  [--target herald|ceiling] [--threads N] [--budget S] [scenario ...]]`
 *
 * One server driven by several load processes at once, as a many-core host would be: for each
 * target (the bare-uWS ceiling, bench/fanout/ceiling-server.ts, then the built Herald as one
 * process, each fresh) and each scenario, N load processes (bench/large-host/load-process.ts,
 * forked; one process holds at most ~20,000 open files, so the subscribers are split over them)
 * each open their subscribers on channels of their own over loopback, then send signed C1
 * triggers together for the duration (closed loop) and count the frames delivered. Prints, per
 * target and scenario, delivered msgs/s and server CPU (all threads, /proc) per delivered
 * message, then a table with Herald/ceiling ratios; writes bench/results/large-host-<timestamp>.json.
 *
 * Scenarios: `broadcast` (per process one channel holding all its subscribers, 8 triggers in
 * flight) and `unicast` (per process one channel per subscriber, 32 in flight). Defaults fit a
 * small machine (2 processes × 500 subscribers, 4 s); a 16-core host takes e.g. `--loaders 8
 * --subscribers 1000 --duration 6`. Bounded: every wait has a deadline and the run stops
 * starting new phases past `--budget` seconds. `--threads N` starts Herald with
 * `frontEndThreads: N` (default: Herald's own default for the host). Figures, never pass/fail.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { LoadMessage, LoadSettings } from './large-host/load-process.js';
import { format, formatTable, machineInfo } from './fanout/report.js';
import { selectScenarios } from './fanout/scenario-args.js';
import { BENCH_APP, startTarget, type RunningTarget, type TargetName } from './fanout/targets.js';
import { processCpuUs } from './proc-stats.js';

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const LOAD_PROCESS = fileURLToPath(new URL('./large-host/load-process.js', import.meta.url));
/** Sockets a load process keeps besides its subscribers (trigger connections, spare). */
const LOAD_PROCESS_SPARE_FILES = 200;
/** Longest wait for the load processes' subscribers, ms per 1,000 subscribers of one process (and at least 30 s). */
const READY_MS_PER_1000 = 30_000;
/** Longest a phase may run past its duration (drain, reports), ms. */
const RESULT_GRACE_MS = 30_000;

interface LargeHostScenario {
  name: string;
  description: string;
  /** Channels per load process for `subscribers` subscribers. */
  channels(subscribers: number): number;
  /** Triggers in flight per load process. */
  concurrency: number;
}

const SCENARIOS: LargeHostScenario[] = [
  { name: 'broadcast', description: 'per load process one channel holding all its subscribers; C1 triggers, 8 in flight per process', channels: () => 1, concurrency: 8 },
  { name: 'unicast', description: 'per load process one channel per subscriber; C1 triggers round-robin, 32 in flight per process', channels: (n) => n, concurrency: 32 },
];

const USAGE = 'usage: npm run bench:large-host -- [--loaders N] [--subscribers N] [--duration S] [--payload BYTES] [--target herald|ceiling] [--threads N] [--budget S] [broadcast|unicast ...]';
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    loaders: { type: 'string', default: '2' },
    subscribers: { type: 'string', default: '500' },
    duration: { type: 'string', default: '4' },
    payload: { type: 'string', default: '100' },
    target: { type: 'string', multiple: true },
    threads: { type: 'string' },
    budget: { type: 'string', default: '300' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

const selected = selectScenarios(SCENARIOS, positionals, values.help!, USAGE);
const loaders = Math.max(1, Math.floor(Number(values.loaders)) || 1);
const subscribers = Math.max(1, Math.floor(Number(values.subscribers)) || 1);
const durationMs = Math.max(0.5, Number(values.duration) || 4) * 1000;
const payloadBytes = Math.max(20, Number(values.payload) || 100);
const budgetMs = Math.max(10, Number(values.budget) || 300) * 1000;
const targets = (values.target?.length ? values.target : ['ceiling', 'herald']) as TargetName[];
/** Herald's frontEndThreads, or undefined for its default. */
const frontEndThreads = values.threads === undefined ? undefined : Math.max(1, Math.floor(Number(values.threads)) || 1);

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** One scenario on one target: the load processes' reports added up, and the server's CPU while they sent. */
interface PhaseResult {
  subscribed: number;
  failedSubscribers: number;
  triggersOk: number;
  triggersFailed: number;
  delivered: number;
  expected: number;
  /** Delivered frames per second, each process's count over its own send-and-drain time, summed. */
  deliveredPerSec: number;
  triggersPerSec: number;
  /** Server CPU (all threads) from `go` until the last process reported, seconds. */
  serverCpuS: number;
  wallS: number;
  cpuUsPerDelivered: number;
  errors: string[];
}

function startLoader(settings: LoadSettings): ChildProcess {
  return fork(LOAD_PROCESS, [JSON.stringify(settings)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
}

/** The next message of a load process, or a rejection when it exits or `ms` pass first. */
function nextMessage(child: ChildProcess, ms: number, what: string): Promise<LoadMessage> {
  return new Promise((resolvePromise, reject) => {
    const done = (): void => {
      clearTimeout(timer);
      child.off('message', onMessage);
      child.off('exit', onExit);
    };
    const onMessage = (message: LoadMessage): void => {
      done();
      resolvePromise(message);
    };
    const onExit = (code: number | null): void => {
      done();
      reject(new Error(`load process exited (${code}) before ${what}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`no ${what} from a load process in ${ms / 1000} s`));
    }, ms);
    child.on('message', onMessage);
    child.once('exit', onExit);
  });
}

async function runPhase(target: RunningTarget, scenario: LargeHostScenario): Promise<PhaseResult> {
  const children = Array.from({ length: loaders }, (_, i) =>
    startLoader({
      wsUrl: target.wsUrl,
      baseUrl: target.baseUrl,
      app: BENCH_APP,
      prefix: `lh-${scenario.name}-${i}-`,
      subscribers,
      channels: scenario.channels(subscribers),
      concurrency: scenario.concurrency,
      durationMs,
      payloadBytes,
    }),
  );
  try {
    const readyMs = Math.max(30_000, (READY_MS_PER_1000 * subscribers) / 1000);
    const ready = await Promise.all(children.map((c) => nextMessage(c, readyMs, 'ready')));
    const errors = ready.flatMap((r) => (r.type === 'ready' && r.firstError ? [r.firstError] : []));
    const results = children.map((c) => nextMessage(c, durationMs + RESULT_GRACE_MS, 'result'));
    const cpuBefore = processCpuUs(target.pid);
    const startedAt = performance.now();
    for (const child of children) child.send('go');
    const reports = await Promise.all(results);
    const serverCpuS = (processCpuUs(target.pid) - cpuBefore) / 1e6;
    const wallS = (performance.now() - startedAt) / 1000;
    const sum = (f: (m: Extract<LoadMessage, { type: 'result' }>) => number): number => reports.reduce((n, m) => n + (m.type === 'result' ? f(m) : 0), 0);
    const delivered = sum((m) => m.delivered);
    for (const m of reports) if (m.type === 'result' && m.firstError) errors.push(m.firstError);
    return {
      subscribed: ready.reduce((n, r) => n + (r.type === 'ready' ? r.subscribed : 0), 0),
      failedSubscribers: ready.reduce((n, r) => n + (r.type === 'ready' ? r.failed : 0), 0),
      triggersOk: sum((m) => m.triggersOk),
      triggersFailed: sum((m) => m.triggersFailed),
      delivered,
      expected: sum((m) => m.expected),
      deliveredPerSec: sum((m) => (m.deliverMs > 0 ? (m.delivered / m.deliverMs) * 1000 : 0)),
      triggersPerSec: sum((m) => (m.sendMs > 0 ? (m.triggersOk / m.sendMs) * 1000 : 0)),
      serverCpuS,
      wallS,
      cpuUsPerDelivered: delivered > 0 ? (serverCpuS * 1e6) / delivered : 0,
      errors: errors.slice(0, 3),
    };
  } finally {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  }
}

async function main(): Promise<void> {
  const machine = machineInfo();
  const deadline = Date.now() + budgetMs;
  log(`machine: ${machine.nproc} cores (${machine.cpuModel}), ${machine.memGiB} GiB, node ${machine.node}, load ${machine.loadAverageAtStart}`);
  log(`${loaders} load processes × ${subscribers} subscribers, ${durationMs / 1000} s per phase, ${payloadBytes} B event data; Herald frontEndThreads ${frontEndThreads ?? 'default'}; open files: ${machine.openFilesSoft} per process`);
  const soft = Number(machine.openFilesSoft);
  if (Number.isFinite(soft) && subscribers + LOAD_PROCESS_SPARE_FILES > soft) {
    throw new Error(`${subscribers} subscribers do not fit one load process (open files limit ${soft}): use more --loaders with fewer --subscribers each`);
  }
  if (Number.isFinite(soft) && loaders * subscribers + LOAD_PROCESS_SPARE_FILES > soft) {
    log(`WARNING: the server needs ~${loaders * subscribers} sockets but may open ${soft} files; raise the limit (ulimit -n) or expect failed connects`);
  }
  const results: Record<string, Record<string, PhaseResult | { error: string }>> = {};
  for (const name of targets) {
    results[name] = {};
    for (const scenario of selected) {
      if (Date.now() > deadline) {
        log(`${scenario.name} on ${name}: skipped (past --budget)`);
        continue;
      }
      let target: RunningTarget | undefined;
      try {
        target = await startTarget(name, frontEndThreads === undefined ? {} : { extraConfig: { frontEndThreads } });
        const r = await runPhase(target, scenario);
        results[name][scenario.name] = r;
        log(
          `${scenario.name} on ${name}: ${format(r.deliveredPerSec)} delivered msgs/s, ${format(r.triggersPerSec)} triggers/s, ` +
            `server CPU ${format(r.serverCpuS)} s (${format(r.cpuUsPerDelivered)} µs per delivered), loss ${r.expected - r.delivered}` +
            `${r.triggersFailed ? `, ${r.triggersFailed} failed triggers` : ''}${r.failedSubscribers ? `, ${r.failedSubscribers} subscribers failed` : ''}${r.errors.length ? ` (${r.errors[0]})` : ''}`,
        );
      } catch (err) {
        const error = err instanceof Error ? err.message : String(err);
        results[name][scenario.name] = { error };
        log(`${scenario.name} on ${name}: ERROR ${error.split('\n')[0]}`);
      } finally {
        await target?.stop();
      }
    }
  }
  log('');
  log(renderTable(results));
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const dir = join(REPO_ROOT, 'bench/results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `large-host-${stamp}.json`);
  writeFileSync(file, JSON.stringify({ startedAt: new Date().toISOString(), command: process.argv.slice(2).join(' '), machine, options: { loaders, subscribers, durationMs, payloadBytes, targets, frontEndThreads }, results }, null, 2));
  log('');
  log(`results: ${file}`);
}

/** Per scenario: the figures of each target and Herald/ceiling where both ran. */
function renderTable(results: Record<string, Record<string, PhaseResult | { error: string }>>): string {
  const rows: string[][] = [['scenario / figure', 'unit', 'herald', 'ceiling', 'herald/ceiling']];
  const figures: [string, string, (r: PhaseResult) => number, boolean][] = [
    ['delivered msgs/s', '/s', (r) => r.deliveredPerSec, true],
    ['triggers/s', '/s', (r) => r.triggersPerSec, true],
    ['server CPU per delivered message', 'µs', (r) => r.cpuUsPerDelivered, true],
    ['server CPU', '% core', (r) => (r.wallS > 0 ? (r.serverCpuS / r.wallS) * 100 : 0), false],
    ['loss', 'msgs', (r) => r.expected - r.delivered, false],
    ['subscribed', 'sockets', (r) => r.subscribed, false],
  ];
  for (const scenario of selected) {
    const herald = results.herald?.[scenario.name];
    const ceiling = results.ceiling?.[scenario.name];
    const ok = (r: PhaseResult | { error: string } | undefined): PhaseResult | undefined => (r && !('error' in r) ? r : undefined);
    rows.push([scenario.name, '', herald && 'error' in herald ? 'ERROR' : '', ceiling && 'error' in ceiling ? 'ERROR' : '', '']);
    for (const [name, unit, value, ratio] of figures) {
      const h = ok(herald) && value(ok(herald)!);
      const c = ok(ceiling) && value(ok(ceiling)!);
      rows.push([`  ${name}`, unit, format(h), format(c), ratio && h !== undefined && c ? (h / c).toFixed(2) : '']);
    }
  }
  return formatTable(rows);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:large-host failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
