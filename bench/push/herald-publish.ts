/**
 * One audience through the real Herald: a fresh Herald process on the seeded data dir (so its
 * memory peaks belong to this audience alone), a warm-up publish to the smallest interest
 * (connections, provider and access tokens, JIT), then the measured publish. Hand-off time runs
 * from the publish's 200 to the fake gateway having answered 200 to every device; memory is
 * sampled from just before the publish until every shard reports the publish finished.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deviceIdFor } from '../../src/push/http/devices/device-id.js';
import type { DataDirIdentity } from '../../src/shards/data-dir.js';
import { benchDevice, BENCH_INSTANCE } from './dataset.js';
import type { FakeGatewayProcess } from './fake-gateway-control.js';
import { launchHerald } from './herald-launcher.js';
import { CpuMeter, machineBusyCpuUs, processCpuUs, readMemoryKb, type MemoryKb } from '../proc-stats.js';
import { MemorySampler, type MemoryPeaks } from './proc-sampler.js';
import { epochMs, publish, requireDevice, waitFinished, type AcceptedPublish } from './publish-client.js';
import type { SeededDataDir } from './seed.js';

export interface HeraldAudienceOptions {
  repoRoot: string;
  data: SeededDataDir;
  gateway: FakeGatewayProcess;
  /** The measured publish's interest and how many devices hold it. */
  interest: string;
  members: number;
  /** The warm-up publish's interest and size. */
  warmUp: { interest: string; members: number };
  /** Profile Herald's threads into this directory. */
  cpuProfDir?: string;
  /** The whole audience run (start, warm-up, publish, stop) is abandoned after this long, ms. */
  timeoutMs: number;
}

export interface HeraldAudienceResult {
  interest: string;
  members: number;
  /** Request sent → 200 (both shards stored the publish durably), ms. */
  acceptMs: number;
  /** 200 → the fake's first request, ms (scan start, shard scheduling). */
  firstRequestMs: number | null;
  /** 200 → the fake answered the last device, ms. */
  handoffMs: number;
  perSecond: number;
  /** 200 → every shard stored its part as finished (final checkpoint included), ms. */
  finishedMs: number;
  /** Herald's own statistics: devices addressed and accepted by the gateways. */
  recipients: number;
  sent: number;
  failed: number;
  /** The warm-up publish's hand-off: the cold figure (sessions, tokens, JIT). */
  warmUpHandoffMs: number;
  /** Herald's memory after start-up and warm-up, before the measured publish, KiB. */
  idle: MemoryKb;
  /** Peaks while the measured publish ran, KiB. */
  peaks: MemoryPeaks;
  /** % of one core during the hand-off: Herald (all threads), the fake, the whole machine. */
  cpu: { heraldPct: number; gatewayPct: number; machinePct: number };
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Publishes and waits until the fake has answered `members` requests and Herald says finished. */
async function publishAndWait(
  baseUrl: string,
  gateway: FakeGatewayProcess,
  interest: string,
  members: number,
  timeoutMs: number,
): Promise<{ accepted: AcceptedPublish; reachedAtMs: number; firstAtMs: number | null }> {
  gateway.reset();
  const accepted = await publish(baseUrl, [interest]);
  const counts = await gateway.waitFor(members, timeoutMs);
  if (counts.rejected > 0) throw new Error(`the fake gateway refused ${counts.rejected} requests of the publish to ${interest} (wrong path or no authorization)`);
  return { accepted, reachedAtMs: epochMs(), firstAtMs: counts.firstAtMs };
}

/** Runs one audience on a fresh Herald; the data dir is left marked in use if anything fails. */
export async function runHeraldAudience(options: HeraldAudienceOptions): Promise<HeraldAudienceResult> {
  const { data, gateway } = options;
  const shards = data.manifest.shards;
  const unmark = data.markInUse();
  const herald = await launchHerald({
    repoRoot: options.repoRoot,
    dataDir: data.dataDir,
    shards,
    gateway,
    ...(options.cpuProfDir ? { cpuProfDir: options.cpuProfDir } : {}),
  });
  let clean = false;
  try {
    const result = await withTimeout((async (): Promise<HeraldAudienceResult> => {
      // The seeded devices are Herald's: the device API finds them under the ids it derives.
      const { installSecret } = JSON.parse(readFileSync(join(data.dataDir, 'herald.json'), 'utf8')) as DataDirIdentity;
      for (const i of [0, 1, 2, 3]) {
        const device = benchDevice(i);
        await requireDevice(herald.baseUrl, device.platform, deviceIdFor(installSecret, BENCH_INSTANCE.instanceId, device.platform, device.token));
      }

      const warm = await publishAndWait(herald.baseUrl, gateway, options.warmUp.interest, options.warmUp.members, options.timeoutMs);
      await waitFinished(herald.baseUrl, warm.accepted.publishId, 30_000);
      const idle = readMemoryKb(herald.pid);

      const sampler = new MemorySampler(herald.pid);
      const cpu = new CpuMeter(() => [processCpuUs(herald.pid), processCpuUs(gateway.pid), machineBusyCpuUs()]);
      const run = await publishAndWait(herald.baseUrl, gateway, options.interest, options.members, options.timeoutMs);
      const [heraldPct, gatewayPct, machinePct] = cpu.percent() as [number, number, number];
      const stats = await waitFinished(herald.baseUrl, run.accepted.publishId, 60_000);
      const peaks = sampler.stop();

      const sent = stats.gateways.apns.sent + stats.gateways.fcm.sent + stats.gateways.web.sent;
      const failed = stats.gateways.apns.failed + stats.gateways.fcm.failed + stats.gateways.web.failed;
      if (stats.recipients !== options.members || sent !== options.members) {
        throw new Error(`publish to ${options.interest}: Herald counted ${stats.recipients} recipients and ${sent} sent, expected ${options.members}`);
      }
      const handoffMs = run.reachedAtMs - run.accepted.acceptedAtMs;
      return {
        interest: options.interest,
        members: options.members,
        acceptMs: run.accepted.acceptedAtMs - run.accepted.sentAtMs,
        firstRequestMs: run.firstAtMs === null ? null : run.firstAtMs - run.accepted.acceptedAtMs,
        handoffMs,
        perSecond: (options.members / handoffMs) * 1000,
        finishedMs: Date.parse(stats.finishedAt!) - Date.parse(stats.acceptedAt),
        recipients: stats.recipients,
        sent,
        failed,
        warmUpHandoffMs: warm.reachedAtMs - warm.accepted.acceptedAtMs,
        idle,
        peaks,
        cpu: { heraldPct, gatewayPct, machinePct },
      };
    })(), options.timeoutMs, `Herald run for ${options.interest}`);
    clean = true;
    return result;
  } finally {
    const code = await herald.stop();
    // Every publish finished and Herald stopped cleanly: nothing will resume on the next start.
    if (clean && code === 0) unmark();
    else if (herald.stderr()) process.stderr.write(herald.stderr());
  }
}
