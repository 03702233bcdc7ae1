/**
 * One shard's part of one publish: streams this shard's matching devices from the device
 * store and sends each through the instance's gateway client, with flat memory whatever the
 * audience size:
 *
 * - The scan generator is pulled only when a send permit (SendLimiter, shard-wide) is free and
 *   the completion window has room, so at most `concurrency` sends are in flight and at most
 *   `windowSize` devices sit between the checkpoint and the read position.
 * - Outcomes are counted twice: `live` as sends settle (for statistics), `committed` as the
 *   finished prefix of the window advances (CompletionWindow). Every `checkpointEvery`
 *   committed devices, the committed counts and the scan position of the last committed device
 *   are written in one transaction, so after a crash the scan resumes right after it: no device
 *   is skipped, at most the uncommitted ones (≤ checkpointEvery + windowSize) are sent again,
 *   and the stored counts count each device once.
 * - A dead token deletes the device on this shard, unless it was re-registered with another
 *   token meanwhile.
 * - stop() ends the loop at the next device; sends cut by the gateway clients closing are left
 *   uncommitted, so the restart sends them again.
 */
import { instanceOfNamespace } from '../../store/namespaces.js';
import { setImmediate as yieldToEventLoop, setTimeout as sleep } from 'node:timers/promises';
import { describeError, log } from '../../../log.js';
import { logWriteFailure } from '../../../shards/disk-full.js';
import { PLATFORMS, type Platform } from '../../platform.js';
import { CLOSED_OUTCOME } from '../../gateways/retry.js';
import type { PushDeviceStore, ScanPartition, ScanPosition } from '../../store/device-store.js';
import { CompletionWindow } from './completion-window.js';
import type { GatewayRegistry } from './gateway-registry.js';
import { gatewayPayload } from './payload.js';
import { LeaseLostError, statsOf, usageMonth, type ProgressRecord, type PublishRecordStore, type ShardReport } from '../../store/publish-record-store.js';
import { addErrorReason, emptyUserBits, failureReasonKey, orUserBits, setUserBit, userIndexOf } from '../../publish-results.js';
import { countNotification, countPublishResends } from '../../../shards/shard-counters.js';
import { RateLimitedLog } from '../../../log.js';
import type { SendLimiter } from './send-limiter.js';
import type { GatewayCounts, PublishJob, PublishShardStats } from '../../messages/publishes.js';

export interface PublishRunDeps {
  shardIndex: number;
  /** What the fan-out needs of the shard's device store. */
  devices: Pick<PushDeviceStore, 'scanInterestSteps' | 'scanUserSteps' | 'scanDeviceSteps' | 'deleteIfToken'>;
  /** Where checkpoints go: the shard's LMDB, or the cluster's PostgreSQL (lease-checked). */
  publishes: Pick<PublishRecordStore, 'saveProgress'>;
  gateways: GatewayRegistry;
  limiter: SendLimiter;
  /** Committed devices between two durable checkpoints. */
  checkpointEvery: number;
  /** Most devices between the checkpoint and the scan's read position. */
  windowSize: number;
  /** Told the bytes a finished part's records add to what the retention keeps. */
  onRetained?: (bytes: number) => void;
  now?: () => number;
}

/** Loop turns between two yields to the event loop. */
const YIELD_EVERY = 256;

/** How one device ended: not addressed (no payload for its platform), accepted, refused, or dead and deleted. */
type DeviceOutcome = 'skipped' | 'sent' | 'failed' | 'removed';

interface Slot {
  position: ScanPosition;
  platform: Platform;
  /** The device's user as its index in the sorted targets, for user publishes only. */
  userIndex: number | undefined;
  outcome: DeviceOutcome;
  /** Why it failed (failed and removed outcomes). */
  reason?: string | undefined;
}

interface Tally {
  recipients: number;
  gateways: Record<Platform, GatewayCounts>;
  /** User publishes only: bits over the sorted targets (at most 1000); empty for interest publishes. */
  usersWithDevices: Uint8Array;
  usersDelivered: Uint8Array;
}

function tallyOf(record: ProgressRecord, users: number): Tally {
  return {
    recipients: record.recipients,
    gateways: {
      apns: copyCounts(record.gateways.apns),
      fcm: copyCounts(record.gateways.fcm),
      web: copyCounts(record.gateways.web),
    },
    usersWithDevices: orUserBits(emptyUserBits(users), record.users?.withDevices ?? emptyUserBits(0)),
    usersDelivered: orUserBits(emptyUserBits(users), record.users?.deliveredToGateway ?? emptyUserBits(0)),
  };
}

function copyCounts(counts: GatewayCounts): GatewayCounts {
  return counts.errors ? { ...counts, errors: { ...counts.errors } } : { ...counts };
}

/** One warn line per instance, platform and reason every 10 s (with a count of the others). */
const failureLog = new RateLimitedLog('warn', 10_000);

function count(tally: Tally, slot: Slot): void {
  if (slot.outcome === 'skipped') return;
  const counts = tally.gateways[slot.platform];
  tally.recipients++;
  counts.recipients++;
  if (slot.outcome === 'sent') counts.sent++;
  else counts.failed++;
  if (slot.outcome === 'removed') counts.removed++;
  if (slot.outcome !== 'sent') addErrorReason(counts, failureReasonKey(slot.reason ?? 'unknown'));
  if (slot.userIndex !== undefined) {
    setUserBit(tally.usersWithDevices, slot.userIndex);
    if (slot.outcome === 'sent') setUserBit(tally.usersDelivered, slot.userIndex);
  }
}

/** A cluster partition's run: which devices, and how many of its first sends may repeat another node's. */
export interface PartitionScope {
  partition: ScanPartition;
  /**
   * Taken over from a node whose lease expired: that node may have sent up to this many
   * devices past its last stored checkpoint, so this run's first that many sends are counted
   * in herald_push_publish_resends_total (an upper bound of the duplicates).
   */
  possibleResends: number;
}

/** One shard's part of one publish, from a fresh or a stored (resumed) progress record. */
export class PublishRun {
  readonly job: PublishJob;
  private readonly deps: PublishRunDeps;
  private readonly now: () => number;
  /** What is (or is being) written: committed counts and checkpoint. */
  private readonly record: ProgressRecord;
  private readonly committed: Tally;
  private readonly live: Tally;
  private readonly window = new CompletionWindow<Slot>();
  /** User publishes: each target user's index in the sorted targets (the bit of its outcome). */
  private readonly userIndex: Map<string, number> | undefined;
  private persistedRecipients: number;
  private sinceCheckpoint = 0;
  private stopping = false;
  /** Set just before the gateway clients close: failures from then on are cut sends, not answers. */
  private cut = false;
  private wakeLoop: (() => void) | undefined;
  private dirty = false;
  private writing: Promise<void> | undefined;
  private readonly scope: PartitionScope | undefined;
  private possibleResends: number;
  /** Cluster: another node took the partition over; nothing more of this run is stored. */
  private leaseLost = false;

  constructor(job: PublishJob, record: ProgressRecord, deps: PublishRunDeps, scope?: PartitionScope) {
    this.job = job;
    this.deps = deps;
    this.scope = scope;
    this.possibleResends = scope?.possibleResends ?? 0;
    this.now = deps.now ?? Date.now;
    this.record = { ...record };
    const users = job.kind === 'users' ? userIndexOf(job.targets) : [];
    if (job.kind === 'users') this.userIndex = new Map(users.map((user, i) => [user, i]));
    this.committed = tallyOf(record, users.length);
    this.live = tallyOf(record, users.length);
    this.persistedRecipients = record.recipients;
  }

  /**
   * Runs the part to its end: `finished` (every device handled, state stored as finished) or
   * `stopped` (stop() was called; the checkpoint is stored and a restart resumes from it).
   */
  async run(): Promise<'finished' | 'stopped' | 'lost'> {
    if (this.record.state === 'queued') {
      // Stored with the first checkpoint (statistics read a running part live): a small
      // publish costs one write per shard for its whole run.
      this.record.state = 'sending';
      this.record.startedAt = this.now();
    }
    const payloads: Partial<Record<Platform, Record<string, unknown>>> = {};
    for (const platform of PLATFORMS) {
      const payload = this.job.payloads[platform];
      if (payload) payloads[platform] = gatewayPayload(platform, payload, instanceOfNamespace(this.job.instanceId), this.job.publishId);
    }
    const resumeFrom = this.record.position ?? undefined;
    const partition = this.scope?.partition;
    const scan = this.job.kind === 'interests'
      ? this.deps.devices.scanInterestSteps(this.job.instanceId, this.job.targets, resumeFrom, partition)
      : this.job.kind === 'users'
        ? this.deps.devices.scanUserSteps(this.job.instanceId, this.job.targets, resumeFrom, partition)
        : this.deps.devices.scanDeviceSteps(this.job.instanceId, this.job.targets, resumeFrom, partition);
    const inFlight = new Set<Promise<void>>();
    let exhausted = false;
    let sinceYield = 0;
    try {
      while (!this.stopping) {
        // Permits and skipped devices resolve synchronously: let I/O and shard requests in now and then.
        if (++sinceYield >= YIELD_EVERY) {
          sinceYield = 0;
          await yieldToEventLoop();
          continue;
        }
        if (this.window.size >= this.deps.windowSize) {
          await new Promise<void>((resolve) => (this.wakeLoop = resolve));
          this.wakeLoop = undefined;
          continue;
        }
        if (!(await this.deps.limiter.acquire())) break;
        if (this.stopping) {
          this.deps.limiter.release();
          break;
        }
        // LMDB answers at once; PostgreSQL with a promise when it reads a batch.
        const step = scan.next();
        const next = step instanceof Promise ? await step : step;
        if (next.done) {
          this.deps.limiter.release();
          exhausted = true;
          break;
        }
        const { device, position } = next.value;
        if (device === null) {
          // A stretch of devices skipped inside the scan (de-duplication): nothing to send or
          // count, and the resume position stays with the last device handled. Let I/O and
          // shard requests in before reading on.
          this.deps.limiter.release();
          sinceYield = 0;
          await yieldToEventLoop();
          continue;
        }
        const userIndex = this.userIndex && device.userId !== undefined ? this.userIndex.get(device.userId) : undefined;
        const slot = this.window.push({ position, platform: device.platform, userIndex, outcome: 'skipped' });
        const payload = payloads[device.platform];
        const client = payload ? this.deps.gateways.client(this.job.instanceId, device.platform) : undefined;
        if (!payload || typeof client === 'string' || client === undefined) {
          // No payload for this platform: not addressed. No usable client: addressed, failed.
          if (payload) {
            slot.value.outcome = 'failed';
            slot.value.reason = client === 'unusable-config' ? `unusable credentials for ${device.platform}` : client === 'closed' ? 'shutting down' : `no credentials for ${device.platform}`;
          }
          this.deps.limiter.release();
          this.settle(slot);
          continue;
        }
        if (this.possibleResends > 0) {
          this.possibleResends--;
          countPublishResends(1);
        }
        const send = client
          .send({ deviceId: device.id, token: device.token, ...(device.bundleIdentifier ? { bundleIdentifier: device.bundleIdentifier } : {}), payload })
          .then(async (outcome) => {
            if (outcome === CLOSED_OUTCOME || (this.cut && outcome.kind === 'failed')) return; // cut by shutdown: leave uncommitted
            if (outcome.kind === 'dead-token') {
              slot.value.outcome = 'removed';
              slot.value.reason = outcome.reason;
              await this.removeDevice(device.id, device.token);
            } else {
              slot.value.outcome = outcome.kind === 'sent' ? 'sent' : 'failed';
              if (outcome.kind === 'failed') slot.value.reason = outcome.reason;
            }
            this.settle(slot);
          })
          .catch((err: unknown) => {
            log.error('publish send failed unexpectedly', { publishId: this.job.publishId, error: describeError(err) });
            slot.value.outcome = 'failed';
            slot.value.reason = 'internal error';
            this.settle(slot);
          })
          .finally(() => {
            this.deps.limiter.release();
            inFlight.delete(send);
          });
        inFlight.add(send);
      }
    } finally {
      await scan.return();
    }
    await Promise.all(inFlight);
    if (this.leaseLost) return 'lost';
    if (exhausted && this.window.size === 0) {
      const finishedAt = this.now();
      this.record.state = 'finished';
      this.record.finishedAt = finishedAt;
      this.requestCheckpoint();
      await this.writesDone();
      return this.leaseLost ? 'lost' : 'finished';
    }
    this.requestCheckpoint();
    await this.writesDone();
    return this.leaseLost ? 'lost' : 'stopped';
  }

  /** Cluster: the partition of the publish this run sends; undefined for a shard's own part (LMDB). */
  get partition(): number | undefined {
    return this.scope?.partition.index;
  }

  /** The lease was found lost outside a checkpoint (its renewal): stop, store nothing more. */
  loseLease(): void {
    this.leaseLost = true;
    this.stop();
  }

  /** Ends the loop at the next device; sends in flight go on until they settle or are cut. */
  stop(): void {
    this.stopping = true;
    this.wakeLoop?.();
  }

  /** From now on a failed send is a shutdown cut (left for the restart), not the gateway's answer. */
  cutSends(): void {
    this.cut = true;
  }

  /**
   * This part as `publish.stats` shows it: counts of every settled send, including those not
   * yet checkpointed; with `targets` when given (the coordinator's part).
   */
  stats(targets?: string[]): PublishShardStats {
    return statsOf(this.snapshot(this.live), this.deps.shardIndex, targets);
  }

  /** Notifications counted live but not yet in the stored usage. */
  unpersistedNotifications(): number {
    return this.live.recipients - this.persistedRecipients;
  }

  /** What the coordinator gets once the part is finished. */
  report(): ShardReport {
    return reportOf(this.snapshot(this.committed), this.deps.shardIndex);
  }

  /** The record with a tally's counts, without undefined fields (msgpack keeps them). */
  private snapshot(tally: Tally): ProgressRecord {
    const record: ProgressRecord = {
      ...this.record,
      recipients: tally.recipients,
      gateways: { apns: copyCounts(tally.gateways.apns), fcm: copyCounts(tally.gateways.fcm), web: copyCounts(tally.gateways.web) },
      updatedAt: this.now(),
    };
    if (this.job.kind === 'users') {
      record.users = { withDevices: tally.usersWithDevices.slice(), deliveredToGateway: tally.usersDelivered.slice() };
    } else {
      delete record.users;
    }
    return record;
  }

  /** A send settled: count it live, then commit the finished prefix of the window. */
  private settle(slot: { value: Slot; done: boolean }): void {
    this.window.complete(slot);
    count(this.live, slot.value);
    const { outcome, platform, reason } = slot.value;
    if (outcome !== 'skipped') {
      const key = reason === undefined ? undefined : failureReasonKey(reason);
      countNotification(instanceOfNamespace(this.job.instanceId), platform, outcome, key);
      if (outcome === 'failed' && reason !== undefined) {
        failureLog.write(`${this.job.instanceId}\t${platform}\t${key}`, 'push notification failed', { instanceId: instanceOfNamespace(this.job.instanceId), publishId: this.job.publishId, gateway: platform, reason });
      }
    }
    for (const committed of this.window.takeCommitted()) {
      count(this.committed, committed);
      this.record.position = committed.position;
      this.sinceCheckpoint++;
    }
    if (this.sinceCheckpoint >= this.deps.checkpointEvery) this.requestCheckpoint();
    if (this.wakeLoop && this.window.size < this.deps.windowSize) this.wakeLoop();
  }

  private async removeDevice(deviceId: string, token: string): Promise<void> {
    try {
      // A device re-registered with a new token since the scan read it keeps living (checked inside the transaction).
      await this.deps.devices.deleteIfToken(this.job.instanceId, deviceId, token);
    } catch (err) {
      log.error('could not delete a device with a dead token', { publishId: this.job.publishId, error: String(err) });
    }
  }

  /** Schedules a write of the committed state; writes never overlap and the last one wins. */
  private requestCheckpoint(): void {
    if (this.leaseLost) return;
    this.dirty = true;
    this.writing ??= this.writeLoop().finally(() => {
      this.writing = undefined;
    });
  }

  private async writeLoop(): Promise<void> {
    while (this.dirty) {
      this.dirty = false;
      this.sinceCheckpoint = 0;
      const snapshot = this.snapshot(this.committed);
      const added = snapshot.recipients - this.persistedRecipients;
      try {
        const retained = await this.deps.publishes.saveProgress(snapshot, { instanceId: this.job.instanceId, month: usageMonth(this.now()), notifications: added });
        this.persistedRecipients = snapshot.recipients;
        if (retained > 0) this.deps.onRetained?.(retained);
      } catch (err) {
        if (err instanceof LeaseLostError) {
          // Another node resumes the partition from its last stored checkpoint: stop sending.
          log.warn('publish partition taken over by another node: stopping here', { publishId: this.job.publishId, partition: this.scope?.partition.index });
          this.leaseLost = true;
          this.stop();
          return;
        }
        logWriteFailure(err, 'publish checkpoint write failed', { publishId: this.job.publishId });
      }
    }
  }

  private async writesDone(): Promise<void> {
    while (this.writing) await this.writing;
  }
}

/** The coordinator report of a finished stored part. */
export function reportOf(record: Omit<ProgressRecord, 'shard'>, shard: number): ShardReport {
  const report: ShardReport = {
    publishId: record.publishId,
    shard,
    recipients: record.recipients,
    gateways: record.gateways,
    startedAt: record.startedAt,
    finishedAt: record.finishedAt ?? record.updatedAt,
  };
  if (record.users) report.users = { withDevices: record.users.withDevices, deliveredToGateway: record.users.deliveredToGateway };
  return report;
}

/**
 * Stops `active` runs at shutdown: sends in flight may finish for `graceMs`, the rest are cut
 * (sent again after the restart); resolves once every run has ended and the gateways are closed.
 */
export async function stopRuns(
  active: readonly { run: PublishRun; done: Promise<void> }[],
  graceMs: number,
  limiter: { close(): void },
  gateways: { close(): Promise<void> },
): Promise<void> {
  for (const { run } of active) run.stop();
  limiter.close();
  const allDone = Promise.all(active.map((a) => a.done));
  await Promise.race([allDone, sleep(graceMs)]);
  for (const { run } of active) run.cutSends();
  await gateways.close();
  await allDone;
}
