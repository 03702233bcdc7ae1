/**
 * `npm run bench:push [-- [--quick] [--devices N] [--shards N] [--phase scan|handoff|cluster] [--cpu-prof] [interest ...]]`
 *
 * Whole-system push benchmark:
 * 1. Seeds the dataset (bench/push/dataset.ts: 1,000,000 devices, 100,000 with --quick, over the
 *    nested interests `all`, `big` (1/10), `medium` (1/100) and `small` (1/1000)) straight into
 *    the shards' LMDB environments with Herald's own store code, cached under bench/.cache
 *    (bench/push/seed.ts).
 * 2. Recipient set: every shard's part of an audience walked in parallel, one thread per shard,
 *    with LmdbDevices.scanInterestSteps, as a publish's fan-out does (bench/push/scan.ts).
 * 3. Hand-off, per audience (`small`, `big`, `all` unless interests are named): a fresh built
 *    Herald warms up with a publish to about 10,000 devices, then publishes to the audience through its
 *    publish API to a minimal fake APNs/FCM gateway (HTTP/2 + TLS, bench/push/fake-gateway.ts),
 *    timed from the publish's 200 to the fake having answered every device, with Herald's memory
 *    sampled from /proc; then the bare HTTP/2 ceiling (bench/push/h2-ceiling.ts) sends the same
 *    requests with the same sessions and streams.
 * 4. Cluster (`--phase cluster`, not run by default): a publish to every device (`all`) on one
 *    node with LMDB, then with PostgreSQL on one node and on two nodes (private PostgreSQL and
 *    redis-server), sends and CPU seconds per node (bench/push/cluster-publish.ts).
 * Prints a table with Herald/ceiling ratios and writes bench/results/push-<timestamp>.json.
 * Every phase has a time limit. Figures, never pass/fail; the exit code is 1 only when a phase broke.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { configSchema } from '../src/config/schema.js';
import { audienceSize, BENCH_INTERESTS } from './push/dataset.js';
import { startFakeGateway, type FakeGatewayProcess } from './push/fake-gateway-control.js';
import { runCeiling } from './push/h2-ceiling.js';
import { runClusterPublish } from './push/cluster-publish.js';
import { runHeraldAudience } from './push/herald-publish.js';
import { machineInfo, renderReport, type AudienceRecord, type PushRunRecord } from './push/report.js';
import { timeRecipientSets } from './push/scan.js';
import { seededDataDir } from './push/seed.js';

const REPO_ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    quick: { type: 'boolean', default: false },
    devices: { type: 'string' },
    shards: { type: 'string' },
    phase: { type: 'string', multiple: true },
    'scan-repeats': { type: 'string', default: '3' },
    'cpu-prof': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});

const usage =
  'usage: npm run bench:push -- [--quick] [--devices N] [--shards N] [--phase scan|handoff|cluster] [--scan-repeats N] [--cpu-prof] [interest ...]\n' +
  `interests: ${BENCH_INTERESTS.map((i) => `${i.name} (1 in ${i.every})`).join(', ')}\n` +
  '--cpu-prof profiles Herald (every thread) during the largest audience; files in bench/results/profiles-push-<timestamp>/\n';
if (values.help) {
  process.stdout.write(usage);
  process.exit(0);
}
const phases = new Set(values.phase?.length ? values.phase : ['scan', 'handoff']);
const unknownPhase = [...phases].filter((p) => p !== 'scan' && p !== 'handoff' && p !== 'cluster');
const unknownInterest = positionals.filter((name) => !BENCH_INTERESTS.some((i) => i.name === name));
if (unknownPhase.length || unknownInterest.length) {
  process.stderr.write(`unknown ${unknownPhase.length ? `phase(s) ${unknownPhase.join(', ')}` : `interest(s) ${unknownInterest.join(', ')}`}\n${usage}`);
  process.exit(2);
}

const quick = values.quick!;
const devices = Number(values.devices ?? (quick ? 100_000 : 1_000_000));
const shards = Number(values.shards ?? availableParallelism());
const scanRepeats = Math.max(1, Number(values['scan-repeats']));
if (!Number.isSafeInteger(devices) || devices < 1000 || !Number.isInteger(shards) || shards < 1 || shards > 64) {
  process.stderr.write(`--devices must be an integer ≥ 1000 and --shards from 1 to 64\n${usage}`);
  process.exit(2);
}
// The ceiling mirrors Herald's defaults, which the bench does not change.
const delivery = configSchema.parse({}).pushDelivery;
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const resultsDir = join(REPO_ROOT, 'bench/results');
const profilesDir = values['cpu-prof'] ? join(resultsDir, `profiles-push-${stamp}`) : undefined;

/** Phase limits, ms: generous for a busy 2-core machine, but every phase ends by itself. */
const LIMITS = {
  seedMs: 60_000 + devices * 2,
  scanMs: 120_000,
  heraldMs: (members: number): number => 60_000 + members / 2, // down to ~2,000 notifications/s
  ceilingMs: (members: number): number => 60_000 + members / 5,
};

const log = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

/** Measured by default: 1,000, 100,000 and 1,000,000 devices (100, 10,000, 100,000 with --quick). */
const DEFAULT_AUDIENCES = ['small', 'big', 'all'];
/**
 * Warms each fresh Herald up before the measured publish: sessions, provider and access tokens,
 * JIT and V8's heap sizing take about 10,000 sends to settle (a first publish of 10,000 costs
 * twice the CPU per notification of the next), so the interest closest to 10,000 devices.
 */
const WARM_UP = BENCH_INTERESTS.reduce((x, y) => (Math.abs(audienceSize(y, devices) - 10_000) < Math.abs(audienceSize(x, devices) - 10_000) ? y : x));
const audiences = BENCH_INTERESTS.filter((i) => (positionals.length ? positionals : DEFAULT_AUDIENCES).includes(i.name)).sort((a, b) => b.every - a.every);

const data = await seededDataDir({ repoRoot: REPO_ROOT, devices, shards, timeoutMs: LIMITS.seedMs, log });
if (!data.seededNow) log(`using the cached data dir ${data.dataDir} (${devices.toLocaleString('en')} devices, ${shards} shards, seeded ${data.manifest.seededAt})`);

const record: PushRunRecord = {
  kind: 'push',
  startedAt: new Date().toISOString(),
  command: `node dist/bench/push.js ${process.argv.slice(2).join(' ')}`.trim(),
  machine: machineInfo(),
  options: { devices, shards, quick, concurrency: delivery.concurrency, connectionsPerGateway: delivery.connectionsPerGateway, scanRepeats, warmUp: WARM_UP.name },
  seed: { ...data.manifest, seededThisRun: data.seededNow },
  recipientSets: [],
  audiences: [],
  errors: [],
  ...(profilesDir ? { profilesDir } : {}),
};

if (phases.has('scan')) {
  log(`recipient sets: ${shards} shard threads, ${scanRepeats} runs per audience ...`);
  try {
    record.recipientSets = await timeRecipientSets({
      dataDir: data.dataDir,
      shards,
      audiences: [
        { interests: ['all'], mode: 'scanInterests' },
        { interests: ['big'], mode: 'scanInterests' },
        { interests: ['small'], mode: 'scanInterests' },
        { interests: ['all', 'big'], mode: 'scanInterests' },
        { interests: ['all'], mode: 'index' },
      ],
      repeats: scanRepeats,
      timeoutMs: LIMITS.scanMs,
    });
  } catch (err) {
    record.errors.push(`recipient sets: ${String(err)}`);
  }
}

if (phases.has('handoff')) {
  let gateway: FakeGatewayProcess | undefined;
  try {
    gateway = await startFakeGateway(REPO_ROOT);
    for (const interest of audiences) {
      const members = audienceSize(interest, devices);
      const entry: AudienceRecord = { interest: interest.name, members, errors: [] };
      record.audiences.push(entry);
      const profile = profilesDir && interest === audiences[audiences.length - 1] ? join(profilesDir, `herald-${interest.name}`) : undefined;
      log(`hand-off to ${interest.name} (${members.toLocaleString('en')} devices): Herald${profile ? ' (profiled)' : ''} ...`);
      try {
        entry.herald = await runHeraldAudience({
          repoRoot: REPO_ROOT,
          data,
          gateway,
          interest: interest.name,
          members,
          warmUp: { interest: WARM_UP.name, members: audienceSize(WARM_UP, devices) },
          ...(profile ? { cpuProfDir: profile } : {}),
          timeoutMs: LIMITS.heraldMs(members),
        });
        log(`  Herald: ${Math.round(entry.herald.perSecond).toLocaleString('en')}/s over ${(entry.herald.handoffMs / 1000).toFixed(2)} s, peak RSS ${(entry.herald.peaks.peakRssKb / 1024).toFixed(0)} MiB`);
      } catch (err) {
        entry.errors.push(`Herald: ${String(err)}`);
        log(`  Herald failed: ${String(err)}`);
      }
      log(`hand-off to ${interest.name}: bare HTTP/2 ceiling ...`);
      try {
        entry.ceiling = await runCeiling({
          repoRoot: REPO_ROOT,
          gateway,
          workers: shards,
          sessionsPerPlatform: delivery.connectionsPerGateway,
          concurrency: delivery.concurrency,
          every: interest.every,
          members,
          timeoutMs: LIMITS.ceilingMs(members),
        });
        if (entry.ceiling.failed > 0) entry.errors.push(`ceiling: ${entry.ceiling.failed} requests failed (${entry.ceiling.firstError})`);
        log(`  ceiling: ${Math.round(entry.ceiling.perSecond).toLocaleString('en')}/s over ${(entry.ceiling.handoffMs / 1000).toFixed(2)} s`);
      } catch (err) {
        entry.errors.push(`ceiling: ${String(err)}`);
        log(`  ceiling failed: ${String(err)}`);
      }
      if (entry.herald && entry.ceiling) entry.ratio = entry.herald.perSecond / entry.ceiling.perSecond;
    }
  } catch (err) {
    record.errors.push(`hand-off: ${String(err)}`);
  } finally {
    await gateway?.stop();
  }
}

if (phases.has('cluster')) {
  let gateway: FakeGatewayProcess | undefined;
  try {
    gateway = await startFakeGateway(REPO_ROOT);
    record.clusterPublish = await runClusterPublish({
      repoRoot: REPO_ROOT,
      data,
      gateway,
      devices,
      shards,
      // PostgreSQL's partitioned scan is slower than LMDB's: room for ~500 notifications/s.
      timeoutMs: 60_000 + devices * 2,
      log,
    });
  } catch (err) {
    record.errors.push(`cluster publish: ${String(err)}`);
    log(`  cluster publish failed: ${String(err)}`);
  } finally {
    await gateway?.stop();
  }
}

record.finishedAt = new Date().toISOString();
mkdirSync(resultsDir, { recursive: true });
const file = join(resultsDir, `push-${stamp}.json`);
writeFileSync(file, JSON.stringify(record, null, 2) + '\n');
log('');
log(renderReport(record));
log(`\nresults: ${file}${profilesDir ? `\nprofiles: ${profilesDir} (summarise with node dist/bench/profile-summary.js <file>)` : ''}`);
const broken = record.errors.length > 0 || record.audiences.some((a) => a.errors.length > 0);
process.exit(broken ? 1 : 0);
