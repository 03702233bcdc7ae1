/**
 * `npm run bench:memory [-- --connections N] [--channels N] [--resident] [--settle-ms MS]`: where Herald's memory per
 * connection goes. Starts the built Herald in this process (1 shard), opens N WebSocket
 * connections from 2 load-client processes (bench/fanout/load-client.ts), each subscribed to
 * one of `channels` public channels, then everyone leaves. At each step it writes V8 heap
 * snapshots of the main thread and of the shard's worker thread and prints, per thread, the
 * live heap per connection by object kind (snapshot difference). With `--resident` it takes no
 * snapshots (writing one raises the process's memory) and prints the resident memory by mapping
 * kind (/proc/self/smaps) and the main thread's V8 heap per space instead. The npm script runs it
 * with `node --max-semi-space-size=2`, as Herald is run (docs/operations.md). Figures, never pass/fail.
 */
import v8 from 'node:v8';
import workerThreads from 'node:worker_threads';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pipeline } from 'node:stream/promises';
import { setTimeout as sleep } from 'node:timers/promises';

const { values } = parseArgs({
  options: { connections: { type: 'string', default: '10000' }, channels: { type: 'string', default: '100' }, resident: { type: 'boolean', default: false }, 'settle-ms': { type: 'string', default: '5000' } },
});
const residentOnly = values.resident!;
const connections = Number(values.connections);
const channels = Number(values.channels);

// Piscina creates its workers with `new worker_threads.Worker(...)`: keep them, for their heap snapshots.
const workers: workerThreads.Worker[] = [];
const OriginalWorker = workerThreads.Worker;
(workerThreads as { Worker: typeof OriginalWorker }).Worker = class extends OriginalWorker {
  constructor(...args: ConstructorParameters<typeof OriginalWorker>) {
    super(...args);
    workers.push(this);
  }
};

const { startHerald } = await import('../src/server.js');
const { parseConfig } = await import('../src/config/load.js');
const { ClientPool } = await import('./fanout/client-pool.js');

interface Kinds {
  byKind: Map<string, { size: number; count: number }>;
  total: number;
}

/** Self size by (node type, name) of a heap snapshot file. */
function kinds(file: string): Kinds {
  const snapshot = JSON.parse(readFileSync(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f)) as [number, number, number];
  const byKind = new Map<string, { size: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snapshot.nodes.length; i += width) {
    const type = types[snapshot.nodes[i + typeAt]!]!;
    let name = snapshot.strings[snapshot.nodes[i + nameAt]!]!;
    if (type.endsWith('string')) name = '';
    else if (type === 'number' || type === 'code') name = '';
    else name = name.slice(0, 50);
    const key = `${type}${name ? ` ${name}` : ''}`;
    const entry = byKind.get(key) ?? { size: 0, count: 0 };
    entry.size += snapshot.nodes[i + sizeAt]!;
    entry.count++;
    byKind.set(key, entry);
    total += snapshot.nodes[i + sizeAt]!;
  }
  return { byKind, total };
}

function printDifference(title: string, before: Kinds, after: Kinds, per: number): void {
  process.stdout.write(`\n${title}: live heap ${(before.total / 1024).toFixed(0)} → ${(after.total / 1024).toFixed(0)} KiB, ${((after.total - before.total) / per).toFixed(0)} B per connection\n`);
  const rows = [...after.byKind].map(([key, e]) => {
    const b = before.byKind.get(key) ?? { size: 0, count: 0 };
    return { key, size: (e.size - b.size) / per, count: (e.count - b.count) / per };
  });
  rows.sort((a, b) => b.size - a.size);
  for (const row of rows.filter((r) => Math.abs(r.size) >= 2).slice(0, 12)) {
    process.stdout.write(`  ${row.size.toFixed(0).padStart(6)} B  ${row.count.toFixed(2).padStart(6)} objects  ${row.key}\n`);
  }
}

/** Resident anonymous memory by mapping kind, KiB. */
function residentByMapping(): Record<string, number> {
  const out: Record<string, number> = {};
  let kind = '';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const mapping = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (mapping) {
      const path = mapping[1]!.trim();
      kind = path === '[heap]' ? 'malloc heap (brk)' : path === '' ? 'anonymous mappings (V8 heaps, thread malloc arenas, large mallocs)' : '';
      continue;
    }
    const anon = /^Anonymous:\s+(\d+) kB/.exec(line);
    if (anon && kind) out[kind] = (out[kind] ?? 0) + Number(anon[1]);
  }
  return out;
}

const outDir = mkdtempSync(join(tmpdir(), 'herald-bench-memory-'));
mkdirSync(outDir, { recursive: true });

interface Step {
  /** Heap snapshot files, parsed only once every snapshot is taken (parsing allocates a lot). */
  mainFile?: string;
  shardFile?: string;
  rssKb: number;
  heapTotalKb: number;
  /** Main thread's V8 heap spaces: committed (space_size) and used, KiB. */
  spaces: Record<string, { committedKb: number; usedKb: number }>;
  mappings: Record<string, number>;
}

function heapSpaces(): Step['spaces'] {
  const out: Step['spaces'] = {};
  for (const s of v8.getHeapSpaceStatistics()) out[s.space_name] = { committedKb: s.space_size / 1024, usedKb: s.space_used_size / 1024 };
  return out;
}

async function step(label: string): Promise<Step> {
  await sleep(1_000);
  const memory = process.memoryUsage();
  const resident = { rssKb: memory.rss / 1024, heapTotalKb: memory.heapTotal / 1024, spaces: heapSpaces(), mappings: residentByMapping() };
  if (residentOnly) return resident;
  const mainFile = v8.writeHeapSnapshot(join(outDir, `${label}-main.heapsnapshot`));
  const shardFile = join(outDir, `${label}-shard.heapsnapshot`);
  const shardWorker = workers.find((w) => w.threadId > 0);
  if (!shardWorker) throw new Error('no shard worker found');
  await pipeline(await shardWorker.getHeapSnapshot(), createWriteStream(shardFile));
  return { ...resident, mainFile, shardFile };
}

const dataDir = join(outDir, 'data');
const config = parseConfig({ host: '127.0.0.1', port: 0, dataDir, shards: 1, apps: [{ id: 'bench-app', key: 'bench-key', secret: 'bench-secret', activityTimeout: 120 }] });
const herald = await startHerald(config);
const url = `ws://127.0.0.1:${herald.port}/app/bench-key?protocol=7&client=js&version=8.4.0&flash=false`;
const pool = new ClientPool(2);
try {
  const empty = await step('empty');
  const connected = await pool.connect(url, connections, 200);
  const subscribed = await pool.subscribe({ kind: 'modulo', prefix: 'memory-', modulo: channels }, 200);
  await sleep(2_000);
  const full = await step('full');
  await pool.closeSockets();
  // Leaves reach the shard after the sockets close: let them settle.
  await sleep(Number(values['settle-ms']));
  const left = await step('left');
  const n = Math.max(1, subscribed.done);
  process.stdout.write(`${connected.done} connections, ${subscribed.done} subscribed to one of ${channels} channels; Herald with 1 shard, in this process\n`);
  if (!residentOnly) {
    const [emptyMain, fullMain, leftMain] = [empty, full, left].map((s) => kinds(s.mainFile!)) as [Kinds, Kinds, Kinds];
    const [emptyShard, fullShard, leftShard] = [empty, full, left].map((s) => kinds(s.shardFile!)) as [Kinds, Kinds, Kinds];
    printDifference('main thread, all subscribed', emptyMain, fullMain, n);
    printDifference('shard thread, all subscribed', emptyShard, fullShard, n);
    printDifference('main thread, after everyone left', emptyMain, leftMain, n);
    printDifference('shard thread, after everyone left', emptyShard, leftShard, n);
  } else {
    report(empty, full, left, n);
  }
} finally {
  await pool.dispose();
  await herald.stop();
  rmSync(outDir, { recursive: true, force: true });
}
process.exit(0);

function report(empty: Step, full: Step, left: Step, n: number): void {
  process.stdout.write(`\nprocess (Herald and this small harness):\n`);
  process.stdout.write(`  VmRSS: ${(((full.rssKb - empty.rssKb) * 1024) / n).toFixed(0)} B per connection (${empty.rssKb.toFixed(0)} → ${full.rssKb.toFixed(0)} → ${left.rssKb.toFixed(0)} KiB after everyone left)\n`);
  process.stdout.write(`  main V8 heap committed (heapTotal): ${(((full.heapTotalKb - empty.heapTotalKb) * 1024) / n).toFixed(0)} B per connection\n`);
  for (const [space, f] of Object.entries(full.spaces)) {
    const e = empty.spaces[space] ?? { committedKb: 0, usedKb: 0 };
    const l = left.spaces[space] ?? { committedKb: 0, usedKb: 0 };
    const committed = ((f.committedKb - e.committedKb) * 1024) / n;
    if (Math.abs(committed) < 1 && Math.abs(f.usedKb - e.usedKb) < 16) continue;
    process.stdout.write(`    ${space}: committed ${committed.toFixed(0)} B, used ${(((f.usedKb - e.usedKb) * 1024) / n).toFixed(0)} B per connection (committed ${e.committedKb.toFixed(0)} → ${f.committedKb.toFixed(0)} → ${l.committedKb.toFixed(0)} KiB)\n`);
  }
  for (const kind of Object.keys(full.mappings)) {
    process.stdout.write(`  ${kind}: ${(((full.mappings[kind]! - (empty.mappings[kind] ?? 0)) * 1024) / n).toFixed(0)} B per connection (${empty.mappings[kind] ?? 0} → ${full.mappings[kind]} → ${left.mappings[kind] ?? 0} KiB after everyone left)\n`);
  }
}
