/**
 * The push benchmark's results: the record written to bench/results/push-<timestamp>.json and
 * the table printed at the end, with Herald/ceiling ratios and the targets.
 */
import type { ClusterPublishRow } from './cluster-publish.js';
import { cpus, freemem, loadavg, totalmem } from 'node:os';
import type { CeilingResult } from './h2-ceiling.js';
import type { HeraldAudienceResult } from './herald-publish.js';
import type { ScanResult } from './scan.js';
import type { SeedManifest } from './seed.js';

/** Targets of issue 9 for push. */
export const TARGETS = {
  /** Recipient set of 1,000,000 devices, all shards, ms. */
  recipientSetMs: 1_000,
  /** Herald hand-off rate over the bare HTTP/2 ceiling's. */
  handoffRatio: 0.7,
} as const;

/** One audience: Herald and the ceiling over the same devices. */
export interface AudienceRecord {
  interest: string;
  members: number;
  herald?: HeraldAudienceResult;
  ceiling?: CeilingResult;
  /** Herald notifications/s over the ceiling's. */
  ratio?: number;
  errors: string[];
}

export interface PushRunRecord {
  kind: 'push';
  startedAt: string;
  finishedAt?: string;
  command: string;
  machine: ReturnType<typeof machineInfo>;
  options: { devices: number; shards: number; quick: boolean; concurrency: number; connectionsPerGateway: number; scanRepeats: number; warmUp: string };
  seed: SeedManifest & { seededThisRun: boolean };
  recipientSets: ScanResult[];
  audiences: AudienceRecord[];
  errors: string[];
  /** Where --cpu-prof wrote Herald's profiles. */
  profilesDir?: string;
  /** `--phase cluster`: the publish to every device on LMDB, PostgreSQL × 1 node, PostgreSQL × 2 nodes. */
  clusterPublish?: ClusterPublishRow[];
}

/** The machine a run took place on, and how busy it was when the run started. */
export function machineInfo(): { cpuModel: string; cores: number; memoryGiB: number; freeGiB: number; loadAverage: number[]; node: string; platform: string } {
  return {
    cpuModel: cpus()[0]?.model ?? 'unknown',
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    freeGiB: Math.round((freemem() / 1024 ** 3) * 10) / 10,
    loadAverage: loadavg().map((load) => Math.round(load * 100) / 100),
    node: process.version,
    platform: `${process.platform} ${process.arch}`,
  };
}

const fmt = (n: number): string => Math.round(n).toLocaleString('en');
const ms = (n: number | null | undefined): string => (n === null || n === undefined ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : fmt(n));
const mib = (kb: number): string => (kb / 1024).toFixed(0);

/** CPU time per notification, µs, from a % of one core held over `elapsedMs`. */
function cpuPerNotification(percent: number, elapsedMs: number, notifications: number): number {
  return ((percent / 100) * elapsedMs * 1000) / notifications;
}

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]): string => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n');
}

function recipientSection(record: PushRunRecord): string[] {
  if (!record.recipientSets.length) return [];
  return [
    '',
    `Recipient set (${record.options.shards} shard threads in parallel; wall ms until the last shard is done; CPU = all shard threads)`,
    table(
      ['interests', 'walk', 'devices', 'first', 'best', 'median', 'per shard (median run)', 'CPU ms', 'CPU µs/device', 'devices/s (best)'],
      record.recipientSets.map((scan) => {
        const medianRun = [...scan.runs].sort((a, b) => a.wallMs - b.wallMs)[Math.floor(scan.runs.length / 2)]!;
        return [
          scan.interests.join('+'),
          scan.mode === 'index' ? 'index only' : 'scanInterestSteps',
          fmt(scan.devices),
          ms(scan.firstMs),
          ms(scan.bestMs),
          ms(scan.medianMs),
          medianRun.shardMs.map(ms).join(' / '),
          ms(medianRun.cpuMs),
          scan.devices ? ((medianRun.cpuMs * 1000) / scan.devices).toFixed(2) : '-',
          fmt((scan.devices / scan.bestMs) * 1000),
        ];
      }),
    ),
  ];
}

function handoffSection(record: PushRunRecord): string[] {
  if (!record.audiences.length) return [];
  const throughput = table(
    ['audience', 'devices', 'Herald/s', 'ceiling/s', 'ratio', 'Herald s', 'ceiling s', '1st req ms', 'finished s', 'CPU µs/notif H/ceil', 'CPU ratio', 'CPU% H/gw/all', 'ceiling CPU% client/gw/all'],
    record.audiences.map((a) => {
      const h = a.herald;
      const c = a.ceiling;
      return [
        a.interest,
        fmt(a.members),
        h ? fmt(h.perSecond) : 'error',
        c ? fmt(c.perSecond) : 'error',
        a.ratio === undefined ? '-' : a.ratio.toFixed(2),
        h ? (h.handoffMs / 1000).toFixed(2) : '-',
        c ? (c.handoffMs / 1000).toFixed(2) : '-',
        h ? ms(h.firstRequestMs) : '-',
        h ? (h.finishedMs / 1000).toFixed(2) : '-',
        `${h ? cpuPerNotification(h.cpu.heraldPct, h.handoffMs, h.members).toFixed(0) : '-'}/${c ? cpuPerNotification(c.cpu.clientPct, c.handoffMs, c.members).toFixed(0) : '-'}`,
        h && c ? (cpuPerNotification(c.cpu.clientPct, c.handoffMs, c.members) / cpuPerNotification(h.cpu.heraldPct, h.handoffMs, h.members)).toFixed(2) : '-',
        h ? `${fmt(h.cpu.heraldPct)}/${fmt(h.cpu.gatewayPct)}/${fmt(h.cpu.machinePct)}` : '-',
        c ? `${fmt(c.cpu.clientPct)}/${fmt(c.cpu.gatewayPct)}/${fmt(c.cpu.machinePct)}` : '-',
      ];
    }),
  );
  const memory = table(
    ['audience', 'devices', 'idle RSS', 'idle anon', 'peak RSS', 'peak anon', 'peak file (LMDB)', 'HWM'],
    record.audiences.filter((a) => a.herald).map((a) => {
      const h = a.herald!;
      return [a.interest, fmt(a.members), mib(h.idle.rss), mib(h.idle.anon), mib(h.peaks.peakRssKb), mib(h.peaks.peakAnonKb), mib(h.peaks.peakFileKb), mib(h.peaks.hwmKb)];
    }),
  );
  return [
    '',
    'Gateway hand-off: publish 200 → the fake gateway answered every device. CPU% = % of one core (200 = the whole machine);',
    'CPU µs/notif = sender CPU per notification (Herald: all its threads; ceiling: the client threads); CPU ratio = ceiling µs ÷ Herald µs,',
    'the hand-off ratio the sender\'s CPU cost alone would give: less sensitive than the wall-clock ratio to what else runs on a shared machine',
    throughput,
    '',
    'Herald memory while the publish ran, MiB (fresh process per audience; idle = after start and the warm-up publish;',
    'anon = heap and buffers, file = mapped LMDB pages and code, HWM = VmHWM, the lifetime peak)',
    memory,
  ];
}

function targetsSection(record: PushRunRecord): string[] {
  const out = ['', 'Targets'];
  const all = record.recipientSets.find((s) => s.mode === 'scanInterests' && s.interests.length === 1 && s.interests[0] === 'all');
  if (all) {
    const scaled = (all.medianMs * 1_000_000) / all.devices;
    const scaleNote = all.devices === 1_000_000 ? '' : ` (${ms(all.medianMs)} ms for ${fmt(all.devices)}; ×${(1_000_000 / all.devices).toFixed(0)} scaled)`;
    out.push(`  recipient set of 1,000,000 ≤ ${TARGETS.recipientSetMs} ms: ${ms(scaled)} ms median${scaleNote} → ${scaled <= TARGETS.recipientSetMs ? 'met' : 'MISSED'}`);
  }
  for (const a of record.audiences) {
    if (a.ratio !== undefined) out.push(`  hand-off ≥ ${TARGETS.handoffRatio} × ceiling, ${a.interest} (${fmt(a.members)}): ${a.ratio.toFixed(2)} → ${a.ratio >= TARGETS.handoffRatio ? 'met' : 'MISSED'}`);
  }
  const measured = record.audiences.filter((a) => a.herald).map((a) => a.herald!);
  if (measured.length >= 2) {
    const smallest = measured.reduce((x, y) => (y.members < x.members ? y : x));
    const largest = measured.reduce((x, y) => (y.members > x.members ? y : x));
    const growth = (kb: number): string => `${kb >= 0 ? '+' : ''}${(kb / 1024).toFixed(0)} MiB`;
    out.push(
      `  RSS flat from ${fmt(smallest.members)} to ${fmt(largest.members)} devices: peak anon ${growth(largest.peaks.peakAnonKb - smallest.peaks.peakAnonKb)}, ` +
        `peak RSS ${growth(largest.peaks.peakRssKb - smallest.peaks.peakRssKb)} (mapped LMDB pages ${growth(largest.peaks.peakFileKb - smallest.peaks.peakFileKb)})`,
    );
  }
  for (const error of [...record.errors, ...record.audiences.flatMap((a) => a.errors.map((e) => `${a.interest}: ${e}`))]) out.push(`  ERROR ${error}`);
  return out;
}

/** The printed summary. */
export function renderReport(record: PushRunRecord): string {
  const { options, machine } = record;
  return [
    `Push benchmark: ${fmt(options.devices)} devices, ${options.shards} shards, concurrency ${options.concurrency}/shard, ${options.connectionsPerGateway} sessions/gateway/shard, warm-up publish to ${options.warmUp}`,
    `machine: ${machine.cores} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, node ${machine.node}, load average at start ${machine.loadAverage.join(' ')} (shared machine)`,
    ...recipientSection(record),
    ...handoffSection(record),
    ...clusterSection(record),
    ...targetsSection(record),
  ].join('\n');
}

/** `--phase cluster`: one row per store and node count, sends and CPU seconds per node. */
function clusterSection(record: PushRunRecord): string[] {
  const rows = record.clusterPublish;
  if (!rows?.length) return [];
  return [
    '',
    `Publish to every device (${fmt(rows[0]!.members)}), one node vs a cluster:`,
    '| store | nodes | hand-off s | notifications/s | sent per node | CPU s per node |',
    '|---|---|---|---|---|---|',
    ...rows.map((r) => `| ${r.store} | ${r.nodes} | ${(r.handoffMs / 1000).toFixed(2)} | ${fmt(Math.round(r.perSecond))} | ${r.sentPerNode.map(fmt).join(' / ')} | ${r.cpuSecondsPerNode.map((c) => c.toFixed(1)).join(' / ')} |`),
  ];
}
