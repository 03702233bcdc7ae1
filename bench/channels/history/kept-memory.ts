/**
 * Memory per kept history event (src/channels/history/history-store.ts): heap growth of one
 * shard's store after keeping N events of a given data size across many channels, per event,
 * next to the bytes the event counts against maxHistoryBytes. Run:
 * `npm run build --silent && node --expose-gc dist/bench/channels/history/kept-memory.js`
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HistoryStore, type HistoryBounds } from '../../../src/channels/history/history-store.js';
import { cacheEntryBytes } from '../../../src/channels/state/channel-store.js';
import { openShardDatabase } from '../../../src/shards/storage.js';

const EVENTS = 100_000;
const CHANNELS = 1_000;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');

const rows: Record<string, string | number>[] = [];
for (const dataBytes of [100, 1000]) {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-history-'));
  const root = openShardDatabase(join(dir, 'shard-0'));
  const bounds: HistoryBounds = { maxEvents: EVENTS, ttlSeconds: 3600, maxBytes: Number.MAX_SAFE_INTEGER };
  const store = new HistoryStore(root, () => bounds);
  const data = JSON.stringify({ text: 'x'.repeat(dataBytes - 12) });
  gc();
  const before = process.memoryUsage().heapUsed;
  let last: Promise<void> = Promise.resolve();
  for (let i = 0; i < EVENTS; i++) {
    // A flat string of its own per event, as one decoded from a shard message is.
    const own = Buffer.from(`${data.slice(0, -8)}${String(i).padStart(7, '0')}}`).toString();
    const kept = store.append('bench-app', `history-room-${i % CHANNELS}`, 'new-message', own, undefined, bounds);
    last = kept.written.then(kept.answered);
  }
  await last;
  gc();
  const perEvent = (process.memoryUsage().heapUsed - before) / EVENTS;
  if (store.keptBytes('bench-app') === 0) throw new Error('nothing kept');
  const counted = cacheEntryBytes('history-room-500', 'new-message', data);
  rows.push({ 'data bytes': data.length, events: EVENTS, channels: CHANNELS, 'heap per kept event (B)': Math.round(perEvent), 'counted bytes': counted, ratio: (perEvent / counted).toFixed(2) });
  await root.close();
  rmSync(dir, { recursive: true, force: true });
}
console.table(rows);
