/**
 * The generic shard worker runtime (runs in a worker thread, never on the main thread). Opens
 * this shard's LMDB environment, builds the areas the entry file lists (src/shard-worker.ts),
 * refuses two areas answering the same request type, and answers msgpackr-encoded requests
 * from the main thread (Piscina tasks) and from front ends' attached ports (front-end-ports.ts),
 * both through one `answer` (see messages.ts). It imports no area: the entry file hands them in.
 */
import { threadId, workerData, type MessagePort } from 'node:worker_threads';
import { join } from 'node:path';
import { HeraldError } from '../errors.js';
import type { HeraldConfig } from '../config/schema.js';
import { describeError, log, setLogLevel } from '../log.js';
import { shardMetrics } from './shard-counters.js';
import { ShardCodec } from './codec.js';
import type { ShardEnvelope, ShardPortTask, ShardReply, ShardWorkerData } from './messages.js';
import { FrontEndPorts } from './front-end-ports.js';
import { setFrontEndNotices } from './front-end-notices.js';
import { mergeHandlers, requireTestHooks, type AnyHandler, type ShardArea, type ShardContext, type TenantChange } from './context.js';
import { openShardDatabase } from './storage.js';
import { installDiskFullGuard, isWriteSpaceError, logWriteFailure, type DiskFullGuard } from './disk-full.js';
import { configWithTenants, tenantMapsOf } from './tenant-lists.js';

const codec = new ShardCodec();
/** Longest block the test hooks (core.crash, core.stall) accept, ms. */
const MAX_TEST_STALL_MS = 10_000;

/** Builds the areas of one shard; called once per worker, with its context. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ShardAreasFactory = (ctx: ShardContext) => ShardArea<any>[];

/** Requests a worker takes even after their deadline: each is the only one of its kind to come. */
const TAKEN_PAST_DEADLINE = new Set(['core.attachFrontEnd', 'core.serving']);

/**
 * Starts this worker's shard with the areas `build` returns and answers the Piscina task entry
 * (the entry file's default export): one encoded request (a ShardPortTask when it hands over a
 * port) in, one encoded ShardReply out. Throws at start-up when two areas (or an area and the
 * core) answer the same request type.
 */
export function createShardWorker(build: ShardAreasFactory): (task: Uint8Array | ShardPortTask) => Promise<Uint8Array> {
  const data = workerData as ShardWorkerData;
  const startedAt = Date.now();
  setLogLevel((data.config as HeraldConfig).logLevel);
  const shardDir = join(data.dataDir, `shard-${data.shardIndex}`);
  const root = openShardDatabase(shardDir);
  const diskFull = installDiskFullGuard(shardDir, data.dataDir, data.shardIndex);
  takeStorageFailures(diskFull);
  const servingWaiters: (() => void)[] = [];
  let serving = data.serving;
  const markServing = (): void => {
    serving = true;
    for (const run of servingWaiters.splice(0)) run();
  };
  const ctx: ShardContext = {
    shardIndex: data.shardIndex,
    shardCount: data.shardCount,
    dataDir: data.dataDir,
    config: data.config as HeraldConfig,
    installSecret: data.installSecret,
    root,
    testHooks: data.testHooks || process.env.HERALD_TEST_HOOKS === '1',
    onServing: (run) => (serving ? run() : void servingWaiters.push(run)),
  };
  // The running apps and push instances by id: a change replaces one entry (tenant-lists.ts).
  let tenants = tenantMapsOf(ctx.config);
  const areas = build(ctx);
  const storageWrites = new Set<string>(areas.flatMap((a) => (a.storageWrites ?? []) as string[]));
  let closing: Promise<void> | undefined;
  // `answer` (below) is hoisted; it reads the handlers only when a request arrives.
  const frontEnds = new FrontEndPorts(codec, answer, ctx.shardIndex, ctx.config.shardRequestTimeoutMs);
  setFrontEndNotices((notice) => frontEnds.broadcast(notice), () => frontEnds.any);

  const core: Record<string, AnyHandler> = {
    'core.ping': () => ({ shardIndex: ctx.shardIndex, pid: process.pid, uptimeMs: Date.now() - startedAt, serving }),
    'core.metrics': () => ({ ...shardMetrics(), storage: diskFull.figures() }),
    // A reloaded config (SIGHUP): the context takes it, then every area's reload hook.
    'core.reload': (req) => {
      const config = (req as { config: HeraldConfig }).config;
      ctx.config = config;
      tenants = tenantMapsOf(config);
      setLogLevel(config.logLevel);
      for (const area of areas) area.reload?.(config);
      return { reloaded: true };
    },
    // Tenants changed through the admin API: only the named entries are replaced, whatever the count of the others.
    'core.tenants': (req) => {
      // Copied: the decoded strings are slices of longer ones, which the config would keep alive (codec.ts).
      const change = structuredClone(req) as TenantChange;
      for (const id of change.removedApps ?? []) tenants.apps.delete(id);
      for (const app of change.apps ?? []) tenants.apps.set(app.id, app);
      for (const id of change.removedPush ?? []) tenants.push.delete(id);
      for (const instance of change.push ?? []) tenants.push.set(instance.instanceId, instance);
      const config = configWithTenants(ctx.config, tenants);
      ctx.config = config;
      for (const area of areas) {
        if (area.tenantsChanged) area.tenantsChanged(change, config);
        else area.reload?.(config);
      }
      return { applied: true };
    },
    'core.attachFrontEnd': (req) => {
      const { frontEnd, port, awaitRestoreOf } = req as { frontEnd: number; port?: MessagePort; awaitRestoreOf?: number[] };
      if (!port) throw new Error('core.attachFrontEnd came without a port (send it with ShardPool.attachFrontEnd)');
      frontEnds.attach(frontEnd, port, awaitRestoreOf);
      return { attached: true };
    },
    'core.detachFrontEnd': (req) => ({ detached: frontEnds.detach((req as { frontEnd: number }).frontEnd) }),
    // The hold it ends is kept by FrontEndPorts, which sees it on its way here.
    'core.restored': () => ({ restored: true }),
    'core.serving': () => {
      markServing();
      return { serving: true };
    },
    'core.crash': (req) => {
      requireTestHooks(ctx, 'core.crash');
      // Block the thread (requests sent meanwhile pile up unanswered), then die without
      // answering or closing anything: what an uncaught failure in a shard looks like.
      blockThread((req as { stallMs?: number }).stallMs);
      process.exit(1);
    },
    'core.stall': (req) => {
      requireTestHooks(ctx, 'core.stall');
      return { stalledMs: blockThread((req as { stallMs?: number }).stallMs) };
    },
    'core.close': async () => {
      closing ??= (async () => {
        for (const area of areas) await area.close?.();
        diskFull.close();
        try {
          await ctx.root.flushed;
        } catch {
          // A commit that failed (a full disk) was answered or logged already: close anyway.
        }
        await ctx.root.close();
      })();
      await closing;
      return { closed: true };
    },
  };
  const handlers = mergeHandlers([core, ...areas.map((a) => a.handlers as Record<string, AnyHandler>)]);

  /** One request's reply, whichever way it came (a Piscina task or a front end's port). */
  async function answer(message: ShardEnvelope): Promise<ShardReply> {
    const type = message.request.type;
    let reply: ShardReply;
    try {
      const handler = handlers[type];
      if (!handler) throw new Error(`unknown shard request type ${type}`);
      if (closing && type !== 'core.close') throw new HeraldError('SHARD_UNAVAILABLE', 'Shard is closing');
      // Queued behind a stall past the time the main thread waits: it has answered the caller
      // with a failure already, so doing the work now would only do what the caller was told failed.
      // A front end's port is taken whenever it comes: it is that front end's only line to this
      // shard; so is the notice that the server serves, which nothing else would bring.
      if (Date.now() > message.deadline && !TAKEN_PAST_DEADLINE.has(type)) throw new HeraldError('SHARD_UNAVAILABLE', `Shard ${ctx.shardIndex} reached the request after its deadline`);
      if (storageWrites.has(type)) diskFull.refuseWrite();
      reply = { ok: true, value: await handler(message.request), boot: threadId };
    } catch (err) {
      if (err instanceof HeraldError) {
        reply = { ok: false, code: err.code, message: err.message, boot: threadId };
      } else if (await diskFull.noteFailure(err)) {
        const full = diskFull.error();
        reply = { ok: false, code: full.code, message: full.message, boot: threadId };
      } else {
        log.error('shard handler failed', { shard: ctx.shardIndex, type, error: describeError(err) });
        reply = { ok: false, code: 'INTERNAL', message: 'Internal error in storage shard', boot: threadId };
      }
    }
    return reply;
  }

  return async function handle(task: Uint8Array | ShardPortTask): Promise<Uint8Array> {
    if (task instanceof Uint8Array) return codec.encode(await answer(codec.decode(task) as ShardEnvelope));
    const message = codec.decode(task.envelope) as ShardEnvelope;
    // The port travelled beside the envelope (msgpackr cannot carry it): the request takes it back.
    return codec.encode(await answer({ ...message, request: { ...message.request, port: task.port } as ShardEnvelope['request'] }));
  };
}

/**
 * A commit that failed for want of room rejects a promise lmdb-js keeps for itself
 * (`commitError`) and prints the raw errno: the disk-full guard takes both (it logs once per
 * episode); any other unhandled rejection still ends the worker, as before.
 */
function takeStorageFailures(guard: DiskFullGuard): void {
  process.on('unhandledRejection', (reason) => {
    if (isWriteSpaceError(reason)) {
      if (!guard.noteCause(reason)) log.error('storage write failed', { error: String(reason) });
      return;
    }
    // A write nobody awaited that failed to commit: not a bug in the shard's state, so it is logged, not fatal.
    if ((reason as { commitError?: unknown } | undefined)?.commitError) {
      logWriteFailure(reason, 'storage write failed');
      return;
    }
    throw reason;
  });
  /* eslint-disable no-console -- lmdb-js prints a failed commit's errno with console.error */
  const printError = console.error.bind(console);
  console.error = (...args: unknown[]): void => {
    if (args.length === 1 && isWriteSpaceError(args[0]) && /lmdb/.test(String((args[0] as Error).stack))) return;
    printError(...args);
  };
  /* eslint-enable no-console */
}

/** Blocks this thread for `stallMs` (clamped to [0, MAX_TEST_STALL_MS]); returns the ms blocked. */
function blockThread(stallMs: unknown): number {
  const stall = Math.min(Math.max(Number(stallMs) || 0, 0), MAX_TEST_STALL_MS);
  if (stall > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, stall);
  return stall;
}


