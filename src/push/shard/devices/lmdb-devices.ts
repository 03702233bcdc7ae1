/**
 * Durable storage of one shard's push devices: each device's record, its interests and its
 * user association, changed together in one LMDB transaction so the indexes never disagree.
 *
 * Key layout: four named databases in the shard's environment, keys are string tuples encoded
 * by keys.ts (exact prefix ranges, any text safe), and every key starts with the instance id,
 * so instances never see each other's data.
 *
 *   push/devices           (instanceId, deviceId)            → DeviceRecord (device-record.ts)
 *   push/interests         (instanceId, interest, deviceId)  → empty   fan-out by interest
 *   push/device-interests  (instanceId, deviceId, interest)  → empty   a device's interests, by name
 *   push/users             (instanceId, userId, deviceId)    → empty   fan-out by user, user limits
 *
 * Durability: every write method runs one `childTransaction` and resolves when lmdb-js's commit
 * promise does. The shard environment is opened with `overlappingSync: false` and without
 * `noSync`/`noMetaSync` (see openShardDatabase in src/shards/storage.ts), so LMDB's commit
 * fdatasyncs the data and meta pages before the promise resolves: a resolved write survives
 * kill -9 and power loss. (lmdb-js's default on Linux, `overlappingSync: true`, resolves at
 * commit and flushes afterwards, which is not enough for a 200.) A child transaction rather
 * than `transaction` because lmdb-js keeps the partial writes of a plain transaction callback
 * that throws; a child transaction is aborted instead, so a failed method changes nothing.
 *
 * Reads are synchronous and see the latest committed state. This file holds the writes and
 * point reads; the fan-out walk is device-scan.ts, the cross-check device-consistency.ts.
 */
import type { Database, RootDatabase } from 'lmdb';
import type { Platform } from '../../platform.js';
import { openShardDatabase } from '../../../shards/storage.js';
import { decodeInterestCursor, encodeInterestCursor } from './cursor.js';
import { decodeDeviceRecord, encodeDeviceRecord, type DeviceRecord } from './device-record.js';
import { checkDeviceConsistency } from './device-consistency.js';
import { interestsOf, openDeviceDatabases, readRecord, type DeviceDatabases, type IndexDatabase } from './device-databases.js';
import { DeviceScan, devicesOnly } from './device-scan.js';
import type {
  AddInterestResult,
  Device,
  InterestPage,
  DeviceRegistration,
  RegisterResult,
  RemoveInterestResult,
  ReplaceInterestsResult,
  ScanPartition,
  ScanPosition,
  ScanStep,
  ScannedDevice,
  SetUserResult,
  StoreCounts,
} from '../../store/device-store.js';
import { MAX_INTERESTS_PER_DEVICE } from '../../interest-name.js';
import { encodeKey, keyAfter, lastKeyPart, prefixRange } from '../../keys.js';

const EMPTY = Buffer.alloc(0);

/** Opens a shard's LMDB environment with the durable settings of src/shards/storage.ts. */
export function openShardStore(path: string): RootDatabase {
  return openShardDatabase(path);
}

function withoutUndefined(record: DeviceRecord): DeviceRecord {
  const out: DeviceRecord = {
    platform: record.platform,
    token: record.token,
    createdAt: record.createdAt,
    interestCount: record.interestCount,
  };
  if (record.bundleIdentifier !== undefined) out.bundleIdentifier = record.bundleIdentifier;
  if (record.metadata !== undefined) out.metadata = { ...record.metadata };
  if (record.userId !== undefined) out.userId = record.userId;
  return out;
}

function toDevice(instanceId: string, id: string, record: DeviceRecord): Device {
  return { id, instanceId, ...withoutUndefined(record) };
}

/**
 * Devices, interests and user associations of one shard, over named databases of the shard's
 * LMDB environment (behind the PushDeviceStore interface: push/store/lmdb-device-store.ts). Every async method resolves only after its transaction is durable.
 */
export class LmdbDevices {
  private readonly root: RootDatabase;
  private readonly db: DeviceDatabases;
  /** Values are device-record.ts bytes (or msgpack, from before that format); read with record(). */
  private readonly devices: Database<Buffer, Uint8Array>;
  private readonly interestIndex: IndexDatabase;
  private readonly deviceInterests: IndexDatabase;
  private readonly userIndex: IndexDatabase;
  private readonly scan: DeviceScan;

  /** Opens (creating when missing) the store's databases; must not run inside a transaction. */
  constructor(root: RootDatabase) {
    this.root = root;
    this.db = openDeviceDatabases(root);
    ({ devices: this.devices, interestIndex: this.interestIndex, deviceInterests: this.deviceInterests, userIndex: this.userIndex } = this.db);
    this.scan = new DeviceScan(this.db);
  }

  /**
   * Creates the device or, when the id exists, replaces its platform and token (and bundle id
   * and metadata when given; undefined keeps the stored ones). A re-registered device keeps
   * its interests (device-level settings) but loses its user association, record and user
   * index alike, in the same transaction: ids derive from the token, so re-registering is
   * what a new app install or another person on the same device does, and they must not get
   * the previous user's notifications nor be refused their own association.
   */
  register(registration: DeviceRegistration): Promise<RegisterResult> {
    const { instanceId, deviceId, platform, token, bundleIdentifier, metadata } = registration;
    const key = encodeKey([instanceId, deviceId]);
    const now = Date.now();
    return this.root.childTransaction((): RegisterResult => {
      const existing = this.record(key);
      const record = withoutUndefined({
        platform,
        token,
        bundleIdentifier: bundleIdentifier ?? existing?.bundleIdentifier,
        metadata: metadata ?? existing?.metadata,
        createdAt: existing?.createdAt ?? now,
        interestCount: existing?.interestCount ?? 0,
      });
      if (existing?.userId !== undefined) this.userIndex.removeSync(encodeKey([instanceId, existing.userId, deviceId]));
      this.putRecord(key, record);
      const initialInterestSet = existing ? this.interestsOf(instanceId, deviceId) : [];
      return { id: deviceId, initialInterestSet, created: !existing };
    });
  }

  /** The device, or undefined when this shard has no such device in the instance. */
  get(instanceId: string, deviceId: string): Device | undefined {
    const record = this.record(encodeKey([instanceId, deviceId]));
    return record && toDevice(instanceId, deviceId, record);
  }

  /** Removes the device with its interests and user association; false when it did not exist. */
  delete(instanceId: string, deviceId: string): Promise<boolean> {
    return this.root.childTransaction(() => {
      const record = this.record(encodeKey([instanceId, deviceId]));
      if (!record) return false;
      this.removeDevice(instanceId, deviceId, record);
      return true;
    });
  }

  /**
   * Removes the device only if its token is still `token` (compared inside the transaction):
   * a device re-registered or refreshed (D9) with another token since a publish read it keeps
   * living. False when it was not removed.
   */
  deleteIfToken(instanceId: string, deviceId: string, token: string): Promise<boolean> {
    return this.root.childTransaction(() => {
      const record = this.record(encodeKey([instanceId, deviceId]));
      if (!record || record.token !== token) return false;
      this.removeDevice(instanceId, deviceId, record);
      return true;
    });
  }

  /** Replaces the device's metadata; false when the device does not exist. */
  setMetadata(instanceId: string, deviceId: string, metadata: Record<string, string>): Promise<boolean> {
    return this.update(instanceId, deviceId, (record) => ({ ...record, metadata }));
  }

  /** Replaces the device's gateway token; false when the device does not exist. */
  setToken(instanceId: string, deviceId: string, token: string): Promise<boolean> {
    return this.update(instanceId, deviceId, (record) => ({ ...record, token }));
  }

  /**
   * Associates the device with `userId`; associating it again with the same user is `ok`.
   * The 100-devices-per-user limit spans shards, so the caller checks it (countUserDevices).
   */
  setUser(instanceId: string, deviceId: string, userId: string): Promise<SetUserResult> {
    const key = encodeKey([instanceId, deviceId]);
    const userKey = encodeKey([instanceId, userId, deviceId]);
    return this.root.childTransaction((): SetUserResult => {
      const record = this.record(key);
      if (!record) return 'not-found';
      if (record.userId === userId) return 'ok';
      if (record.userId !== undefined) return 'already-associated';
      this.putRecord(key, withoutUndefined({ ...record, userId }));
      this.userIndex.putSync(userKey, EMPTY);
      return 'ok';
    });
  }

  /** Devices associated with `userId` on this shard. */
  countUserDevices(instanceId: string, userId: string): number {
    return this.userIndex.getKeysCount(prefixRange([instanceId, userId]));
  }

  /**
   * One page of the device's interests, sorted by name, continuing strictly after the name in
   * `cursor`. A cursor is checked before the device is looked up. `limit` is a positive integer.
   */
  listInterests(
    instanceId: string,
    deviceId: string,
    limit: number,
    cursor?: string,
  ): InterestPage | 'not-found' | 'bad-cursor' {
    if (!Number.isSafeInteger(limit) || limit < 1) throw new RangeError(`limit must be a positive integer, got ${limit}`);
    const range = prefixRange([instanceId, deviceId]);
    let start = range.start;
    if (cursor !== undefined) {
      const after = decodeInterestCursor(cursor);
      if (after === undefined) return 'bad-cursor';
      start = keyAfter([instanceId, deviceId, after]);
    }
    if (!this.devices.doesExist(encodeKey([instanceId, deviceId]))) return 'not-found';
    const interests: string[] = [];
    for (const key of this.deviceInterests.getKeys({ start, end: range.end, limit: limit + 1 })) {
      interests.push(lastKeyPart(key));
    }
    if (interests.length <= limit) return { interests };
    interests.length = limit;
    return { interests, nextCursor: encodeInterestCursor(interests[limit - 1]!) };
  }

  /**
   * Makes the device's interests exactly `interests` (duplicates ignored). The caller validates
   * names and the count; more than MAX_INTERESTS_PER_DEVICE distinct names throws a RangeError.
   */
  replaceInterests(instanceId: string, deviceId: string, interests: readonly string[]): Promise<ReplaceInterestsResult> {
    const wanted = new Set(interests);
    if (wanted.size > MAX_INTERESTS_PER_DEVICE) {
      throw new RangeError(`a device holds at most ${MAX_INTERESTS_PER_DEVICE} interests, got ${wanted.size}`);
    }
    const key = encodeKey([instanceId, deviceId]);
    return this.root.childTransaction((): ReplaceInterestsResult => {
      const record = this.record(key);
      if (!record) return 'not-found';
      const current = this.interestsOf(instanceId, deviceId);
      const currentSet = new Set(current);
      for (const name of current) {
        if (!wanted.has(name)) this.unsubscribe(instanceId, deviceId, name);
      }
      // Sorted inserts keep both B-trees' writes local.
      const added = [...wanted].filter((name) => !currentSet.has(name)).sort();
      for (const name of added) this.subscribe(instanceId, deviceId, name);
      if (record.interestCount !== wanted.size) {
        this.putRecord(key, withoutUndefined({ ...record, interestCount: wanted.size }));
      }
      return 'ok';
    });
  }

  /** Subscribes the device to `interest`; subscribing twice is `unchanged`. */
  addInterest(instanceId: string, deviceId: string, interest: string): Promise<AddInterestResult> {
    const key = encodeKey([instanceId, deviceId]);
    const subscription = encodeKey([instanceId, deviceId, interest]);
    return this.root.childTransaction((): AddInterestResult => {
      const record = this.record(key);
      if (!record) return 'not-found';
      if (this.deviceInterests.doesExist(subscription)) return 'unchanged';
      if (record.interestCount >= MAX_INTERESTS_PER_DEVICE) return 'too-many';
      this.subscribe(instanceId, deviceId, interest);
      this.putRecord(key, withoutUndefined({ ...record, interestCount: record.interestCount + 1 }));
      return 'added';
    });
  }

  /** Unsubscribes the device from `interest`; removing an absent interest is `unchanged`. */
  removeInterest(instanceId: string, deviceId: string, interest: string): Promise<RemoveInterestResult> {
    const key = encodeKey([instanceId, deviceId]);
    const subscription = encodeKey([instanceId, deviceId, interest]);
    return this.root.childTransaction((): RemoveInterestResult => {
      const record = this.record(key);
      if (!record) return 'not-found';
      if (!this.deviceInterests.doesExist(subscription)) return 'unchanged';
      this.unsubscribe(instanceId, deviceId, interest);
      this.putRecord(key, withoutUndefined({ ...record, interestCount: record.interestCount - 1 }));
      return 'removed';
    });
  }

  /** Deletes every device of `userId` on this shard (records and indexes); resolves to how many. */
  deleteUser(instanceId: string, userId: string): Promise<number> {
    const range = prefixRange([instanceId, userId]);
    return this.root.childTransaction(() => {
      const deviceIds = Array.from(this.userIndex.getKeys(range), lastKeyPart);
      let deleted = 0;
      for (const deviceId of deviceIds) {
        const record = this.record(encodeKey([instanceId, deviceId]));
        if (record) {
          this.removeDevice(instanceId, deviceId, record);
          deleted++;
        }
        // A user entry always has its device; remove it anyway so a stray one cannot linger.
        this.userIndex.removeSync(encodeKey([instanceId, userId, deviceId]));
      }
      return deleted;
    });
  }

  /**
   * Streams every device subscribed to any of `interests`, each once, in list order then
   * device-id order, holding at most one batch of index keys: a device found under the k-th
   * interest is skipped when it is also subscribed to an earlier one (it was yielded there).
   * No read transaction or cursor is held between yields, so a slow consumer does not pin
   * old pages; the price is that devices changed while the scan runs may be seen in their new
   * state, and one moved between interests mid-scan may be missed or seen twice.
   *
   * A stretch of skipped devices is walked inside one `next()`; the fan-out, which must not
   * block its thread that long, uses scanInterestSteps.
   */
  scanInterests(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition): Generator<ScannedDevice, void, undefined> {
    return devicesOnly(this.scanInterestSteps(instanceId, interests, resumeFrom));
  }

  /**
   * scanInterests that also yields a ScanProgress step after every SCAN_BATCH index entries
   * passed over without a device (with 100k devices subscribed to both `a` and `b`, the walk
   * of `b` is all skips: without the steps, one `next()` took most of a second).
   */
  scanInterestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    return this.scan.interestSteps(instanceId, interests, resumeFrom, partition);
  }

  /** Streams every device of any of `userIds`, like scanInterests (a device has one user, so no de-duplication is needed). */
  scanUsers(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition): Generator<ScannedDevice, void, undefined> {
    return devicesOnly(this.scanUserSteps(instanceId, userIds, resumeFrom));
  }

  /** scanUsers with progress steps, like scanInterestSteps (stale user index entries are the only skips). */
  scanUserSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    return this.scan.userSteps(instanceId, userIds, resumeFrom, partition);
  }

  /** The named devices this shard holds, with progress steps like scanUserSteps (ids it does not hold are skips). */
  scanDeviceSteps(instanceId: string, deviceIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): Generator<ScanStep, void, undefined> {
    return this.scan.deviceSteps(instanceId, deviceIds, resumeFrom, partition);
  }

  /** Totals for one instance on this shard (each a range count, linear in its size). */
  counts(instanceId: string): StoreCounts {
    const range = prefixRange([instanceId]);
    return {
      devices: this.devices.getKeysCount(range),
      subscriptions: this.interestIndex.getKeysCount(range),
      devicesWithUser: this.userIndex.getKeysCount(range),
    };
  }

  /**
   * Devices of one instance on this shard by platform, for the dashboard. Reads every record of
   * the instance (linear in its size: about a second per million devices), so callers cache it.
   */
  platformCounts(instanceId: string): Record<Platform, number> {
    const counts: Record<Platform, number> = { apns: 0, fcm: 0, web: 0 };
    for (const { value } of this.devices.getRange(prefixRange([instanceId]))) {
      counts[decodeDeviceRecord(value).platform]++;
    }
    return counts;
  }

  /**
   * Cross-checks the three indexes against the device records (of one instance, or all) and
   * returns a description of each disagreement; empty means consistent (device-consistency.ts).
   */
  checkConsistency(instanceId?: string): string[] {
    return checkDeviceConsistency(this.db, instanceId);
  }

  /** The stored record under a device key, decoded at once (getBinaryFast's bytes are reused by the next read). */
  private record(key: Uint8Array): DeviceRecord | undefined {
    return readRecord(this.db, key);
  }

  /** Writes a record in the current format. Inside a transaction only. */
  private putRecord(key: Uint8Array, record: DeviceRecord): void {
    this.devices.putSync(key, encodeDeviceRecord(record));
  }

  /** Read-modify-write of one record in its own transaction; false when the device does not exist. */
  private update(instanceId: string, deviceId: string, change: (record: DeviceRecord) => DeviceRecord): Promise<boolean> {
    const key = encodeKey([instanceId, deviceId]);
    return this.root.childTransaction(() => {
      const record = this.record(key);
      if (!record) return false;
      this.putRecord(key, withoutUndefined(change(record)));
      return true;
    });
  }

  /** The device's interests, sorted by name (at most MAX_INTERESTS_PER_DEVICE). */
  private interestsOf(instanceId: string, deviceId: string): string[] {
    return interestsOf(this.db, instanceId, deviceId);
  }

  /** Both index entries of one subscription; the caller keeps interestCount right. Inside a transaction only. */
  private subscribe(instanceId: string, deviceId: string, interest: string): void {
    this.interestIndex.putSync(encodeKey([instanceId, interest, deviceId]), EMPTY);
    this.deviceInterests.putSync(encodeKey([instanceId, deviceId, interest]), EMPTY);
  }

  private unsubscribe(instanceId: string, deviceId: string, interest: string): void {
    this.interestIndex.removeSync(encodeKey([instanceId, interest, deviceId]));
    this.deviceInterests.removeSync(encodeKey([instanceId, deviceId, interest]));
  }

  /** Removes a device's record and every index entry. Inside a transaction only. */
  private removeDevice(instanceId: string, deviceId: string, record: DeviceRecord): void {
    for (const interest of this.interestsOf(instanceId, deviceId)) this.unsubscribe(instanceId, deviceId, interest);
    if (record.userId !== undefined) this.userIndex.removeSync(encodeKey([instanceId, record.userId, deviceId]));
    this.devices.removeSync(encodeKey([instanceId, deviceId]));
  }
}
