/**
 * CPU per kept history event by events per commit (src/channels/history/history-store.ts on a
 * shard's LMDB environment, src/shards/storage.ts: each commit synced). Appends `batch` events
 * in one turn, waits for their commit, and again, with a channel at its maxEvents (each event
 * also evicts one); CPU of the whole process (the JS thread and LMDB's write thread, user and
 * kernel) per event. A commit costs far more than an event in it: this is the figure behind a
 * history channel's cost per trigger at a given rate (docs/benchmarks.md, "Channel history").
 * Run: `npm run build --silent && node dist/bench/channels/history/commit-cost.js`
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HistoryStore, type HistoryBounds } from '../../../src/channels/history/history-store.js';
import { openShardDatabase } from '../../../src/shards/storage.js';

const EVENTS_PER_SIZE = 3_000;
const BATCHES = [1, 2, 4, 8, 16, 64];

const dir = mkdtempSync(join(tmpdir(), 'herald-bench-history-commit-'));
const root = openShardDatabase(join(dir, 'shard-0'));
const bounds: HistoryBounds = { maxEvents: 100, ttlSeconds: 300, maxBytes: 64 * 1024 * 1024 };
const store = new HistoryStore(root, () => bounds);
const data = JSON.stringify({ text: 'x'.repeat(88) });

async function appendInBatches(batch: number, events: number): Promise<void> {
  for (let i = 0; i < events; i += batch) {
    const kept = Array.from({ length: batch }, () => store.append('bench-app', 'history-room', 'new-message', data, undefined, bounds));
    await Promise.all(kept.map((k) => k.written));
    for (const k of kept) k.answered();
  }
}

// Fills the channel to maxEvents (from then on each event evicts one) and warms up.
await appendInBatches(1, 300);
const rows: Record<string, string | number>[] = [];
for (const batch of BATCHES) {
  const events = batch === 1 ? EVENTS_PER_SIZE / 3 : EVENTS_PER_SIZE;
  const cpu = process.cpuUsage();
  const start = performance.now();
  await appendInBatches(batch, events);
  const used = process.cpuUsage(cpu);
  rows.push({
    'events per commit': batch,
    'cpu µs per event': ((used.user + used.system) / events).toFixed(1),
    'of it kernel': (used.system / events).toFixed(1),
    'cpu µs per commit': (((used.user + used.system) / events) * batch).toFixed(0),
    'wall µs per commit': (((performance.now() - start) * 1000 * batch) / events).toFixed(0),
  });
}
console.table(rows);
await root.close();
rmSync(dir, { recursive: true, force: true });
