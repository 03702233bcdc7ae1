/**
 * `npm run bench:fanout [-- [--quick] [--target herald|ceiling] [--threads N] [--against-threads M] [--clients N]
 *  [--http-connections N] [--payload BYTES] [--repeat N] [--cpu-prof] [--watch-dashboard] [scenario ...]]`
 * (`scale` and `scale-2proc` run only when named: `npm run bench:fanout -- scale scale-2proc`)
 *
 * Whole-system fan-out benchmark over loopback: for each scenario, starts the built Herald and
 * then the bare-uWS ceiling (bench/fanout/ceiling-server.ts), each fresh, and drives both with
 * the same load clients (bench/fanout/load-client.ts, forked) and the same signed keep-alive
 * triggers (sent from this process). Prints a table with Herald/ceiling ratios and writes
 * bench/results/<timestamp>.json. With `--repeat N`, each scenario runs N times on each target
 * (Herald, then the ceiling, then Herald again, ...) and the table shows the median of each
 * figure and the range of the per-run ratios: on a shared machine one run's ratio moves with
 * whatever else runs at that moment. Figures, never pass/fail; the exit code is 0 unless the
 * benchmark itself broke. Scenario names: see SCENARIOS in bench/fanout/scenarios.ts.
 * `--threads N` starts Herald with `frontEndThreads: N` (N threads serve the port; the load
 * clients' many sockets spread over them by SO_REUSEPORT); without it Herald takes its default.
 * The ceiling is one bare-uWS thread either way. `--against-threads M` puts Herald with
 * `frontEndThreads: M` where the ceiling was (the table's right column, driven at the left's
 * half-max rate like the ceiling), so N threads compare with M in one run: read the fixed-rate
 * phases (`moderate`, `half`) for the cost of the threads at one rate, the max phase for what
 * each sustains. Server CPU counts every thread of the process;
 * each trigger phase also logs the server's CPU per unit by thread (`main` is the thread whose id
 * is the pid, the others by thread id from /proc/<pid>/task).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { machineInfo, medianOutcome, renderTable, type RunRecord, type ScenarioRecord, type TargetOutcome } from './fanout/report.js';
import { FULL_SIZES, QUICK_SIZES, SCENARIOS, type Scenario, type Sizes } from './fanout/scenarios.js';
import { runScenario } from './fanout/run-scenario.js';
import { selectScenarios } from './fanout/scenario-args.js';
import { startTarget, type TargetName } from './fanout/targets.js';

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** A scenario on one target is abandoned (and reported as an error) after this long. */
const SCENARIO_TIMEOUT_MS = { quick: 120_000, full: 300_000 };

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    target: { type: 'string', multiple: true },
    threads: { type: 'string' },
    'against-threads': { type: 'string' },
    clients: { type: 'string', default: '2' },
    'http-connections': { type: 'string', default: '32' },
    payload: { type: 'string', default: '100' },
    repeat: { type: 'string', default: '1' },
    'cpu-prof': { type: 'boolean', default: false },
    'watch-dashboard': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

const selected = selectScenarios(SCENARIOS, positionals, values.help!, 'usage: npm run bench:fanout -- [--quick] [--target herald|ceiling] [--threads N] [--against-threads M] [--clients N] [--http-connections N] [--payload BYTES] [--repeat N] [--cpu-prof] [--watch-dashboard] [scenario ...]');
const targets = (values.target?.length ? values.target : ['herald', 'ceiling']) as TargetName[];
const quick = values.quick!;
const sizes: Sizes = quick ? QUICK_SIZES : FULL_SIZES;
const clientProcesses = Math.max(1, Number(values.clients));
const httpConnections = Math.max(1, Number(values['http-connections']));
const payloadBytes = Math.max(20, Number(values.payload));
const repeat = Math.max(1, Math.floor(Number(values.repeat)) || 1);
const watchDashboard = values['watch-dashboard']!;
/** Herald's frontEndThreads, or undefined for its default. */
const frontEndThreads = values.threads === undefined ? undefined : Math.max(1, Math.floor(Number(values.threads)) || 1);
/** Herald's frontEndThreads in the right column instead of the ceiling, or undefined for the ceiling. */
const againstThreads = values['against-threads'] === undefined ? undefined : Math.max(1, Math.floor(Number(values['against-threads'])) || 1);
/** The table's column names: the left target and the right one. */
const labels: [string, string] = againstThreads === undefined ? ['herald', 'ceiling'] : [`herald ${frontEndThreads ?? 'default'} thr`, `herald ${againstThreads} thr`];
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(REPO_ROOT, 'bench/results');
const cpuProfDir = values['cpu-prof'] ? join(resultsDir, `profiles-${stamp}`) : undefined;

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** Runs `scenario` on the target of the column `slot` ('ceiling' is the right one: Herald with `againstThreads` when given). */
function runOne(scenario: Scenario, slot: TargetName, heraldMaxUnitsPerSec: number | undefined): Promise<TargetOutcome> {
  const name: TargetName = againstThreads === undefined ? slot : 'herald';
  const threads = slot === 'herald' ? frontEndThreads : againstThreads;
  return runScenario({
    label: `${scenario.name} on ${labels[slot === 'herald' ? 0 : 1]}`,
    start: async () => {
      const options = { cpuProfDir, profileLabel: `${scenario.name}-${slot}`, watchDashboard, ...(threads === undefined ? {} : { extraConfig: { frontEndThreads: threads } }) };
      return scenario.start ? scenario.start(name, options) : [await startTarget(name, options)];
    },
    measure: async (servers, pool, trigger) => {
      const target = servers[0];
      const several = servers.length > 1 ? { subscriberUrls: servers.map((s) => s.wsUrl), serverPids: servers.map((s) => s.pid), triggerUrls: servers.map((s) => s.baseUrl) } : {};
      const metrics = await scenario.run({ target: target!, ...several, pool, trigger, sizes, httpConnections, payloadBytes, heraldMaxUnitsPerSec, log });
      if (target!.dashboard) {
        const d = target!.dashboard;
        log(`  dashboard watching: ${d.debugEvents} debug events received, ${d.samplingNotices} sampling notices (at most 1 in ${d.maxSampledEvery} shown)`);
      }
      return metrics;
    },
    ...(scenario.afterStop ? { afterStop: () => scenario.afterStop!() } : {}),
    clientProcesses,
    httpConnections,
    payloadBytes,
    timeoutMs: quick ? SCENARIO_TIMEOUT_MS.quick : SCENARIO_TIMEOUT_MS.full,
    log,
  });
}

async function main(): Promise<void> {
  const machine = machineInfo();
  const named = (name: string): boolean => selected.some((s) => s.name === name);
  // scale-2proc: each of its two server processes holds half.
  const needed = Math.max(sizes.broadcastLarge, sizes.connectStorm, sizes.idleConnections, named('scale') ? sizes.scaleConnections : 0, named('scale-2proc') ? sizes.scale2procConnections / 2 : 0);
  log(`machine: ${machine.nproc} cores (${machine.cpuModel}), ${machine.memGiB} GiB, node ${machine.node}, load ${machine.loadAverageAtStart}`);
  log(`open files limit: soft ${machine.openFilesSoft}, hard ${machine.openFilesHard} (the server needs ~${needed} sockets, each load client ~${Math.ceil(needed / clientProcesses)}; the scale scenarios use 4 load clients of their own)`);
  if (Number(machine.openFilesSoft) < needed + 500) {
    log(`WARNING: the open files limit is below ${needed + 500}; raise it (ulimit -n) or expect failed connects`);
  }
  log(`${quick ? 'QUICK' : 'FULL'} run${repeat > 1 ? `, each scenario ${repeat} times per target` : ''}; ${clientProcesses} load-client processes, ${httpConnections} keep-alive trigger connections, ${payloadBytes} B event data${watchDashboard ? '; a dashboard watches the app (debug taps on)' : ''}; Herald frontEndThreads ${frontEndThreads ?? 'default'}${againstThreads === undefined ? '' : `, against Herald with ${againstThreads} (in the ceiling's place)`}`);
  const run: RunRecord = {
    startedAt: new Date().toISOString(),
    command: process.argv.slice(2).join(' '),
    quick,
    options: { targets, frontEndThreads, againstThreads, labels, clientProcesses, httpConnections, payloadBytes, repeat, sizes, cpuProfDir, watchDashboard },
    machine,
    scenarios: [],
  };
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `${stamp}.json`);
  for (const scenario of selected) {
    const record: ScenarioRecord = { name: scenario.name, description: scenario.description };
    run.scenarios.push(record);
    const runs: NonNullable<ScenarioRecord['runs']> = [];
    for (let i = 0; i < repeat; i++) {
      if (repeat > 1) log(`${scenario.name}: run ${i + 1} of ${repeat}`);
      const pair: (typeof runs)[number] = {};
      runs.push(pair);
      if (targets.includes('herald')) pair.herald = await runOne(scenario, 'herald', undefined);
      const heraldMax = pair.herald?.metrics?.find((m) => m.name === 'max: triggers/s' || m.name === 'max: batches/s')?.value;
      if (targets.includes('ceiling')) pair.ceiling = await runOne(scenario, 'ceiling', heraldMax);
      if (repeat > 1) record.runs = runs;
      for (const t of ['herald', 'ceiling'] as const) {
        const outcomes = runs.flatMap((r) => (r[t] ? [r[t]] : []));
        if (outcomes.length) record[t] = outcomes.length === 1 ? outcomes[0] : medianOutcome(outcomes);
      }
      writeFileSync(file, JSON.stringify(run, null, 2));
    }
    // Written after every scenario, so a run cut short keeps what it measured.
    writeFileSync(file, JSON.stringify(run, null, 2));
  }
  log('');
  log(renderTable(run));
  log('');
  log(`results: ${file}`);
  if (cpuProfDir) log(`cpu profiles: ${cpuProfDir}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench:fanout failed: ${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  },
);
