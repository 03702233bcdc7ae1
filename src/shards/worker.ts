/**
 * Shard worker entry (runs in a worker thread, never on the main thread). Opens this
 * shard's LMDB environment, builds each area's handlers, and answers msgpackr-encoded
 * requests from the main thread (see messages.ts).
 */
import { threadId, workerData } from 'node:worker_threads';
import { join } from 'node:path';
import { HeraldError } from '../errors.js';
import type { HeraldConfig } from '../config/schema.js';
import { log, setLogLevel } from '../log.js';
import { shardMetrics } from '../metrics/shard-counters.js';
import { createShardPackr } from './codec.js';
import type { ShardEnvelope, ShardReply, ShardWorkerData } from './messages.js';
import type { ShardContext } from './context.js';
import { openShardDatabase } from './storage.js';
import { createChannelArea } from '../channels/shard-handlers.js';
import { createPushArea } from '../push/shard-handlers.js';
import { createWebhookArea } from '../webhooks/shard-handlers.js';

const packr = createShardPackr();
/** Longest block the test hooks (core.crash, core.hold) accept, ms. */
const MAX_TEST_HOLD_MS = 10_000;
const data = workerData as ShardWorkerData;
const startedAt = Date.now();

setLogLevel((data.config as HeraldConfig).logLevel);

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
  'core.metrics': () => shardMetrics(),
  'core.reload': (req) => {
    const config = (req as { config: HeraldConfig }).config;
    ctx.config = config;
    setLogLevel(config.logLevel);
    for (const area of areas) area.reload?.(config);
    return { reloaded: true };
  },
  'core.crash': (req) => {
    requireTestHooks('core.crash');
    // Block the thread (requests sent meanwhile pile up unanswered), then die without
    // answering or closing anything: what an uncaught failure in a shard looks like.
    blockThread((req as { holdMs?: number }).holdMs);
    process.exit(1);
  },
  'core.hold': (req) => {
    requireTestHooks('core.hold');
    return { heldMs: blockThread((req as { holdMs?: number }).holdMs) };
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

function requireTestHooks(type: string): void {
  if (process.env.HERALD_TEST_HOOKS !== '1') throw new HeraldError('ROUTE_NOT_FOUND', `${type} is a test hook: it needs HERALD_TEST_HOOKS=1`);
}

/** Blocks this thread for `holdMs` (clamped to [0, MAX_TEST_HOLD_MS]); returns the ms blocked. */
function blockThread(holdMs: unknown): number {
  const hold = Math.min(Math.max(Number(holdMs) || 0, 0), MAX_TEST_HOLD_MS);
  if (hold > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, hold);
  return hold;
}

/** Piscina task entry: one encoded request in, one encoded ShardReply out. */
export default async function handle(encoded: Uint8Array): Promise<Uint8Array> {
  const message = packr.unpack(encoded) as ShardEnvelope;
  let reply: ShardReply;
  try {
    const handler = handlers[message.type];
    if (!handler) throw new Error(`unknown shard request type ${message.type}`);
    if (closing && message.type !== 'core.close') throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is closing');
    // Queued behind a stall past the time the main thread waits: it has answered the caller
    // with a failure already, so doing the work now would only do what the caller was told failed.
    if (Date.now() > message.deadline) throw new HeraldError('SHARD_UNAVAILABLE', `Shard ${ctx.shardIndex} reached the request after its deadline`);
    reply = { ok: true, value: await handler(message), boot: threadId };
  } catch (err) {
    if (err instanceof HeraldError) {
      reply = { ok: false, code: err.code, message: err.message, boot: threadId };
    } else {
      log.error('shard handler failed', { shard: ctx.shardIndex, type: message.type, error: String((err as Error)?.stack ?? err) });
      reply = { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard', boot: threadId };
    }
  }
  return packr.pack(reply);
}
