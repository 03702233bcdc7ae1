/**
 * The push hand-off ceiling: a bare node:http2 client blasting the fake gateway with the
 * requests Herald would send for an audience, from as many worker threads as Herald has shards,
 * each with a shard's sessions and streams in flight (see h2-ceiling-worker.ts). Timed like
 * Herald's publish: from the start signal to the fake having answered every request.
 */
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { importPKCS8, SignJWT } from 'jose';
import { BENCH_ACCESS_TOKEN } from './fake-gateway-protocol.js';
import type { FakeGatewayProcess } from './fake-gateway-control.js';
import type { CeilingWorkerData, CeilingWorkerMessage } from './h2-ceiling-worker.js';
import { BENCH_APNS, BENCH_FCM } from './herald-launcher.js';
import { CpuMeter, machineBusyCpuUs, processCpuUs } from '../proc-stats.js';
import { epochMs } from './publish-client.js';

export interface CeilingOptions {
  repoRoot: string;
  gateway: FakeGatewayProcess;
  /** Worker threads: Herald's shard count. */
  workers: number;
  /** HTTP/2 sessions per platform per worker: Herald's `connectionsPerGateway`. */
  sessionsPerPlatform: number;
  /** Streams in flight per worker: Herald's `pushDelivery.concurrency`. */
  concurrency: number;
  /** The audience: device indexes j * every for j < members. */
  every: number;
  members: number;
  timeoutMs: number;
}

export interface CeilingResult {
  members: number;
  /** From the start signal to the fake's last 200, ms. */
  handoffMs: number;
  perSecond: number;
  /** From the start signal to the fake's first request, ms. */
  firstRequestMs: number | null;
  ok: number;
  failed: number;
  firstError?: string;
  /** % of one core during the run: this process (the client threads), the fake, the whole machine. */
  cpu: { clientPct: number; gatewayPct: number; machinePct: number };
}

/** An APNs provider token signed like Herald's (ES256, kid, iss, iat) with the test key. */
async function apnsProviderToken(repoRoot: string): Promise<string> {
  const key = await importPKCS8(readFileSync(join(repoRoot, 'test/fixtures/apns-key.pem'), 'utf8'), 'ES256');
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: BENCH_APNS.keyId })
    .setIssuer(BENCH_APNS.teamId)
    .setIssuedAt()
    .sign(key);
}

/** Runs the ceiling once over `members` devices. */
export async function runCeiling(options: CeilingOptions): Promise<CeilingResult> {
  const { gateway } = options;
  const apnsJwt = await apnsProviderToken(options.repoRoot);
  const publishId = `pubid-${randomUUID()}`;
  const workers: Worker[] = [];
  const firstMessage = new Map<Worker, Promise<CeilingWorkerMessage>>();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`ceiling run took longer than ${options.timeoutMs / 1000} s`)), options.timeoutMs);
  });
  timeout.catch(() => undefined);
  const nextMessage = (worker: Worker): Promise<CeilingWorkerMessage> =>
    new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  try {
    for (let workerIndex = 0; workerIndex < options.workers; workerIndex++) {
      const workerData: CeilingWorkerData = {
        origin: gateway.origin,
        caFile: gateway.caFile,
        workerIndex,
        workers: options.workers,
        every: options.every,
        members: options.members,
        sessionsPerPlatform: options.sessionsPerPlatform,
        concurrency: options.concurrency,
        apnsJwt,
        fcmAccessToken: BENCH_ACCESS_TOKEN,
        fcmProjectId: BENCH_FCM.projectId,
        publishId,
      };
      const worker = new Worker(new URL('./h2-ceiling-worker.js', import.meta.url), { workerData });
      workers.push(worker);
      firstMessage.set(worker, nextMessage(worker));
    }
    await Promise.race([Promise.all(firstMessage.values()), timeout]);
    gateway.reset();
    const cpu = new CpuMeter(() => [processCpuUs(process.pid), processCpuUs(gateway.pid), machineBusyCpuUs()]);
    const done = workers.map(nextMessage);
    const startedAt = epochMs();
    const reached = gateway.waitFor(options.members, options.timeoutMs);
    for (const worker of workers) worker.postMessage('go');
    const counts = await Promise.race([reached, timeout]);
    const handoffMs = epochMs() - startedAt;
    if (counts.rejected > 0) throw new Error(`the fake gateway refused ${counts.rejected} ceiling requests (wrong path or no authorization)`);
    const [clientPct, gatewayPct, machinePct] = cpu.percent() as [number, number, number];
    const results = await Promise.race([Promise.all(done), timeout]);
    let ok = 0;
    let failed = 0;
    let firstError: string | undefined;
    for (const result of results) {
      if (result.type !== 'done') throw new Error(`unexpected ceiling worker message ${result.type}`);
      ok += result.ok;
      failed += result.failed;
      firstError ??= result.firstError;
    }
    return {
      members: options.members,
      handoffMs,
      perSecond: (options.members / handoffMs) * 1000,
      firstRequestMs: counts.firstAtMs === null ? null : counts.firstAtMs - startedAt,
      ok,
      failed,
      ...(firstError ? { firstError } : {}),
      cpu: { clientPct, gatewayPct, machinePct },
    };
  } finally {
    clearTimeout(timer);
    await Promise.all(workers.map((worker) => worker.terminate()));
  }
}
