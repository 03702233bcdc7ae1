/**
 * `npm run bench:outbox [-- --events N]`
 *
 * Throughput of the cluster's shared webhook outbox (a Redis stream read through a consumer
 * group, src/webhooks/shared-outbox.ts) beside the single node's LMDB outbox store in the same
 * run. Each target takes N webhook entries of a realistic size (a member_added event for one
 * receiver, ~300 bytes of JSON): written as the shards write them (one XADD per message,
 * auto-pipelined / one LMDB put each, a turn's writes in one transaction), then taken and
 * settled as a delivery does (XREADGROUP 100 at a time, then one XACK + XDEL for the messages a
 * request settled / one LMDB remove each), end to end, nothing sent over HTTP. The Redis targets use a private
 * redis-server on a free port (never 6379): without persistence, with AOF `appendfsync
 * everysec` (Redis' default when AOF is on) and with `appendfsync always` (every write fsynced
 * before the reply). Prints one table, figures only.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RedisServer } from '../../test/helpers/redis-server.js';
import { openShardDatabase } from '../../src/shards/storage.js';
import { OutboxStore, type OutboxEntry } from '../../src/webhooks/outbox-store.js';
import type { SharedMessage } from '../../src/webhooks/shared-outbox.js';
import { DELIVERY_GROUP } from '../../src/webhooks/shared-outbox.js';

const { values } = parseArgs({ options: { events: { type: 'string', default: '50000' } } });
const EVENTS = Number(values.events);
const TARGET = { kind: 'channel' as const, appId: 'bench-app', url: 'http://127.0.0.1:9/webhook' };

function message(i: number): SharedMessage {
  const id = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
  return {
    k: 'channel',
    appId: 'bench-app',
    target: TARGET,
    events: [{ name: 'member_added', channel: `presence-room-${i % 1000}`, user_id: `user-${i}`, id }],
    createdAt: Date.now(),
  };
}

interface Row {
  target: string;
  writeMs: number;
  settleMs: number;
}

async function lmdbOutbox(): Promise<Row> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-outbox-'));
  const root = openShardDatabase(join(dir, 'shard-0'));
  try {
    const store = new OutboxStore(root);
    const t0 = performance.now();
    const entries: OutboxEntry[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const m = message(i);
      const entry: OutboxEntry = { seq: store.nextSeq(), id: m.k === 'channel' ? m.events[0]!.id : '', target: TARGET, event: m.k === 'channel' ? m.events[0]! : {}, createdAt: m.createdAt, notBefore: 0, attempts: 0 };
      store.put(entry);
      entries.push(entry);
      // A shard's turn holds a few hundred writes at most: yield so they commit in batches.
      if (i % 500 === 499) await new Promise((r) => setImmediate(r));
    }
    await store.flushed();
    const t1 = performance.now();
    const loaded = store.loadPending();
    for (let i = 0; i < loaded.length; i++) {
      store.remove(loaded[i]!.seq);
      if (i % 100 === 99) await new Promise((r) => setImmediate(r));
    }
    await store.flushed();
    const t2 = performance.now();
    return { target: 'LMDB outbox (one node, reference)', writeMs: t1 - t0, settleMs: t2 - t1 };
  } finally {
    await root.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function redisOutbox(label: string, args: string[]): Promise<Row> {
  const dir = mkdtempSync(join(tmpdir(), 'herald-bench-redis-'));
  const server = await new RedisServer({ args: ['--dir', dir, ...args] }).start();
  const writer = new Redis(server.url, { enableAutoPipelining: true });
  const reader = new Redis(server.url, { enableAutoPipelining: true });
  const key = 'bench:webhooks';
  try {
    await writer.xgroup('CREATE', key, DELIVERY_GROUP, '0', 'MKSTREAM');
    const t0 = performance.now();
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < EVENTS; i++) {
      writes.push(writer.xadd(key, '*', 'm', JSON.stringify(message(i))));
      if (i % 500 === 499) {
        await Promise.all(writes.splice(0));
      }
    }
    await Promise.all(writes);
    const t1 = performance.now();
    let settled = 0;
    while (settled < EVENTS) {
      const reply = (await reader.xreadgroup('GROUP', DELIVERY_GROUP, 'bench', 'COUNT', 100, 'STREAMS', key, '>')) as [string, [string, string[]][]][] | null;
      const batch = reply?.[0]?.[1] ?? [];
      if (batch.length === 0) throw new Error(`stream ran dry after ${settled} messages`);
      // A request of up to 100 events settles in one turn: one XACK and one XDEL for its messages.
      const ids = batch.map(([id, fields]) => {
        JSON.parse(fields[1]!);
        return id;
      });
      await Promise.all([writer.xack(key, DELIVERY_GROUP, ...ids), writer.xdel(key, ...ids)]);
      settled += batch.length;
    }
    const t2 = performance.now();
    return { target: label, writeMs: t1 - t0, settleMs: t2 - t1 };
  } finally {
    writer.disconnect();
    reader.disconnect();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const rows: Row[] = [];
rows.push(await lmdbOutbox());
rows.push(await redisOutbox('Redis stream, no persistence', []));
rows.push(await redisOutbox('Redis stream, AOF appendfsync everysec', ['--appendonly', 'yes', '--appendfsync', 'everysec']));
rows.push(await redisOutbox('Redis stream, AOF appendfsync always', ['--appendonly', 'yes', '--appendfsync', 'always']));

const rate = (ms: number): string => `${Math.round(EVENTS / (ms / 1000)).toLocaleString('en-US')}/s`;
const ref = rows[0]!;
const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
console.log(`\nWebhook outbox, ${EVENTS.toLocaleString('en-US')} entries, node ${process.version}\n`);
console.log(line(['outbox', 'write', 'take + settle', 'end to end', 'vs LMDB']));
console.log(line(['---', '---:', '---:', '---:', '---:']));
for (const r of rows) {
  const total = r.writeMs + r.settleMs;
  console.log(line([r.target, rate(r.writeMs), rate(r.settleMs), rate(total), `${((ref.writeMs + ref.settleMs) / total).toFixed(2)}×`]));
}
