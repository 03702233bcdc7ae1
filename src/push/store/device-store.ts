/**
 * The push device store of one shard, as the shard's handlers and publish fan-out use it: one
 * interface, two implementations (a factory picks one per shard, push/store/factory.ts):
 *
 * - `LmdbDeviceStore` (lmdb-device-store.ts, over push/shard/devices/lmdb-devices.ts): the
 *   shard's own LMDB environment, the single-node default. A shard holds only the devices the
 *   main thread routes to it (deviceShardFor).
 * - `PostgresDeviceStore` (postgres/postgres-device-store.ts): one PostgreSQL shared by every
 *   shard of every node of a cluster. Point operations reach any device, whatever shard asks;
 *   the per-shard questions (scans, counts, a user's devices) answer for the devices that
 *   deviceShardFor gives to this shard, so the shards of one node together cover every device
 *   once, as with LMDB.
 *
 * Guarantees every implementation keeps (test/unit/push/store/device-store-contract.ts):
 * - every write resolves only once it is durable (synced LMDB commit, PostgreSQL commit) and
 *   is atomic: a device's record, interests and user association never disagree;
 * - reads see every write that resolved before they were issued;
 * - interests and scans are ordered by the UTF-8 bytes of names and device ids;
 * - a scan never holds a cursor or transaction between steps, resumes strictly after a
 *   ScanPosition, and yields each matching device of this shard once.
 * A store that cannot reach its storage rejects with HeraldError PUSH_STORE_UNAVAILABLE.
 */
import type { Platform } from '../platform.js';
import type { SetUserOutcome } from '../messages/devices.js';
import { fnv1a32 } from '../../shards/hash.js';

/** A registered device as the device API and the publisher see it. Optional fields are omitted, never undefined. */
export interface Device {
  id: string;
  instanceId: string;
  platform: Platform;
  /** Gateway token: APNs device token, FCM registration token or web push subscription. */
  token: string;
  /** APNs topic (the app's bundle id); absent when never supplied. */
  bundleIdentifier?: string;
  /** SDK and OS versions the SDK reported (apnsMetadata / fcmMetadata). */
  metadata?: Record<string, string>;
  /** The user the device is associated with (D10/D11); absent until associated. */
  userId?: string;
  /** First registration, milliseconds since the Unix epoch. */
  createdAt: number;
  /** How many interests the device is subscribed to. */
  interestCount: number;
}

/** A registration (D1/D2): the device, its platform and token; bundle id and metadata when given. */
export interface DeviceRegistration {
  instanceId: string;
  deviceId: string;
  platform: Platform;
  token: string;
  bundleIdentifier?: string | undefined;
  metadata?: Record<string, string> | undefined;
}

/** What register() reports: the device's interests survive a re-registration (its user does not). */
export interface RegisterResult {
  id: string;
  /** The device's current interests, sorted by name; empty for a new device. */
  initialInterestSet: string[];
  created: boolean;
}

export type SetUserResult = 'ok' | 'not-found' | 'already-associated';

/** One page of a device's interests (D12). */
export interface InterestPage {
  interests: string[];
  /** Present only when more interests follow. */
  nextCursor?: string;
}

export type ReplaceInterestsResult = 'ok' | 'not-found';
/** `too-many`: the device already has MAX_INTERESTS_PER_DEVICE interests; nothing changed. */
export type AddInterestResult = 'added' | 'unchanged' | 'not-found' | 'too-many';
export type RemoveInterestResult = 'removed' | 'unchanged' | 'not-found';

/** Per-instance totals on this shard, for stats and tests. */
export interface StoreCounts {
  devices: number;
  /** (device, interest) pairs. */
  subscriptions: number;
  devicesWithUser: number;
}

/**
 * A device as a publish's fan-out sees it: what a gateway send needs, without the metadata and
 * creation time. Absent optional fields are undefined (every object has the same shape).
 */
export interface ScanDevice {
  id: string;
  instanceId: string;
  platform: Platform;
  token: string;
  bundleIdentifier: string | undefined;
  userId: string | undefined;
}

/**
 * How far a publish fan-out got, so an interrupted one resumes after a restart without
 * skipping or repeating devices. `listIndex` indexes the list after normaliseScanList();
 * the scan continues strictly after `afterDeviceId` (null: from the start of that entry).
 * Plain JSON-safe data; persist it as is.
 */
export interface ScanPosition {
  readonly listIndex: number;
  readonly afterDeviceId: string | null;
}

/** One device of a fan-out, with the position to resume from once it has been handled. */
export interface ScannedDevice {
  device: ScanDevice;
  position: ScanPosition;
}

/**
 * Yielded by a step scan after a bounded stretch of index entries in a row was passed over
 * without a device (de-duplicated, or stale), so that one `next()` never walks an unbounded
 * stretch: the caller should let other work run before pulling again. `position` is where the
 * scan stands (resuming from it skips nothing that was not yet handled).
 */
export interface ScanProgress {
  device: null;
  position: ScanPosition;
  /** Index entries passed over since the last device or progress step. */
  skipped: number;
}

/** What the step scans yield: a device to handle, or a progress step. */
export type ScanStep = ScannedDevice | ScanProgress;

/**
 * The order in which the scans walk their list: sorted and de-duplicated, so a ScanPosition
 * means the same thing after a restart.
 */
export function normaliseScanList(names: readonly string[]): string[] {
  return [...new Set(names)].sort();
}

/**
 * One of `count` partitions of a fan-out: the devices whose fnv1a32(device id) falls in the
 * `index`-th of `count` equal ranges of the 32-bit hash (partitionBounds). Ranges of the hash,
 * not `hash % count`, so a partition spreads evenly over the shards (which take `hash % shards`).
 * A scan given a partition yields only that partition's devices of what it would yield
 * without; positions mean the same with and without.
 */
export interface ScanPartition {
  readonly index: number;
  readonly count: number;
}

/** The hashes of a partition: `low <= fnv1a32(id) < high`; the whole range without one. RangeError for a bad partition. */
export function partitionBounds(partition: ScanPartition | undefined): { low: number; high: number } {
  if (partition === undefined) return { low: 0, high: 2 ** 32 };
  const { index, count } = partition;
  if (!Number.isSafeInteger(count) || count < 1 || !Number.isSafeInteger(index) || index < 0 || index >= count) {
    throw new RangeError(`scan partition must have 0 <= index < count, got ${index} of ${count}`);
  }
  return { low: Math.ceil((index * 2 ** 32) / count), high: Math.ceil(((index + 1) * 2 ** 32) / count) };
}

/** Whether `deviceId` is in `partition` (always, without one). */
export function inScanPartition(deviceId: string, partition: ScanPartition | undefined): boolean {
  if (partition === undefined) return true;
  const { low, high } = partitionBounds(partition);
  const hash = fnv1a32(deviceId);
  return hash >= low && hash < high;
}

/**
 * A fan-out scan: LMDB answers `next()` synchronously (a plain generator, no promise per
 * device); PostgreSQL with a promise when it reads a batch, synchronously within one (its
 * device-list scan: a promise per step). `return()` ends it early.
 */
export interface ScanSteps {
  next(): IteratorResult<ScanStep, void> | Promise<IteratorResult<ScanStep, void>>;
  return(value: void): unknown;
}

export interface PushDeviceStore {
  /** Which implementation (logs, admin): `lmdb` or `postgres`. */
  readonly kind: 'lmdb' | 'postgres';
  /** Resolves once the store is usable (PostgreSQL: connected, schema migrated); rejects when it cannot be. */
  ready(): Promise<void>;
  /**
   * The installation secret device ids derive from (HMAC of the token): it must be the same
   * wherever a device registers. LMDB: `candidate` (this data dir's). PostgreSQL: the one
   * stored there, `candidate` when none was yet (the first node to start gives its own, so a
   * single node's devices keep their ids once moved to the cluster).
   */
  installSecret(candidate: string): Promise<string>;
  /**
   * Creates the device or, when the id exists, replaces its platform and token (and bundle id
   * and metadata when given; undefined keeps the stored ones). A re-registered device keeps its
   * interests and loses its user association.
   */
  register(registration: DeviceRegistration): Promise<RegisterResult>;
  get(instanceId: string, deviceId: string): Promise<Device | undefined>;
  /** Removes the device with its interests and user association; false when it did not exist. */
  delete(instanceId: string, deviceId: string): Promise<boolean>;
  /** Removes the device only while its token is still `token` (a dead token found by a publish). */
  deleteIfToken(instanceId: string, deviceId: string, token: string): Promise<boolean>;
  setMetadata(instanceId: string, deviceId: string, metadata: Record<string, string>): Promise<boolean>;
  setToken(instanceId: string, deviceId: string, token: string): Promise<boolean>;
  /** Associates the device with `userId`, without the devices-per-user limit (tests, tools). */
  setUser(instanceId: string, deviceId: string, userId: string): Promise<SetUserResult>;
  /**
   * D10/D11: associates the device with `userId` unless the user already has
   * `maxDevicesPerUser` devices: `devicesOnOtherShards` (the caller asked the other shards just
   * before) plus this shard's. Two associations of one user never both pass the limit: LMDB
   * runs a shard's associations one at a time; PostgreSQL counts every shard's devices of the
   * user itself, under a lock on the user that every node takes.
   */
  setUserWithinLimit(instanceId: string, deviceId: string, userId: string, devicesOnOtherShards: number, maxDevicesPerUser: number): Promise<SetUserOutcome>;
  /** Devices of `userId` on this shard. */
  countUserDevices(instanceId: string, userId: string): Promise<number>;
  /** One page of the device's interests by name, strictly after the cursor's name; the cursor is checked first. */
  listInterests(instanceId: string, deviceId: string, limit: number, cursor?: string): Promise<InterestPage | 'not-found' | 'bad-cursor'>;
  /** Makes the device's interests exactly `interests` (duplicates ignored; RangeError past the maximum). */
  replaceInterests(instanceId: string, deviceId: string, interests: readonly string[]): Promise<ReplaceInterestsResult>;
  addInterest(instanceId: string, deviceId: string, interest: string): Promise<AddInterestResult>;
  removeInterest(instanceId: string, deviceId: string, interest: string): Promise<RemoveInterestResult>;
  /** Deletes every device of `userId` on this shard; resolves to how many. */
  deleteUser(instanceId: string, userId: string): Promise<number>;
  /**
   * This shard's devices subscribed to any of `interests`, each once (sorted list order, then
   * device id). Every scan takes an optional `partition` (ScanPartition): then only the
   * devices of that partition, with the same positions; in PostgreSQL, which every shard
   * reads, the partition's devices whichever shard asks (LMDB shards hold only their own).
   */
  scanInterestSteps(instanceId: string, interests: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps;
  /** This shard's devices of any of `userIds`. */
  scanUserSteps(instanceId: string, userIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps;
  /** The named devices this shard holds (ids it does not hold are skips). */
  scanDeviceSteps(instanceId: string, deviceIds: readonly string[], resumeFrom?: ScanPosition, partition?: ScanPartition): ScanSteps;
  /** Totals for one instance on this shard. */
  counts(instanceId: string): Promise<StoreCounts>;
  /** Devices of one instance on this shard by platform (reads every record: callers cache). */
  platformCounts(instanceId: string): Promise<Record<Platform, number>>;
  /** Disagreements between records and indexes (tests and offline checks); empty means consistent. */
  checkConsistency(instanceId?: string): Promise<string[]>;
  /** Releases what the store holds of its own (PostgreSQL: its connections); LMDB closes with the shard. */
  close(): Promise<void>;
}
