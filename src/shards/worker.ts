/**
 * Shard worker entry (runs in a worker thread, never on the main thread). Opens this
 * shard's LMDB environment, builds each area's handlers, and answers msgpackr-encoded
 * requests from the main thread (see messages.ts).
 */
import { threadId, workerData } from 'node:worker_threads';
import { join } from 'node:path';
import { Packr } from 'msgpackr';
import { HeraldError } from '../errors.js';
import type { HeraldConfig } from '../config/schema.js';
import type { ShardReply, ShardWorkerData } from './messages.js';
import type { ShardContext } from './context.js';
import { openShardDatabase } from './storage.js';
import { createChannelArea } from '../channels/shard-handlers.js';
import { createPushArea } from '../push/shard-handlers.js';
import { createWebhookArea } from '../webhooks/shard-handlers.js';

const packr = new Packr({ useRecords: false, moreTypes: false });
const data = workerData as ShardWorkerData;
const startedAt = Date.now();

const ctx: ShardContext = {
  shardIndex: data.shardIndex,
  shardCount: data.shardCount,
  dataDir: data.dataDir,
  config: data.config as HeraldConfig,
  installSecret: data.installSecret,
  root: openShardDatabase(join(data.dataDir, `shard-${data.shardIndex}`)),
};

const webhooks = createWebhookArea(ctx);
const channels = createChannelArea(ctx, webhooks.emitter);
const push = createPushArea(ctx, webhooks.emitter);
const areas = [channels, push, webhooks];
let closing: Promise<void> | undefined;

type AnyHandler = (req: unknown) => unknown;
const handlers: Record<string, AnyHandler> = {
  ...(channels.handlers as unknown as Record<string, AnyHandler>),
  ...(push.handlers as unknown as Record<string, AnyHandler>),
  ...(webhooks.handlers as unknown as Record<string, AnyHandler>),
  'core.ping': () => ({ shardIndex: ctx.shardIndex, pid: process.pid, uptimeMs: Date.now() - startedAt }),
  'core.crash': (req) => {
    if (process.env.HERALD_TEST_HOOKS !== '1') throw new HeraldError('ROUTE_NOT_FOUND', 'core.crash is a test hook: it needs HERALD_TEST_HOOKS=1');
    const { holdMs } = req as { holdMs?: number };
    const hold = Math.min(Math.max(Number(holdMs) || 0, 0), 10_000);
    // Block the thread (requests sent meanwhile pile up unanswered), then die without
    // answering or closing anything: what an uncaught failure in a shard looks like.
    if (hold > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, hold);
    process.exit(1);
  },
  'core.close': async () => {
    closing ??= (async () => {
      for (const area of areas) await area.close?.();
      await ctx.root.flushed;
      await ctx.root.close();
    })();
    await closing;
    return { closed: true };
  },
};

/** Piscina task entry: one encoded request in, one encoded ShardReply out. */
export default async function handle(encoded: Uint8Array): Promise<Uint8Array> {
  const message = packr.unpack(encoded) as { id: number; type: string };
  let reply: ShardReply;
  try {
    const handler = handlers[message.type];
    if (!handler) throw new Error(`unknown shard request type ${message.type}`);
    if (closing && message.type !== 'core.close') throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is closing');
    reply = { ok: true, value: await handler(message), boot: threadId };
  } catch (err) {
    if (err instanceof HeraldError) {
      reply = { ok: false, code: err.code, message: err.message, boot: threadId };
    } else {
      process.stderr.write(
        JSON.stringify({ t: new Date().toISOString(), level: 'error', msg: 'shard handler failed', shard: ctx.shardIndex, type: message.type, error: String((err as Error)?.stack ?? err) }) + '\n',
      );
      reply = { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard', boot: threadId };
    }
  }
  return packr.pack(reply);
}
