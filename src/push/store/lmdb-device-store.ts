/**
 * The push device store over the shard's own LMDB environment (the single-node default): the
 * LmdbDevices of push/shard/devices behind the PushDeviceStore interface. Its reads are
 * synchronous, answered as settled promises; its scans stay plain generators (no promise per
 * device on the fan-out's hot path).
 */
import type { RootDatabase } from 'lmdb';
import { LmdbDevices } from '../shard/devices/lmdb-devices.js';
import type { SetUserOutcome } from '../messages/devices.js';
import type { DeviceRegistration, PushDeviceStore, ScanPartition, ScanPosition, ScanSteps } from './device-store.js';

export class LmdbDeviceStore implements PushDeviceStore {
  readonly kind = 'lmdb';
  /** The LMDB store itself (resharding and tests read it directly). */
  readonly lmdb: LmdbDevices;
  private userQueue: Promise<unknown> = Promise.resolve();

  constructor(root: RootDatabase) {
    this.lmdb = new LmdbDevices(root);
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  installSecret(candidate: string): Promise<string> {
    return Promise.resolve(candidate);
  }

  register(registration: DeviceRegistration) {
    return this.lmdb.register(registration);
  }

  async get(instanceId: string, deviceId: string) {
    return this.lmdb.get(instanceId, deviceId);
  }

  delete(instanceId: string, deviceId: string) {
    return this.lmdb.delete(instanceId, deviceId);
  }

  deleteIfToken(instanceId: string, deviceId: string, token: string) {
    return this.lmdb.deleteIfToken(instanceId, deviceId, token);
  }

  setMetadata(instanceId: string, deviceId: string, metadata: Record<string, string>) {
    return this.lmdb.setMetadata(instanceId, deviceId, metadata);
  }

  setToken(instanceId: string, deviceId: string, token: string) {
    return this.lmdb.setToken(instanceId, deviceId, token);
  }

  setUser(instanceId: string, deviceId: string, userId: string) {
    return this.lmdb.setUser(instanceId, deviceId, userId);
  }

  setUserWithinLimit(instanceId: string, deviceId: string, userId: string, devicesOnOtherShards: number, maxDevicesPerUser: number): Promise<SetUserOutcome> {
    // One at a time on this shard, so the count checked cannot be overtaken by another association committing meanwhile.
    const task = async (): Promise<SetUserOutcome> => {
      const device = this.lmdb.get(instanceId, deviceId);
      if (!device) return 'not-found';
      if (device.userId === userId) return 'ok';
      if (device.userId !== undefined) return 'already-associated';
      if (devicesOnOtherShards + this.lmdb.countUserDevices(instanceId, userId) >= maxDevicesPerUser) return 'limit';
      return this.lmdb.setUser(instanceId, deviceId, userId);
    };
    const run = this.userQueue.then(task, task);
    this.userQueue = run.catch(() => undefined);
    return run;
  }

  async countUserDevices(instanceId: string, userId: string) {
    return this.lmdb.countUserDevices(instanceId, userId);
  }

  async listInterests(instanceId: string, deviceId: string, limit: number, cursor?: string) {
    return this.lmdb.listInterests(instanceId, deviceId, limit, cursor);
  }

  async replaceInterests(instanceId: string, deviceId: string, interests: readonly string[]) {
    return this.lmdb.replaceInterests(instanceId, deviceId, interests);
  }

  addInterest(instanceId: string, deviceId: string, interest: string) {
    return this.lmdb.addInterest(instanceId, deviceId, interest);
  }

  removeInterest(instanceId: string, deviceId: string, interest: string) {
    return this.lmdb.removeInterest(instanceId, deviceId, interest);
  }

  deleteUser(instanceId: string, userId: string) {
    return this.lmdb.deleteUser(instanceId, userId);
  }

  scanInterestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps {
    return this.lmdb.scanInterestSteps(instanceId, interests, resumeFrom, partition);
  }

  scanUserSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps {
    return this.lmdb.scanUserSteps(instanceId, userIds, resumeFrom, partition);
  }

  scanDeviceSteps(instanceId: string, deviceIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps {
    return this.lmdb.scanDeviceSteps(instanceId, deviceIds, resumeFrom, partition);
  }

  async counts(instanceId: string) {
    return this.lmdb.counts(instanceId);
  }

  async platformCounts(instanceId: string) {
    return this.lmdb.platformCounts(instanceId);
  }

  async checkConsistency(instanceId?: string) {
    return this.lmdb.checkConsistency(instanceId);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
