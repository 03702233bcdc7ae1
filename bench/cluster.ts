/**
 * `npm run bench:cluster [-- [--quick] [--clients N] [--http-connections N] [--payload BYTES]
 *  [--repeat N] [--cpu-prof] [broadcast|unicast ...]]`
 *
 * Two Herald nodes sharing channels over Redis against one Herald node, in the same run (issue 14,
 * "Performance"). Starts its own `redis-server` on a free port (never 6379); for each scenario,
 * first one node with no `cluster` block (the reference), then two nodes with
 * `"cluster": {"redisUrl": <that redis>, "keyPrefix": "bench:", "nodeTimeoutMs": 10000}`, each
 * fresh, each with its own port and data dir. The load clients (bench/fanout/load-client.ts,
 * forked) connect process i to node i mod 2, so the subscribers are split over both nodes; every
 * trigger goes to the first node, so half the deliveries cross Redis. Each scenario measures p99
 * latency at LATENCY_RATE triggers/s, then the max rate (the fan-out bench's closed loop), and
 * counts every expected delivery that did not arrive (loss) in every phase, per node.
 *
 * Prints scenario | single node | cluster (2 nodes) | ratio with the issue's targets, then every
 * figure, and writes bench/results/cluster-<timestamp>.json. With `--repeat N`, each scenario runs
 * N times on each deployment (single, cluster, single, ...): figures are medians over the runs,
 * the summary's ratios are the medians of the per-run ratios, and their ranges are printed.
 * Figures, never pass/fail.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { RedisServer } from '../test/helpers/redis-server.js';
import { split } from './fanout/client-pool.js';
import type { ChannelPlan } from './fanout/client-messages.js';
import { comparisonRows, format, formatTable, machineInfo, median as medianOf, medianOutcome, type MachineInfo, type TargetOutcome } from './fanout/report.js';
import {
  broadcastLoad, connectAndSubscribe, fixedRatePhase, maxPhase, metric, phaseMetrics, QUICK_SIZES, FULL_SIZES, unicastLoad, warmUp,
  type Metric, type PhaseResult, type ScenarioContext, type Sizes, type TriggerShape,
} from './fanout/scenarios.js';
import { runScenario } from './fanout/run-scenario.js';
import { selectScenarios } from './fanout/scenario-args.js';
import { startTarget, type RunningTarget } from './fanout/targets.js';
import { LatencyHistogram, type LatencySummary } from './fanout/latency-histogram.js';
import { CpuMeter, processCpuUs } from './proc-stats.js';
import { measurePubSubHop } from './cluster/pubsub-hop.js';

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** The rate of the latency phase, triggers/s (the issue's "p99 latency at 50 triggers/s"). */
const LATENCY_RATE = 50;
/** Nodes of the cluster deployment. */
const CLUSTER_NODES = 2;
const KEY_PREFIX = 'bench:';
const NODE_TIMEOUT_MS = 10_000;
/** A scenario on one deployment is abandoned (and reported as an error) after this long. */
const SCENARIO_TIMEOUT_MS = { quick: 120_000, full: 300_000 };

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    clients: { type: 'string', default: '2' },
    'http-connections': { type: 'string', default: '32' },
    payload: { type: 'string', default: '100' },
    repeat: { type: 'string', default: '1' },
    'cpu-prof': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

type Deployment = 'single' | 'cluster';
const DEPLOYMENT_LABEL: Record<Deployment, string> = { single: 'single node', cluster: `cluster (${CLUSTER_NODES} nodes)` };

interface ClusterScenario {
  name: string;
  description: string;
  sockets(sizes: Sizes): number;
  load(sizes: Sizes): { plan: ChannelPlan; shape: TriggerShape };
  /** Deliveries `units` triggers (numbered from 0) owe each node's subscribers. */
  expectedByNode(units: number, subscribersByNode: readonly number[]): number[];
}

/**
 * Unit i → a channel on node i mod CLUSTER_NODES, round-robin within the node: every phase,
 * however short, sends half its unicast triggers across Redis (socket i is channel i, and the
 * load-client processes hold contiguous socket ranges, process p on node p mod CLUSTER_NODES).
 */
function interleavedOverNodes(channels: number): (i: number) => number {
  const byNode: number[][] = Array.from({ length: CLUSTER_NODES }, () => []);
  let next = 0;
  split(channels, clientProcesses).forEach((share, p) => {
    for (let k = 0; k < share; k++) byNode[p % CLUSTER_NODES]!.push(next++);
  });
  const nodes = byNode.filter((list) => list.length > 0);
  return (i) => {
    const list = nodes[i % nodes.length]!;
    return list[Math.floor(i / nodes.length) % list.length]!;
  };
}

/** The issue's counts in both run lengths: --quick shortens the phases, not the load. */
const SCENARIOS: ClusterScenario[] = [
  {
    name: 'broadcast',
    description: 'one public channel, 1,000 subscribers split over the nodes; C1 triggers to the first node',
    sockets: (s) => s.broadcastSmall,
    load: (s) => broadcastLoad(s.broadcastSmall, LATENCY_RATE),
    expectedByNode: (units, subscribers) => subscribers.map((n) => units * n),
  },
  {
    name: 'unicast',
    description: '1,000 public channels × 1 subscriber, split over the nodes; C1 triggers round-robin to the first node',
    sockets: (s) => s.unicastChannels,
    load: (s) => unicastLoad(s.unicastChannels, LATENCY_RATE, interleavedOverNodes(s.unicastChannels)),
    // Unit i goes to node i mod the nodes (interleavedOverNodes).
    expectedByNode: (units, subscribers) => subscribers.map((_, j) => Math.floor(units / subscribers.length) + (j < units % subscribers.length ? 1 : 0)),
  },
];

const selected = selectScenarios(SCENARIOS, positionals, values.help!, 'usage: npm run bench:cluster -- [--quick] [--clients N] [--http-connections N] [--payload BYTES] [--repeat N] [--cpu-prof] [scenario ...]');
const quick = values.quick!;
const sizes: Sizes = { ...(quick ? QUICK_SIZES : FULL_SIZES), broadcastSmall: 1_000, unicastChannels: 1_000, phaseMs: quick ? 2_000 : 5_000 };
/** The latency phase is longer than the max phase: at 50/s a unicast p99 needs a few hundred samples. */
const latencyPhaseMs = quick ? 4_000 : 10_000;
const clientProcesses = Math.max(CLUSTER_NODES, Number(values.clients));
const httpConnections = Math.max(1, Number(values['http-connections']));
const payloadBytes = Math.max(20, Number(values.payload));
const repeat = Math.max(1, Math.floor(Number(values.repeat)) || 1);
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(REPO_ROOT, 'bench/results');
const cpuProfDir = values['cpu-prof'] ? join(resultsDir, `profiles-cluster-${stamp}`) : undefined;

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

interface ClusterScenarioRecord {
  name: string;
  description: string;
  /** With --repeat N > 1, each figure's median over the runs; otherwise the one run. */
  single?: TargetOutcome;
  cluster?: TargetOutcome;
  /** With --repeat N > 1: every run, single node then cluster each time. */
  runs?: { single?: TargetOutcome; cluster?: TargetOutcome }[];
}

interface ClusterRunRecord {
  startedAt: string;
  command: string;
  quick: boolean;
  options: Record<string, unknown>;
  machine: MachineInfo;
  loadAverageAtEnd?: string;
  /** One Redis pub/sub hop at LATENCY_RATE msgs/s between two processes, before and after the scenarios. */
  pubSubHop: LatencySummary[];
  scenarios: ClusterScenarioRecord[];
}

function loadAverage(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return '?';
  }
}

/**
 * Starts the deployment's Herald processes. No push instance: in a cluster each instance is
 * served by one node (a lease in Redis), and push is not what this bench measures.
 */
async function startDeployment(kind: Deployment, scenario: string, redis: RedisServer): Promise<RunningTarget[]> {
  if (kind === 'single') {
    return [await startTarget('herald', { extraConfig: { push: [] }, cpuProfDir, profileLabel: `${scenario}-single` })];
  }
  const cluster = { redisUrl: redis.url, keyPrefix: KEY_PREFIX, nodeTimeoutMs: NODE_TIMEOUT_MS };
  const nodes: RunningTarget[] = [];
  try {
    for (let i = 1; i <= CLUSTER_NODES; i++) {
      const extraConfig = { push: [], cluster: { ...cluster, nodeId: `bench-node${i}` } };
      nodes.push(await startTarget('herald', { extraConfig, cpuProfDir, profileLabel: `${scenario}-cluster-node${i}` }));
    }
  } catch (err) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw err;
  }
  return nodes;
}

/** Sums `values[i]` per node, process i having connected to node i mod `nodes`. */
function perNode(values: readonly number[], nodes: number): number[] {
  const sums = new Array<number>(nodes).fill(0);
  values.forEach((v, i) => (sums[i % nodes]! += v));
  return sums;
}

/** The latency histogram of each node's subscribers. */
function histogramsByNode(phase: PhaseResult, nodes: number): LatencyHistogram[] {
  const histograms = Array.from({ length: nodes }, () => new LatencyHistogram());
  phase.stats.histogramByProcess.forEach((h, i) => histograms[i % nodes]!.merge(h));
  return histograms;
}

/** Per node of the cluster: missing deliveries and latency of its subscribers in one phase. */
function byNode(prefix: string, phase: PhaseResult, nodes: number, expectedByNode: readonly number[]): Metric[] {
  const received = perNode(phase.stats.receivedByProcess, nodes);
  const histograms = histogramsByNode(phase, nodes);
  return expectedByNode.flatMap((expected, j) => {
    const who = `${prefix} node ${j + 1}${j === 0 ? ' (trigger node)' : ' (via Redis)'}`;
    const latency = histograms[j]!.summary();
    return [
      metric(`${who} loss`, 'msgs', expected - received[j]!, 'lower'),
      metric(`${who} latency p50`, 'ms', latency.p50, 'lower'),
      metric(`${who} latency p99`, 'ms', latency.p99, 'lower'),
    ];
  });
}

/** The run's redis-server. */
interface BenchRedis {
  server: RedisServer;
  pid: number;
}

/** Calls per command since the last CONFIG RESETSTAT, from INFO commandstats. */
/** What this bench's own admin connections send (not counted against the nodes). */
const ADMIN_COMMANDS = /^(config|info|hello|quit|client)/;

async function redisCommandCalls(redis: BenchRedis): Promise<Map<string, number>> {
  const admin = redis.server.client();
  const text = await admin.info('commandstats').finally(() => admin.quit());
  const calls = new Map<string, number>();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(m[1]!, Number(m[2]));
  return calls;
}

/**
 * Subscribes, warms up, then three phases: LATENCY_RATE triggers/s (latency), the closed-loop
 * max, and `sameRate` triggers/s (half the single node's max, so both deployments' CPU per
 * trigger is compared at one rate: uWS batches more frames per socket write at higher rates,
 * so CPU per trigger measured at two different max rates is not comparable).
 */
async function measure(ctx: ScenarioContext, scenario: ClusterScenario, nodes: number, redis: BenchRedis, sameRate: number | undefined): Promise<Metric[]> {
  const { plan, shape } = scenario.load(ctx.sizes);
  const subscribed = await connectAndSubscribe(ctx, scenario.sockets(ctx.sizes), plan);
  const subscribersByNode = perNode(subscribed.doneByProcess, nodes);
  ctx.log(`  ${subscribed.done} subscribed (${subscribersByNode.map((n, j) => `node ${j + 1}: ${n}`).join(', ')})`);
  const warm = await warmUp(ctx, shape);
  const admin = redis.server.client();
  await admin.config('RESETSTAT').finally(() => admin.quit());
  // CPU over the measured phases together: redis-server and each node.
  const cpu = new CpuMeter(() => [redis.pid, ...(ctx.serverPids ?? [])].map(processCpuUs));
  const latency = await fixedRatePhase({ ...ctx, sizes: { ...ctx.sizes, phaseMs: latencyPhaseMs } }, shape, LATENCY_RATE);
  ctx.log(`  ${LATENCY_RATE} triggers/s: p99 ${latency.stats.histogram.summary().p99.toFixed(2)} ms, loss ${latency.expected - latency.stats.received}`);
  const max = await maxPhase(ctx, shape);
  ctx.log(`  max: ${((max.unitsOk / max.sendMs) * 1000).toFixed(0)} triggers/s, ${((max.stats.received / max.totalMs) * 1000).toFixed(0)} delivered/s, loss ${max.expected - max.stats.received}`);
  const rate = sameRate ?? (max.unitsOk / max.sendMs) * 500;
  const same = await fixedRatePhase(ctx, shape, rate);
  ctx.log(`  ${rate.toFixed(0)} triggers/s (half the single node's max): p99 ${same.stats.histogram.summary().p99.toFixed(2)} ms, loss ${same.expected - same.stats.received}`);
  await ctx.pool.setProgress(false);
  const [redisPercent, ...nodePercent] = cpu.percent();
  const redisCalls = [...(await redisCommandCalls(redis))].filter(([command]) => !ADMIN_COMMANDS.test(command)).sort((a, b) => b[1] - a[1]);
  const phases: [string, PhaseResult][] = [[`latency ${LATENCY_RATE}/s:`, latency], ['max:', max], ['same rate:', same]];
  const triggers = phases.reduce((n, [, p]) => n + p.unitsOk, 0);
  const callsPerTrigger = (n: number): number => (triggers ? n / triggers : 0);
  if (nodes > 1) ctx.log(`  redis commands per trigger: ${redisCalls.map(([c, n]) => `${c} ${callsPerTrigger(n).toFixed(2)}`).join(', ') || 'none'}`);

  const expected = warm.expected + phases.reduce((n, [, p]) => n + p.expected, 0);
  const received = warm.received + phases.reduce((n, [, p]) => n + p.stats.received, 0);
  const out: Metric[] = [
    metric('subscribed sockets', 'sockets', subscribed.done),
    ...phaseMetrics(`latency ${LATENCY_RATE}/s:`, shape, latency, false),
    ...phaseMetrics('max:', shape, max, true),
    metric('same rate: rate (half the single node max)', 'triggers/s', rate),
    ...phaseMetrics('same rate:', shape, same, true),
    metric('cpu redis-server (measured phases)', '% core', redisPercent!),
    metric('redis commands per trigger (measured phases)', 'calls', callsPerTrigger(redisCalls.reduce((n, [, c]) => n + c, 0)), 'lower'),
    ...redisCalls.slice(0, 4).map(([command, n]) => metric(`  redis ${command} per trigger`, 'calls', callsPerTrigger(n))),
    ...(nodes > 1 ? nodePercent.map((p, j) => metric(`cpu node ${j + 1} (measured phases)`, '% core', p)) : []),
    metric('all phases: expected deliveries', 'msgs', expected),
    metric('all phases: loss', 'msgs', expected - received, 'lower'),
  ];
  if (nodes > 1) {
    // Where the loss is: each node's subscribers, in each measured phase.
    for (const [prefix, phase] of phases) {
      out.push(...byNode(prefix, phase, nodes, scenario.expectedByNode(phase.unitsOk, subscribersByNode)));
    }
  }
  return out;
}

function runOne(scenario: ClusterScenario, kind: Deployment, redis: BenchRedis, sameRate?: number): Promise<TargetOutcome> {
  return runScenario({
    label: `${scenario.name} on ${DEPLOYMENT_LABEL[kind]}`,
    start: () => startDeployment(kind, scenario.name, redis.server),
    measure: (servers, pool, trigger) => {
      const ctx: ScenarioContext = {
        target: servers[0]!,
        subscriberUrls: servers.map((s) => s.wsUrl),
        serverPids: servers.map((s) => s.pid),
        pool,
        trigger,
        sizes,
        httpConnections,
        log,
      };
      return measure(ctx, scenario, servers.length, redis, sameRate);
    },
    // The next deployment starts on an empty Redis, whatever a node left behind.
    afterStop: async () => {
      const admin = redis.server.client();
      await admin.flushall().finally(() => admin.quit());
    },
    clientProcesses,
    httpConnections,
    payloadBytes,
    timeoutMs: quick ? SCENARIO_TIMEOUT_MS.quick : SCENARIO_TIMEOUT_MS.full,
    log,
  });
}

const value = (outcome: TargetOutcome | undefined, name: string): number | undefined => outcome?.metrics?.find((m) => m.name === name)?.value;

interface Target {
  text: string;
  met(cluster: number, ratio: number): boolean;
  /** A figure of the cluster run that makes the verdict moot when not 0 (a p99 of the deliveries that arrived). */
  mootUnless0?: string;
}

/** One summary row: the figure on both deployments, cluster/single, and the issue's target with its verdict. */
function summaryRow(record: ClusterScenarioRecord | undefined, label: string, name: string, target?: Target, ratioShown = true): string[] {
  const single = value(record?.single, name);
  const cluster = value(record?.cluster, name);
  const perRun = (record?.runs ?? []).flatMap((r) => {
    const s = value(r.single, name);
    const c = value(r.cluster, name);
    return s !== undefined && c !== undefined && s !== 0 ? [c / s] : [];
  });
  // Repeated: the median of the per-run ratios (each run's pair saw the same machine), with their range.
  const ratio = perRun.length > 1 ? medianOf(perRun) : single !== undefined && cluster !== undefined && single !== 0 ? cluster / single : undefined;
  const range = perRun.length > 1 && ratioShown ? ` (${Math.min(...perRun).toFixed(2)}–${Math.max(...perRun).toFixed(2)})` : '';
  let verdict = '';
  if (target) {
    const moot = target.mootUnless0 ? value(record?.cluster, target.mootUnless0) : 0;
    if (single === undefined || cluster === undefined) verdict = `${target.text}: not measured`;
    else if (moot) verdict = `${target.text}: moot, ${format(moot)} lost in the phase`;
    else verdict = `${target.text}: ${target.met(cluster, ratio ?? Number.NaN) ? 'met' : 'MISSED'}`;
  }
  return [label, format(single), format(cluster), ratio === undefined || !ratioShown ? '' : ratio.toFixed(2) + range, verdict];
}

function renderSummary(run: ClusterRunRecord): string {
  const find = (name: string): ClusterScenarioRecord | undefined => run.scenarios.find((s) => s.name === name);
  const latency = `latency ${LATENCY_RATE}/s:`;
  const atLeast08: Target = { text: '≥ 0.80×', met: (_, r) => r >= 0.8 };
  const atMost2: Target = { text: '≤ 2.00×', met: (_, r) => r <= 2, mootUnless0: `${latency} loss` };
  const noLoss: Target = { text: '0', met: (c) => c === 0 };
  const rows: string[][] = [
    ['scenario', DEPLOYMENT_LABEL.single, DEPLOYMENT_LABEL.cluster, 'ratio', 'target (cluster)'],
    summaryRow(find('broadcast'), 'broadcast (1,000 subscribers): delivered msgs/s', 'max: delivered msgs/s', atLeast08),
    summaryRow(find('broadcast'), '  triggers/s', 'max: triggers/s'),
    summaryRow(find('unicast'), 'unicast (1,000 channels): triggers/s', 'max: triggers/s'),
    summaryRow(find('broadcast'), `latency p99 at ${LATENCY_RATE} triggers/s, broadcast (ms)`, `${latency} latency p99`, atMost2),
    summaryRow(find('unicast'), `latency p99 at ${LATENCY_RATE} triggers/s, unicast (ms)`, `${latency} latency p99`, atMost2),
    summaryRow(find('broadcast'), 'loss, broadcast (msgs, all phases)', 'all phases: loss', noLoss, false),
    summaryRow(find('broadcast'), '  of expected deliveries', 'all phases: expected deliveries', undefined, false),
    summaryRow(find('unicast'), 'loss, unicast (msgs, all phases)', 'all phases: loss', noLoss, false),
    summaryRow(find('unicast'), '  of expected deliveries', 'all phases: expected deliveries', undefined, false),
    summaryRow(find('broadcast'), 'server cpu per trigger at ½ single max, broadcast (µs, all nodes)', 'same rate: server cpu per trigger'),
    summaryRow(find('unicast'), 'server cpu per trigger at ½ single max, unicast (µs, all nodes)', 'same rate: server cpu per trigger'),
    summaryRow(find('unicast'), '  main thread(s) only, unicast (µs)', 'same rate: server main-thread cpu per trigger'),
  ];
  return formatTable(rows, 1);
}

function renderDetails(run: ClusterRunRecord): string {
  const rows: string[][] = [['scenario / figure', 'unit', DEPLOYMENT_LABEL.single, DEPLOYMENT_LABEL.cluster, 'cluster/single']];
  const repeated = run.scenarios.some((s) => (s.runs?.length ?? 0) > 1);
  if (repeated) rows[0]!.push('per-run ratios');
  for (const s of run.scenarios) {
    const runs = repeated ? (s.runs ?? []).map((r) => ({ left: r.single, right: r.cluster })) : undefined;
    const block = comparisonRows(s.name, s.single, s.cluster, 'right/left', runs);
    rows.push(...(repeated && (s.runs?.length ?? 0) <= 1 ? block.map((r) => [...r, '']) : block));
  }
  const errors = run.scenarios.flatMap((s) =>
    (s.runs ?? [s]).flatMap((r, i) =>
      (['single', 'cluster'] as const).flatMap((k) => (r[k]?.error ? [`  ${s.name}${s.runs ? ` (run ${i + 1})` : ''} on ${DEPLOYMENT_LABEL[k]}: ${r[k]!.error!.split('\n')[0]}`] : [])),
    ),
  );
  return [formatTable(rows), ...(errors.length ? ['', 'errors:', ...errors] : [])].join('\n');
}

async function main(): Promise<void> {
  const machine = machineInfo();
  log(`machine: ${machine.nproc} cores (${machine.cpuModel}), ${machine.memGiB} GiB, node ${machine.node}, load ${machine.loadAverageAtStart}`);
  log(`${quick ? 'QUICK' : 'FULL'} run${repeat > 1 ? `, each scenario ${repeat} times per deployment` : ''}; ${clientProcesses} load-client processes (process i on node i mod ${CLUSTER_NODES}), ${httpConnections} keep-alive trigger connections to node 1, ${payloadBytes} B event data`);
  const redis = new RedisServer();
  try {
    await redis.start();
  } catch (err) {
    throw new Error(`could not start redis-server (is it installed?): ${String(err)}`);
  }
  const info = redis.client();
  const serverInfo = await info.info('server').finally(() => info.quit());
  const redisPid = Number(/process_id:(\d+)/.exec(serverInfo)?.[1] ?? 0);
  log(`redis-server ${/redis_version:(\S+)/.exec(serverInfo)?.[1] ?? '?'} on ${redis.url} (pid ${redisPid}), keyPrefix ${KEY_PREFIX}`);

  const run: ClusterRunRecord = {
    startedAt: new Date().toISOString(),
    command: process.argv.slice(2).join(' '),
    quick,
    options: { clientProcesses, httpConnections, payloadBytes, repeat, sizes, latencyPhaseMs, latencyRate: LATENCY_RATE, nodes: CLUSTER_NODES, cpuProfDir },
    machine,
    pubSubHop: [],
    scenarios: [],
  };
  const hop = async (when: string): Promise<void> => {
    const summary = await measurePubSubHop(redis.url, LATENCY_RATE, latencyPhaseMs, payloadBytes);
    run.pubSubHop.push(summary);
    log(`bare Redis pub/sub hop ${when}, ${LATENCY_RATE} msgs/s: p50 ${summary.p50.toFixed(2)} ms, p99 ${summary.p99.toFixed(2)} ms, max ${summary.max.toFixed(2)} ms`);
  };
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `cluster-${stamp}.json`);
  try {
    await hop('before the scenarios');
    for (const scenario of selected) {
      const record: ClusterScenarioRecord = { name: scenario.name, description: scenario.description };
      run.scenarios.push(record);
      const runs: NonNullable<ClusterScenarioRecord['runs']> = [];
      for (let i = 0; i < repeat; i++) {
        if (repeat > 1) log(`${scenario.name}: run ${i + 1} of ${repeat}`);
        const single = await runOne(scenario, 'single', { server: redis, pid: redisPid });
        const cluster = await runOne(scenario, 'cluster', { server: redis, pid: redisPid }, value(single, 'same rate: rate (half the single node max)'));
        runs.push({ single, cluster });
        if (repeat > 1) record.runs = runs;
        record.single = runs.length === 1 ? single : medianOutcome(runs.map((r) => r.single!));
        record.cluster = runs.length === 1 ? cluster : medianOutcome(runs.map((r) => r.cluster!));
        // Written after every run, so a run cut short keeps what it measured.
        writeFileSync(file, JSON.stringify(run, null, 2));
      }
    }
    await hop('after the scenarios');
  } finally {
    await redis.stop();
  }
  run.loadAverageAtEnd = loadAverage();
  writeFileSync(file, JSON.stringify(run, null, 2));
  log('');
  log(renderSummary(run));
  log(`reference, one bare Redis pub/sub hop between two processes at ${LATENCY_RATE} msgs/s (the floor under a cross-node delivery on this box): ` +
    run.pubSubHop.map((h) => `p50 ${format(h.p50)} / p99 ${format(h.p99)} ms`).join(' before, ') + ' after');
  log('');
  log(renderDetails(run));
  log('');
  log(`load average: ${machine.loadAverageAtStart} at start, ${run.loadAverageAtEnd} at end`);
  log(`results: ${file}`);
  if (cpuProfDir) log(`cpu profiles: ${cpuProfDir}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:cluster failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
